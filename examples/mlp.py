"""3-layer MLP inference (Linear / GELU / LayerNorm) under torch.no_grad().

Demonstrates the basic Inductor split between extern kernels and generated
code: each nn.Linear lowers to an extern matmul (addmm / mm, or an mkldnn
call on CPU), while the bias add, GELU and LayerNorm (a reduction) are fused
into generated C++ (CPU) or Triton (CUDA) kernels.  Inference only, so
AOTAutograd produces a single forward graph and no backward graph.

    tuidebug trace examples/mlp.py
"""
import argparse

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, d_in=64, d_hidden=128, d_out=10):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.norm1 = nn.LayerNorm(d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_hidden)
        self.norm2 = nn.LayerNorm(d_hidden)
        self.fc3 = nn.Linear(d_hidden, d_out)
        self.act = nn.GELU()

    def forward(self, x):
        x = self.norm1(self.act(self.fc1(x)))
        x = self.norm2(self.act(self.fc2(x)))
        return self.fc3(x)


def main():
    parser = argparse.ArgumentParser(description="3-layer MLP inference")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--mode", default=None, help="torch.compile mode, e.g. max-autotune, "
                        "max-autotune-no-cudagraphs, reduce-overhead")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = MLP().to(args.device).eval()
    x = torch.randn(args.batch, 64, device=args.device)
    compiled = torch.compile(model, mode=args.mode)
    with torch.no_grad():
        out = compiled(x)
        ref = model(x)
    err = (out - ref).abs().max().item()
    print(f"mlp: out {tuple(out.shape)} sum={out.sum().item():.4f} max|compiled-eager|={err:.2e}")


if __name__ == "__main__":
    main()
