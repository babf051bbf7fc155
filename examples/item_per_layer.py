"""A model whose compiled version is SLOWER than eager: every layer reads a value back with
``.item()`` and branches on it in Python.

Each ``.item()`` is a graph break (``capture_scalar_outputs=False``, the default). A break in
the loop over the layers makes Dynamo run that loop eagerly and compile each layer's frame
instead: a graph up to the break, the read-back and the branch in Python, a graph after it.
Every compiled graph costs a guard check and AOTAutograd's wrappers per call, while each layer
is a tiny matmul: the compiled call pays more than the eager one saves.
`tuidebug trace --profile examples/item_per_layer.py` says so, and names the breaks.

    tuidebug trace --profile examples/item_per_layer.py
    tuidebug trace --profile examples/item_per_layer.py --layers 8 --device cuda
"""
import argparse

import torch
from torch import nn


class Layer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        x = self.fc(x)
        if x.mean().item() > 0:  # .item() + Python branch -> a graph break in every layer
            return torch.relu(x)
        return torch.tanh(x)


class ItemPerLayer(nn.Module):
    def __init__(self, layers, dim):
        super().__init__()
        self.layers = nn.ModuleList([Layer(dim) for _ in range(layers)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def main():
    parser = argparse.ArgumentParser(description="a graph break per layer: compiled is slower")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--dim", type=int, default=16)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = ItemPerLayer(args.layers, args.dim).to(args.device)
    compiled = torch.compile(model)
    x = torch.randn(8, args.dim, device=args.device)
    with torch.no_grad():
        out = compiled(x)
    print(f"item_per_layer x{args.layers}: out {tuple(out.shape)}")


if __name__ == "__main__":
    main()
