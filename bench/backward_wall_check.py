"""Cross-check of ``trace --profile``'s backward wall time, without tuidebug: the example
transformer compiled, its forward run (unclocked), then ``torch.autograd.grad`` clocked with
device synchronization around it, as profile_backward does; also the whole ``loss.backward()``
of a plain training step and the same with ``torch.profiler`` summing device kernel time.

    python bench/backward_wall_check.py --device cuda --dtype bfloat16 --layers 4 --dim 1024 \
        --heads 16 --seq 512 --batch 8
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from transformer_block import Transformer  # noqa: E402


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--runs", type=int, default=20)
    a = ap.parse_args()
    torch.manual_seed(0)
    dtype = getattr(torch, a.dtype)
    model = Transformer(a.layers, a.dim, a.heads).to(a.device, dtype)
    x = torch.randn(a.batch, a.seq, a.dim, device=a.device, dtype=dtype)
    params = [p for p in model.parameters() if p.requires_grad]
    for name, fn in (("eager", model), ("compiled", torch.compile(model))):
        g = None
        fwd, bwd = [], []
        for i in range(a.runs + 3):
            sync(a.device)
            t0 = time.perf_counter()
            out = fn(x)
            sync(a.device)
            t1 = time.perf_counter()
            if g is None:
                g = torch.randn_like(out)
            torch.autograd.grad([out], params, grad_outputs=[g])
            sync(a.device)
            t2 = time.perf_counter()
            if i >= 3:
                fwd.append(t1 - t0)
                bwd.append(t2 - t1)
        out = fn(x)
        with torch.profiler.profile() as prof:
            torch.autograd.grad([out], params, grad_outputs=[g])
            sync(a.device)
        dev = sum(getattr(e, "device_time", getattr(e, "cuda_time", 0.0)) or 0.0
                  for e in prof.events() if getattr(e, "device_type", None) is not None
                  and str(e.device_type).endswith("CUDA"))
        print(f"{name:9s} forward median {statistics.median(fwd) * 1e3:.3f} ms  "
              f"backward (autograd.grad) median {statistics.median(bwd) * 1e3:.3f} ms  "
              f"min {min(bwd) * 1e3:.3f} ms  device kernels in one backward {dev / 1e3:.3f} ms")


if __name__ == "__main__":
    main()
