"""A graph with constant sub-expressions built inside ``forward``.

``ones(8, 8) * 0.5 + 1`` and ``zeros(8) + 2`` do not depend on the input and every element of
each is the same value. With ``joint_graph_constant_folding=True`` (the default) the joint-graph
pass ``constant_fold_uniform_value`` replaces each chain by one ``full(..., 1.5)`` /
``full(..., 2.0)`` before lowering; with it off the ``ones``/``mul``/``add`` chains stay in the
graph and the generated kernel computes them on every call.

    tuidebug flags demo joint_graph_constant_folding
"""
import argparse

import torch


def f(x):
    w = torch.ones(8, 8, device=x.device) * 0.5 + 1.0
    bias = torch.zeros(8, device=x.device) + 2.0
    return (x @ w + bias).relu()


def main():
    parser = argparse.ArgumentParser(description="constant sub-expression")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    x = torch.randn(16, 8, device=args.device)
    out = torch.compile(f)(x)
    print(f"constant_fold: out {tuple(out.shape)} sum={out.sum().item():.4f}")


if __name__ == "__main__":
    main()
