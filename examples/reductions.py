"""Reduction-heavy function compiled with torch.compile (a function, not a module).

Demonstrates Inductor's reduction codegen: softmax and a hand-written
layernorm (two-pass mean / variance), var_mean, sums over the inner dim, the
outer dim, several dims and all elements, cumsum (a scan) and logsumexp, on
tensors of different shapes (many short rows, a few long rows, a tall narrow
matrix).  On CPU the scheduler fuses nearly everything into one C++ kernel
(a loop nest per reduction group) and cumsum is an aten fallback (no CPU scan
codegen); on CUDA each group gets its own Triton kernel, persistent
(`triton_per_*`) or looped (`triton_red_*`), and cumsum becomes a Triton scan
fused with the logsumexp over the same rows.

    tuidebug trace examples/reductions.py
"""
import argparse

import torch


def layernorm(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) * torch.rsqrt(var + eps) * weight + bias


def reductions(x, long_rows, tall, weight, bias):
    # x: (B, T, C) many short rows; long_rows: (R, N) few long rows; tall: (M, K)
    out = {
        "softmax": torch.softmax(x, dim=-1),
        "layernorm": layernorm(x, weight, bias),
        "sum_dim1": x.sum(dim=1),
        "sum_dims02": x.sum(dim=(0, 2)),
        "logsumexp": torch.logsumexp(long_rows, dim=-1),
        "cumsum": torch.cumsum(long_rows, dim=-1),
        "total": long_rows.sum(),
        "amax_cols": tall.amax(dim=0),
    }
    out["var"], out["mean"] = torch.var_mean(tall, dim=0)
    return out


def main():
    parser = argparse.ArgumentParser(description="reduction-heavy function")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()

    torch.manual_seed(0)
    dev = args.device
    inputs = (
        torch.randn(4, 16, 64, device=dev),  # x
        torch.randn(3, 4096, device=dev),  # long_rows
        torch.randn(2048, 8, device=dev),  # tall
        torch.randn(64, device=dev),  # layernorm weight
        torch.randn(64, device=dev),  # layernorm bias
    )
    compiled = torch.compile(reductions)
    out = compiled(*inputs)
    ref = reductions(*inputs)
    err = max(((out[k] - ref[k]).abs().max() / (ref[k].abs().max() + 1)).item() for k in ref)
    print(f"reductions: {len(out)} outputs, total={out['total'].item():.4f} max rel err={err:.2e}")


if __name__ == "__main__":
    main()
