"""Inference through two Linear layers, compiled twice (two model instances).

On CPU, Inductor's GEMM templates (the ``CPP`` max-autotune backend) need constant weights, so
the demos turn on ``freezing``. With ``max_autotune=True`` each GEMM is autotuned between ATen
and C++ template choices (``autotune.jsonl``); ``max_autotune_gemm_backends`` picks the pool;
the second model's GEMMs have the same shapes, so with ``autotune_local_cache=True`` their
timings come from the local autotune cache instead of being benchmarked again.

    tuidebug flags demo max_autotune
    tuidebug flags demo max_autotune_gemm_backends
    tuidebug flags demo autotune_local_cache
"""
import argparse

import torch
from torch import nn


def model(device):
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 32)).to(device).eval()


def main():
    parser = argparse.ArgumentParser(description="frozen linear layers, compiled twice")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    x = torch.randn(32, 64, device=args.device)
    with torch.no_grad():
        outs = [torch.compile(model(args.device))(x) for _ in range(2)]
    print(f"frozen_linear: out {tuple(outs[0].shape)} sum={outs[0].sum().item():.4f}")


if __name__ == "__main__":
    main()
