"""One call over two GPUs (as a model placed with ``device_map="auto"``): a small matmul on
cuda:0, its result moved to cuda:1, then a long one there (8192², float32: tens of
milliseconds). Its arguments come cuda:0 first. Prints the cuda:1 matmul's own CUDA-event time
(tests/gpu/test_cuda_call_devices.py compares the whole call's timing with it)."""

import torch

N = 8192


def split(x, w0, w1):
    h = (x @ w0).to(w1.device)
    return h @ w1


def kernel_seconds(h: torch.Tensor, w1: torch.Tensor) -> float:
    """The cuda:1 matmul's time on cuda:1's own stream, the least of 5 (after one)."""
    stream = torch.cuda.current_stream(w1.device)
    h @ w1
    times = []
    for _ in range(5):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record(stream)
        h @ w1
        end.record(stream)
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000.0)
    return min(times)


def main() -> None:
    d0, d1 = torch.device("cuda", 0), torch.device("cuda", 1)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(N, 64, generator=gen).to(d0)
    w0 = (torch.randn(64, N, generator=gen) / 8).to(d0)
    w1 = (torch.randn(N, N, generator=gen) / N ** 0.5).to(d1)
    compiled = torch.compile(split)
    for _ in range(2):
        y = compiled(x, w0, w1)
    assert y.device == d1 and torch.isfinite(y).all().item()
    h = (x @ w0).to(d1)
    print(f"two gpus: kernel {kernel_seconds(h, w1):.6f} s on cuda:1", flush=True)


if __name__ == "__main__":
    main()
