"""An op Inductor has no lowering for: 3-D ``grid_sample`` (``aten.grid_sampler_3d``).

With ``implicit_fallbacks=True`` (the default) Inductor calls the ATen kernel for it (a
``torch.ops.aten.grid_sampler_3d.default`` call in the wrapper) and generates code around it;
with it off the compile fails with ``MissingOperatorWithoutDecomp``.

    tuidebug flags demo implicit_fallbacks
"""
import argparse

import torch


def f(x, grid):
    return torch.nn.functional.grid_sample(x, grid, align_corners=False).relu() + 1


def main():
    parser = argparse.ArgumentParser(description="op without a lowering")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    x = torch.randn(1, 2, 4, 4, 4, device=args.device)
    grid = torch.rand(1, 3, 3, 3, 3, device=args.device) * 2 - 1
    out = torch.compile(f)(x, grid)
    print(f"grid_sample_3d: out {tuple(out.shape)} sum={out.sum().item():.4f}")


if __name__ == "__main__":
    main()
