"""One pre-norm transformer block (or a stack of them) trained for ONE step.

Demonstrates training compilation: AOTAutograd traces forward + backward
jointly, the partitioner splits them into a forward graph and a backward
graph (choosing which activations to save vs. recompute), and Inductor
compiles each one.  Attention is written out by hand (Linear projections,
matmul, softmax): the Dynamo and AOT graphs show those ops.  On CPU
(torch 2.13) Inductor's joint-graph pattern matcher (fx_passes/fuse_attention.py)
then rewrites them into a fused SDPA extern call
(aten._scaled_dot_product_flash_attention_for_cpu, and its backward); on
CUDA (seen with torch 2.11) they stay bmm + Triton softmax kernels.
`torch._inductor.config.pattern_matcher = False` disables the rewrite.
Module paths such as `blocks.0.attn.q_proj` are kept meaningful for
nn_module_stack attribution.  The loss and the SGD step run eagerly outside
the compiled module.

    tuidebug trace examples/transformer_block.py
    tuidebug trace examples/transformer_block.py --layers 24   # deep stack
"""
import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.out_proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, T, C = x.shape
        H, D = self.heads, C // self.heads
        q = self.q_proj(x).view(B, T, H, D).transpose(1, 2)
        k = self.k_proj(x).view(B, T, H, D).transpose(1, 2)
        v = self.v_proj(x).view(B, T, H, D).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(D)
        attn = torch.softmax(scores, dim=-1)
        y = (attn @ v).transpose(1, 2).reshape(B, T, C)
        return self.out_proj(y)


class MLP(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = MLP(dim, 4 * dim)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Transformer(nn.Module):
    def __init__(self, layers, dim, heads):
        super().__init__()
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(dim)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x)


def main():
    parser = argparse.ArgumentParser(description="transformer block, one training step")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                        help="parameters and activations (bfloat16: a mixed-precision-free "
                             "bf16 training step)")
    args = parser.parse_args()

    torch.manual_seed(0)
    dtype = getattr(torch, args.dtype)
    model = Transformer(args.layers, args.dim, args.heads).to(args.device, dtype)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(args.batch, args.seq, args.dim, device=args.device, dtype=dtype)
    target = torch.randn(args.batch, args.seq, args.dim, device=args.device, dtype=dtype)

    compiled = torch.compile(model)
    loss = F.mse_loss(compiled(x), target)  # compiled forward graph
    loss.backward()  # compiled backward graph
    opt.step()
    opt.zero_grad()
    with torch.no_grad():
        new_loss = F.mse_loss(model(x), target)  # eager check that the step applied
    print(f"transformer x{args.layers}: loss {loss.item():.4f} -> {new_loss.item():.4f} after 1 SGD step")


if __name__ == "__main__":
    main()
