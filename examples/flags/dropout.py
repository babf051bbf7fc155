"""A model in training mode with dropout (a random op), forward only.

With ``fallback_random=False`` (the default) Inductor generates its own random numbers in the
kernel (a seed buffer and ``randint64``/``normalized_rand``): fast, but not the numbers eager
PyTorch draws, so tuidebug's eager comparison reports a mismatch. With ``fallback_random=True``
random ops fall back to ATen (``aten.bernoulli_`` / ``aten.rand``) and match eager bit for bit.

    tuidebug flags demo fallback_random
"""
import argparse

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 32)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.fc(x).relu()) * 2


def main():
    parser = argparse.ArgumentParser(description="training-mode dropout")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    net = Net().to(args.device).train()
    x = torch.randn(16, 32, device=args.device)
    with torch.no_grad():
        out = torch.compile(net)(x)
    print(f"dropout: zeros={(out == 0).float().mean().item():.2f}")


if __name__ == "__main__":
    main()
