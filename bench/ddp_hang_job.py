"""A hang in DDP's bucket all-reduces, for ``tuidebug trace --nproc-per-node 2 --timeout S`` on 2
GPUs (NCCL) or CPUs (gloo). Not a test: the lead runs it on a GPU machine (bench/dist_gpu.sh);
the CPU case is tests/distributed/test_hangs.py.

    tuidebug trace --nproc-per-node 2 --timeout 120 -o /tmp/ddphang bench/ddp_hang_job.py

A compiled DistributedDataParallel model (three 4 MiB layers, 4 MB buckets: DDPOptimizer splits
the graph at them; the reducer all-reduces each bucket from its autograd hooks) trains two
steps on both ranks; at the third, rank 1 sleeps before its backward. Rank 0 issues its bucket
all-reduces and waits (gloo: in the backward's end; NCCL: at the ``.item()`` that follows,
the all-reduces queued on its stream). ``tuidebug info`` names the DDP bucket all-reduce rank 0
issued and rank 1 never reached, and each rank's line.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _dist import init_rank  # noqa: E402


class Net(torch.nn.Module):
    """The script's own module (Dynamo compiles it inside DDP; torch's own modules it skips)."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(1024, 1024) for _ in range(3)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def main() -> None:
    cuda, rank, device = init_rank()
    torch.manual_seed(0)
    net = Net().to(device)
    model = torch.compile(DistributedDataParallel(net, bucket_cap_mb=4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i in range(3):
        loss = model(torch.randn(16, 1024, device=device)).pow(2).mean()
        if rank == 1 and i == 2:
            time.sleep(3600)  # rank 1 stops before its backward
        loss.backward()  # the bucket all-reduces
        opt.step()
        opt.zero_grad()
        print(f"rank {rank} step {i}: loss {loss.item():.4f}", flush=True)  # NCCL: rank 0 waits
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
