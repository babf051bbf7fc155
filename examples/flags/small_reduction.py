"""A sum over a short last dimension (4 elements).

Reductions of at most ``unroll_reductions_threshold`` elements (default 8) are unrolled into
pointwise code: ``x[0] + x[1] + x[2] + x[3]``, no reduction loop. With the threshold set to 1
the same sum is a real reduction (a ``tmp_acc`` accumulator and an inner loop on CPU, a
``tl.sum`` on GPU).

    tuidebug flags demo unroll_reductions_threshold
"""
import argparse

import torch


def f(x):
    return x.sum(dim=-1) * 2 + 1


def main():
    parser = argparse.ArgumentParser(description="small last-dim reduction")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    x = torch.randn(256, 4, device=args.device)
    out = torch.compile(f)(x)
    print(f"small_reduction: out {tuple(out.shape)} sum={out.sum().item():.4f}")


if __name__ == "__main__":
    main()
