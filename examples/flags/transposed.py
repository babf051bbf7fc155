"""Every input read through a transpose; the result keeps the transposed layout.

The output ``a.t() + b.t() * c.t()`` has strides ``(1, 64)``: walking it in its index order
(row by row) is a strided walk through all four tensors. With ``pick_loop_orders=True`` (the
default) Inductor orders the loops by the strides of what the kernel reads and writes, so the C++
kernel is one contiguous vectorised loop; with it off the loops follow the index order (an outer
loop over rows and a strided inner loop).

    tuidebug flags demo pick_loop_orders
"""
import argparse

import torch


def f(a, b, c):
    return a.t() + b.t() * c.t()


def main():
    parser = argparse.ArgumentParser(description="transposed inputs and output")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    a, b, c = (torch.randn(64, 32, device=args.device) for _ in range(3))
    out = torch.compile(f)(a, b, c)
    print(f"transposed: out {tuple(out.shape)} stride={out.stride()} sum={out.sum().item():.4f}")


if __name__ == "__main__":
    main()
