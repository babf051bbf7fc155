"""A job whose compiled graphs issue collectives, for ``tuidebug trace --nproc-per-node N`` on
GPUs (NCCL) or CPUs (gloo). Not a test: the lead runs it on GPUs (docs/distributed.md).

    tuidebug trace --nproc-per-node 2 --set reorder_for_compute_comm_overlap=True \\
        -o /tmp/nccl-job bench/collectives_job.py
    tuidebug info /tmp/nccl-job --json     # divergence null; then per rank:
    cat /tmp/nccl-job/rank_0/graphs/0_0-inference/collectives.json   # "reordered": true?

``--odd`` makes rank 1 issue its all-gather before its all-reduce (a sequence that differs;
on NCCL this one can hang: run it with ``--timeout`` once that exists). ``--fsdp`` also runs
an FSDP2 (``fully_shard``) model for one step.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist


class Net(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.l0 = torch.nn.Linear(width, width)
        self.l1 = torch.nn.Linear(width, width)

    def forward(self, x):
        return torch.relu(self.l1(torch.relu(self.l0(x))))


def main() -> None:
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else "cpu"
    if cuda:
        torch.cuda.set_device(device)
    odd = "--odd" in sys.argv and rank == 1
    n = 2048 if cuda else 256

    @torch.compile
    def step(a, b):
        x = a @ b                                # compute that a reordering can overlap
        g = torch.empty(world * x.shape[0], x.shape[1], device=x.device, dtype=x.dtype)
        if odd:
            dist.all_gather_into_tensor(g, x)
        y = torch.relu(x) * 2
        dist.all_reduce(y)
        if not odd:
            dist.all_gather_into_tensor(g, x)
        z = (y @ b).sum() + g.sum()
        return z

    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    print(rank, float(step(a, b)))
    if "--fsdp" in sys.argv:
        from torch.distributed.fsdp import fully_shard

        model = Net(n).to(device)
        fully_shard(model.l0)
        fully_shard(model.l1)
        fully_shard(model)
        torch.compile(model)(torch.randn(8, n, device=device)).sum().backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
