"""A hang inside compiled code, for ``tuidebug trace --nproc-per-node 2 --timeout S`` on 2 GPUs
(NCCL) or CPUs (gloo). Not a test: the lead runs it on a GPU machine (bench/dist_gpu.sh); the
CPU case is tests/distributed/test_hangs.py.

    tuidebug trace --nproc-per-node 2 --timeout 120 -o /tmp/chang bench/compiled_hang_job.py

A compiled step issues a functional all_reduce (Inductor's wrapper calls
``_c10d_functional.all_reduce_`` and ``wait_tensor``); at step 3 rank 1 stops calling it and
sleeps. On NCCL the wait only makes rank 0's stream wait: rank 0 blocks at the ``.item()`` that
follows; on gloo it blocks in the wait itself. ``tuidebug info`` names the collective rank 0
issued and rank 1 never reached (graph, index, wrapper line, user line) and each rank's line.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _dist import init_rank  # noqa: E402


def main() -> None:
    _, rank, device = init_rank()
    world = dist.group.WORLD

    @torch.compile
    def step(x):
        y = funcol.all_reduce(torch.sin(x), "sum", world)  # the compiled all_reduce
        return y * 0.5

    x = torch.ones(1024, device=device)
    for i in range(4):
        if rank == 1 and i == 2:
            time.sleep(3600)  # rank 1 stops here
        x = step(x)
        print(f"rank {rank} step {i}: {x.sum().item():.4f}", flush=True)  # rank 0 waits here
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
