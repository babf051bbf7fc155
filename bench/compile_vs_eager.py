"""torch.compile against eager, end to end and interleaved, WITHOUT tuidebug: the independent
measurement ``trace --profile``'s whole-call verdict is checked against.

The model of examples/transformer_block.py (or examples/item_per_layer.py) is compiled and
called as its script calls it; each round times one compiled call and one eager call (the
order swapped every round), each right after an unclocked call of the same callable (as in a
loop of its own: a call right after the other's is slower, bench/interleave_order.py),
device-synchronized around each, after a warm-up. A call made
under autograd (the transformer's training step) is timed as ``trace --profile`` times it:
the forward, then ``torch.autograd.grad`` of the output with respect to the parameters, with
fixed output gradients. Prints one JSON line: the medians, p10/p90 and the median of the
per-round eager/compiled ratios with its 95% interval (order statistics, as for any median).

    python bench/compile_vs_eager.py --device cuda --dtype bfloat16 --layers 4 --dim 1024
    python bench/compile_vs_eager.py --model item_per_layer --device cuda
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def interval(xs: list[float]) -> tuple[float, float]:
    s, n = sorted(xs), len(xs)
    j, cdf = 0, 0.0
    for k in range(n):
        cdf += math.comb(n, k) / 2 ** n
        if cdf > 0.025:
            break
        j = k
    return s[j], s[n - 1 - j]


def q(xs: list[float], p: float) -> float:
    s = sorted(xs)
    pos = p * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="transformer", choices=["transformer", "item_per_layer"])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--dim", type=int, default=None)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--cap", type=float, default=20.0, help="seconds of timing at most")
    a = ap.parse_args()
    torch.manual_seed(0)
    dtype = getattr(torch, a.dtype)
    if a.model == "transformer":
        from transformer_block import Transformer

        model = Transformer(a.layers or 1, a.dim or 64, a.heads).to(a.device, dtype)
        x = torch.randn(a.batch, a.seq, a.dim or 64, device=a.device, dtype=dtype)
        train = True
    else:
        from item_per_layer import ItemPerLayer

        model = ItemPerLayer(a.layers or 4, a.dim or 16).to(a.device, dtype)
        x = torch.randn(8, a.dim or 16, device=a.device, dtype=dtype)
        train = False
    compiled = torch.compile(model)
    params = [p for p in model.parameters() if p.requires_grad]
    grads = None

    def step(fn):
        nonlocal grads
        if not train:
            with torch.no_grad():
                return fn(x)
        out = fn(x)
        if grads is None:
            gen = torch.Generator().manual_seed(0)
            grads = torch.randn(out.shape, generator=gen).to(out.device, out.dtype)
        return torch.autograd.grad(out, params, grad_outputs=grads)

    def clocked(fn) -> float:
        sync(a.device)
        t0 = time.perf_counter()
        step(fn)
        sync(a.device)
        return time.perf_counter() - t0

    t_compile = time.perf_counter()
    step(compiled)
    sync(a.device)
    t_compile = time.perf_counter() - t_compile
    for _ in range(3):
        step(compiled)
        step(model)
    tc: list[float] = []
    te: list[float] = []
    start = time.perf_counter()
    for i in range(a.rounds):
        if i % 2 == 0:
            step(compiled)
            tc.append(clocked(compiled))
            step(model)
            te.append(clocked(model))
        else:
            step(model)
            te.append(clocked(model))
            step(compiled)
            tc.append(clocked(compiled))
        if time.perf_counter() - start > a.cap and i >= 9:
            break
    ratios = [e / c for e, c in zip(te, tc)]
    low, high = interval(ratios)
    r = statistics.median(ratios)
    verdict = "faster" if low > 1 else "slower" if high < 1 else "same"
    print(json.dumps({
        "bench": "compile_vs_eager", "model": a.model, "device": a.device, "dtype": a.dtype,
        "layers": a.layers, "dim": a.dim, "training": train, "rounds": len(tc),
        "first_call_s": round(t_compile, 3), "threads": torch.get_num_threads(),
        "gpu": torch.cuda.get_device_name() if a.device == "cuda" else None,
        "compiled_s": statistics.median(tc), "compiled_p10_s": q(tc, 0.1),
        "compiled_p90_s": q(tc, 0.9), "eager_s": statistics.median(te),
        "eager_p10_s": q(te, 0.1), "eager_p90_s": q(te, 0.9),
        "ratio": r, "ratio_low": low, "ratio_high": high, "verdict": verdict}))


if __name__ == "__main__":
    main()
