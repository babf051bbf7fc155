"""A model with a graph break in the middle, called with two input shapes.

Demonstrates Dynamo graph breaks and recompilation:

* `forward` reads `h.mean().item()` and branches on it in Python.  A
  data-dependent Python branch cannot be traced into a graph (the default
  `capture_scalar_outputs=False` makes `.item()` a graph break), so Dynamo
  compiles graph 1 (fc1 + relu + mean) for the frame up to the break, runs
  `.item()` and the `if` in plain Python, and then compiles a second frame,
  the generated resume function `torch_dynamo_resume_in_forward_at_<line>`,
  as graph 2 (branch + fc2).
* The second call uses a different batch size.  The guards on the static
  shapes fail, Dynamo recompiles both frames, and because
  `automatic_dynamic_shapes` is on, the recompiled graphs mark the batch dim
  as dynamic (a SymInt `s0`) so further batch sizes reuse them.

Expect 4 graphs total: 2 static-shape graphs, then 2 dynamic-shape graphs.
Try `TORCH_LOGS=graph_breaks,recompiles` or `torch._dynamo.config.automatic_dynamic_shapes = False`.

    tuidebug trace examples/graph_break.py
"""
import argparse

import torch
from torch import nn


class BranchyModel(nn.Module):
    def __init__(self, d_in=32, d_hidden=64, d_out=8):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        if h.mean().item() > 0.2:  # .item() + Python branch -> graph break here
            h = h * 2.0
        else:
            h = h - 1.0
        return self.fc2(h)


def main():
    parser = argparse.ArgumentParser(description="graph break + recompile")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = BranchyModel().to(args.device)
    compiled = torch.compile(model)
    with torch.no_grad():
        out_a = compiled(torch.randn(4, 32, device=args.device))  # compile: 2 graphs
        out_b = compiled(torch.randn(16, 32, device=args.device))  # recompile, dynamic batch
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    print(f"graph_break: outs {tuple(out_a.shape)} {tuple(out_b.shape)}, {graphs} graphs compiled")


if __name__ == "__main__":
    main()
