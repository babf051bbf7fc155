"""What the distributed bench jobs share: a rank's process group and device (NCCL on its GPU,
or gloo on the CPU), and the compiled training steps they time and print."""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import torch
import torch.distributed as dist


def init_rank() -> tuple[bool, int, Any]:
    """Join the job's process group: (on CUDA, this rank, its device)."""
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else "cpu"
    if cuda:
        torch.cuda.set_device(device)
    return cuda, dist.get_rank(), device


def train(compiled: Callable[[torch.Tensor], torch.Tensor], opt: Any, steps: int,
          batch: Callable[[int], torch.Tensor], label: Callable[[int, torch.Tensor], str],
          cuda: bool) -> None:
    """``steps`` training steps of ``compiled`` on ``batch(step)`` (mean square loss), each
    printed as ``{label(step, x)}: loss L (S s)``; then leave the process group."""
    for step in range(steps):
        x = batch(step)
        t0 = time.perf_counter()
        loss = compiled(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        if cuda:
            torch.cuda.synchronize()
        print(f"{label(step, x)}: loss {loss.item():.4f} ({time.perf_counter() - t0:.2f} s)",
              flush=True)
    dist.destroy_process_group()
