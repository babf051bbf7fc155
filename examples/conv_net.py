"""Small conv net inference (Conv2d / BatchNorm2d / ReLU / MaxPool2d / Linear).

Demonstrates how Inductor handles a CNN: convolutions stay extern kernels
(mkldnn/oneDNN on CPU, cuDNN on CUDA), while eval-mode BatchNorm is
decomposed into pointwise math and fused with the ReLU and the max-pool into
generated kernels.  With `torch._inductor.config.freezing = True` the
parameters become constants and Conv+BN is folded at compile time instead.

    tuidebug trace examples/conv_net.py
"""
import argparse

import torch
from torch import nn


class ConvNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(32 * 8 * 8, num_classes)

    def forward(self, x):
        x = self.pool(self.relu(self.bn1(self.conv1(x))))  # 32x32 -> 16x16
        x = self.pool(self.relu(self.bn2(self.conv2(x))))  # 16x16 -> 8x8
        return self.fc(torch.flatten(x, 1))


def main():
    parser = argparse.ArgumentParser(description="small conv net inference")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = ConvNet().to(args.device).eval()
    x = torch.randn(args.batch, 3, 32, 32, device=args.device)
    compiled = torch.compile(model)
    with torch.no_grad():
        out = compiled(x)
        ref = model(x)
    err = (out - ref).abs().max().item()
    print(f"conv_net: logits {tuple(out.shape)} top-1 {out.argmax(1).tolist()} max|compiled-eager|={err:.2e}")


if __name__ == "__main__":
    main()
