"""A 2-rank NCCL job whose ranks never call ``torch.cuda.set_device``: each puts its tensors on
``cuda:LOCAL_RANK`` and compiles a step issuing a functional all_reduce, called twice. Traced
with ``--profile``, the whole call's agreement between the ranks put its flags on
``torch.cuda.current_device()`` — device 0 on both ranks: NCCL refused two ranks on one device.
It prints each rank's result, as untraced.

Then each rank compiles one long matmul (8192², float32: one cuBLAS kernel of tens of
milliseconds) on its own device, called twice, and prints that kernel's time measured plainly
with CUDA events on its own device's stream. Rank 1's current device is ``cuda:0``: the whole
call's timing synchronized and recorded its events there, and timed only the launch (tens of
microseconds); on the call's own device it covers the kernel."""

import os

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

N = 8192


def matmul(a, w):
    return a @ w


def kernel_seconds(device: torch.device, a: torch.Tensor, w: torch.Tensor) -> float:
    """The eager matmul's time on ``device``'s own stream, the least of 5 (after one)."""
    stream = torch.cuda.current_stream(device)
    matmul(a, w)
    times = []
    for _ in range(5):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record(stream)
        matmul(a, w)
        end.record(stream)
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000.0)
    return min(times)


def main() -> None:
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))  # no set_device
    world = dist.group.WORLD

    @torch.compile
    def step(x):
        return funcol.all_reduce(torch.sin(x), "sum", world) * 2

    x = torch.ones(256, device=device)
    for _ in range(2):
        x = step(x)
    print(f"rank {rank}: nccl {x.sum().item():.4f}", flush=True)

    heavy = torch.compile(matmul)
    gen = torch.Generator(device=device).manual_seed(rank)
    a = torch.randn(N, N, device=device, generator=gen)
    w = torch.randn(N, N, device=device, generator=gen) / N ** 0.5
    for _ in range(2):
        y = heavy(a, w)
    assert y.device == device and torch.isfinite(y).all().item()
    print(f"rank {rank}: kernel {kernel_seconds(device, a, w):.6f} s on {device}, current "
          f"device cuda:{torch.cuda.current_device()}", flush=True)
    dist.barrier(device_ids=[device.index])
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
