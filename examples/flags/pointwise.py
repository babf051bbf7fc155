"""A large pointwise function, called twice (for the Triton / CUDA flags).

``triton.autotune_at_compile_time``, ``max_autotune_pointwise``, ``triton.use_block_ptr`` and
``triton.cudagraphs`` change how the Triton kernel is tuned, indexed and launched; on CPU they
have nothing to act on (``tuidebug flags demo`` says so). ``autotune_remote_cache`` and
``bundled_autotune_remote_cache`` try to open a remote (Redis) autotune cache for it.

    tuidebug flags demo triton.use_block_ptr      # on a machine with a CUDA GPU
"""
import argparse

import torch


def f(x, y):
    return ((x * y).sin() + 1.0).relu() * x.sum(dim=-1, keepdim=True)


def main():
    parser = argparse.ArgumentParser(description="large pointwise + row reduction")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rows", type=int, default=1024)
    args = parser.parse_args()
    torch.manual_seed(0)
    x = torch.randn(args.rows, 1024, device=args.device)
    y = torch.randn(args.rows, 1024, device=args.device)
    g = torch.compile(f)
    g(x, y)
    out = g(x, y)
    print(f"pointwise: out {tuple(out.shape)} mean={out.mean().item():.4f}")


if __name__ == "__main__":
    main()
