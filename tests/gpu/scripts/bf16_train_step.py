"""One bf16 training step of a small transformer-like block on CUDA, for the numerics check.

    python bf16_train_step.py ok        # correct: outputs and gradients judged, nothing flagged
    python bf16_train_step.py relu_bug  # Inductor's Triton relu bug knob, relu only in a custom
                                        # backward: a gradient wrong, a backward kernel named

In ``relu_bug`` the loss is scaled by LOSS_SCALE, as a mixed-precision GradScaler does. The
check judges gradients as PyTorch's ``same(fp64_ref=...)`` does: first allclose with
``rtol = atol = 1e-2`` for bf16. The gradients of a mean over 8*128*256 values are ~1e-5 to
1e-3, all below that absolute tolerance, so even the planted bug (fc1's gradient off by ~80x
eager's error) was judged a match on an H100. Scaled, the same bug is ~0.1 off on values ~1:
a real mismatch by every rule of the judge.
"""
import sys

import torch
from torch import nn
from torch._inductor import config as inductor_config

LOSS_SCALE = 1024.0


class GatedSilu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # type: ignore[override]
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad * (s + torch.relu(x) * s * (1 - s))


class Block(nn.Module):
    def __init__(self, dim: int = 256, gated: bool = False, scale: float = 1.0) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, 4, batch_first=True)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.gated = gated
        self.scale = scale

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        x = x + a
        up = self.fc1(self.norm(x))
        act = GatedSilu.apply(up) if self.gated else nn.functional.gelu(up)
        out = x + self.fc2(act)
        loss = (out.float() - target).pow(2).mean()
        return loss * self.scale if self.scale != 1.0 else loss


def main() -> None:
    mode = sys.argv[1]
    if mode == "relu_bug":
        inductor_config.triton.inject_relu_bug_TESTING_ONLY = "accuracy"
    torch.manual_seed(0)
    bug = mode == "relu_bug"
    model = Block(gated=bug, scale=LOSS_SCALE if bug else 1.0).cuda().to(torch.bfloat16).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(8, 128, 256, device="cuda", dtype=torch.bfloat16)
    target = torch.randn(8, 128, 256, device="cuda")
    loss = torch.compile(model)(x, target)
    loss.backward()
    opt.step()
    print("loss", float(loss))


if __name__ == "__main__":
    main()
