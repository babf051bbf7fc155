"""FSDP2 × tensor parallel on a 2-D device mesh (data-parallel × tensor-parallel, 2 × 2 on 4
GPUs with NCCL, or 4 CPU ranks with gloo), compiled, a few training steps: for ``tuidebug trace
--nproc-per-node 4``. Not a test: the lead runs it on a 4-GPU machine (bench/dist_gpu.sh).

    tuidebug trace --nproc-per-node 4 --timeout 300 -o /tmp/tp-job bench/fsdp_tp_job.py
    tuidebug trace --nproc-per-node 4 --timeout 300 -o /tmp/tp-odd bench/fsdp_tp_job.py --odd

Each block's MLP is split over the tensor-parallel dimension (``fc1`` column-wise, ``fc2``
row-wise: an all-reduce of its output per block), every block and the model sharded over the
data-parallel dimension with ``fully_shard`` (bf16 parameters, fp32 gradient reduction). The two
ranks of a tensor-parallel group see the same batch (seeded by their data-parallel rank).
``--odd`` plants a divergence: at step 2 the second data-parallel replica alone (ranks 2 and 3,
one tensor-parallel group) feeds a sequence twice as long — a recompile the other replica
does not have, which ``tuidebug info`` names as the job's first divergence.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _dist import init_rank, train  # noqa: E402


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln(x))))


class Model(nn.Module):
    def __init__(self, layers: int, dim: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(dim) for _ in range(layers)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for b in self.blocks:
            x = b(x)
        return x


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--tp", type=int, default=2, help="the tensor-parallel size")
    ap.add_argument("--odd", action="store_true",
                    help="data-parallel replica 1 alone feeds a longer sequence at step 2")
    a = ap.parse_args()
    cuda, rank, device = init_rank()
    world = dist.get_world_size()
    if world % a.tp:
        raise SystemExit(f"world size {world} is not a multiple of --tp {a.tp}")
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    mesh = init_device_mesh("cuda" if cuda else "cpu", (world // a.tp, a.tp),
                            mesh_dim_names=("dp", "tp"))
    dp_rank = mesh["dp"].get_local_rank()
    dim = a.dim if cuda else min(a.dim, 64)
    seq = a.seq if cuda else min(a.seq, 16)
    torch.manual_seed(0)
    model = Model(a.layers, dim).to(device)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.blocks:
        parallelize_module(block, mesh["tp"], {"fc1": ColwiseParallel(),
                                               "fc2": RowwiseParallel()})
        fully_shard(block, mesh=mesh["dp"], mp_policy=mp)
    fully_shard(model, mesh=mesh["dp"], mp_policy=mp)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    # static shapes: the odd replica's longer sequence is a recompile of its own (with automatic
    # dynamic shapes, torch 2.13 on the CPU hit a RecursionError tracing that recompile's DTensors)
    compiled = torch.compile(model, dynamic=False)

    def batch(step: int) -> torch.Tensor:  # the same on both ranks of a tensor-parallel group
        n = seq * 2 if (a.odd and dp_rank == 1 and step == 1) else seq
        g = torch.Generator(device=device).manual_seed(1000 * dp_rank + step)
        return torch.randn(a.batch, n, dim, device=device, dtype=torch.bfloat16, generator=g)

    tp_rank = mesh["tp"].get_local_rank()
    train(compiled, opt, a.steps, batch,
          lambda step, x: f"rank {rank} (dp {dp_rank}, tp {tp_rank}) step {step} "
                          f"seq {x.shape[1]}", cuda)


if __name__ == "__main__":
    main()
