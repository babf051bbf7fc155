"""Models whose eager check used to cry wolf, traced by tests/compiler/test_judge.py.

    python verdict_models.py dropout   # one training step with dropout (fp32)
    python verdict_models.py bf16      # bf16 inference whose only error is bf16 rounding
"""
import sys

import torch
from torch import nn


def dropout() -> None:
    m = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Dropout(0.2), nn.Linear(64, 32)).train()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    loss = torch.compile(m)(torch.randn(16, 32)).pow(2).mean()
    loss.backward()
    opt.step()


class Cancel(nn.Module):
    """``(h * 100 + 1) - h * 100``: eager rounds ``h * 100`` to bf16 (an error up to 0.5), the
    compiled kernel computes in float32 (about 1 exactly): compiled is the better of the two."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.lin(x)
        return (h * 100 + 1) - h * 100, nn.functional.gelu(h)


def bf16() -> None:
    m = Cancel().to(torch.bfloat16).eval()
    with torch.no_grad():
        torch.compile(m)(torch.randn(64, 64, dtype=torch.bfloat16))


if __name__ == "__main__":
    torch.manual_seed(0)
    {"dropout": dropout, "bf16": bf16}[sys.argv[1]]()
