"""A ~120-node model whose compilation is broken on purpose by an injected ReLU bug.

Demonstrates Inductor failures and what the minifier / repro tooling works
with.  It sets `torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY`
(and the `triton.` twin for CUDA), which changes the code Inductor emits for
every `relu` that lands in a generated C++/Triton kernel:

* compile_error: relu is emitted as `compile error!`, so g++ rejects the
  kernel (CppCompileError) or, on CUDA, the generated Python/Triton source
  fails to import (SyntaxError); both surface as InductorError, exit 1.
* runtime_error: relu becomes `x; throw 1` (C++) / a failing device_assert
  (Triton): the kernel builds, then fails when it runs.  On CPU the binding
  turns the C++ throw into `RuntimeError: unhandled error` (exit 1); on CUDA
  the device-side assert aborts the process (exit 134).
* accuracy: relu becomes `x + 1`: everything runs, but the result is wrong.
  This script compares compiled vs. eager and exits with status 1.
* none: no bug, for comparison.

Each relu follows a LayerNorm, so it fuses into a generated pointwise/
reduction kernel (never into an extern matmul epilogue) and the bug fires.

    tuidebug trace examples/failing_compile.py --bug accuracy
"""
import argparse
import sys

import torch
import torch._inductor.config as inductor_config
from torch import nn


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.scale = nn.Parameter(torch.full((dim,), 0.5))

    def forward(self, x):
        h = torch.relu(self.norm(self.fc(x)))
        h = h * self.scale + torch.sigmoid(x) * 0.1
        return x + torch.tanh(h)


class DeepStack(nn.Module):
    def __init__(self, dim=32, depth=8):
        super().__init__()
        self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])
        self.head = nn.Linear(dim, 4)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(torch.relu(x))


def main():
    parser = argparse.ArgumentParser(description="model broken by an injected relu bug")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--bug", choices=["compile_error", "runtime_error", "accuracy", "none"],
                        default="compile_error")
    args = parser.parse_args()

    bug = None if args.bug == "none" else args.bug
    inductor_config.cpp.inject_relu_bug_TESTING_ONLY = bug
    inductor_config.triton.inject_relu_bug_TESTING_ONLY = bug

    torch.manual_seed(0)
    model = DeepStack().to(args.device).eval()
    x = torch.randn(16, 32, device=args.device)
    compiled = torch.compile(model)
    with torch.no_grad():
        out = compiled(x)  # compile_error and runtime_error raise here
        ref = model(x)
    err = (out - ref).abs().max().item()
    if not torch.allclose(out, ref, rtol=1e-4, atol=1e-4):
        print(f"failing_compile: ACCURACY FAILURE (--bug {args.bug}): compiled output differs "
              f"from eager, max abs diff {err:.3e}", file=sys.stderr)
        sys.exit(1)
    print(f"failing_compile: --bug {args.bug} compiled == eager (max abs diff {err:.2e})")


if __name__ == "__main__":
    main()
