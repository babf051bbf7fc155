"""Does the order of interleaved calls move a compiled-vs-eager ratio? (The whole call's verdict,
compiler/fair_timing.py.) WITHOUT tuidebug's capture: examples/item_per_layer.py compiled and
eager, in one process, timed three ways, the three taking turns every 100 rounds:

- ``alternate``: one clocked call of each per round, the order swapped every round (a b, b a,
  …: fair_timing before it primed): each round pairs a call that follows its own kind with one
  that follows the other's; the per-round ratios are also given split by which came first;
- ``primed``: the same rounds, each clocked call right after an unclocked call of the same
  callable (fair_timing now, and bench/compile_vs_eager.py);
- ``blocks``: 20 calls of one, then 20 of the other (the first of each unclocked): each as in a
  loop of its own, the reference.

Prints one JSON line per design: the median of the per-round eager/compiled ratios with its
interval (blocks: call i of one block against call i of the other), the ratio of the medians,
and ``alternate``'s two clusters. ``--clock cpu`` reads this thread's CPU time (steadier on a
shared CPU; on a GPU the host's clock is the one that counts).

    python bench/interleave_order.py --device cuda --layers 8
    python bench/interleave_order.py --device cpu --layers 8 --seconds 30 --clock cpu
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from _item_calls import item_calls  # noqa: E402
from compile_vs_eager import interval  # noqa: E402  (order statistics)
from tuidebug.machine import load1  # noqa: E402  (no capture: the load, read the one way)

Times = tuple[list[float], list[float]]
# a round's steps: c compiled, e eager; upper case clocked, lower case called unclocked
PATTERNS = {"alternate": "C E", "primed": "c C e E"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=30.0, help="seconds of timing in all")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    a = ap.parse_args()
    on_gpu = a.device == "cuda"
    clock = time.perf_counter if a.clock == "wall" else time.thread_time
    c, e, t = item_calls(a.device, a.layers, a.dim, clock)

    for _ in range(5):
        c()
        e()
    res: dict[str, Times] = {k: ([], []) for k in ("alternate", "primed", "blocks")}

    calls = {"c": (c, 0), "e": (e, 1)}  # each callable and its side of ``res``

    def rounds(design: str, n: int) -> None:
        """``n`` rounds of ``design``'s steps (PATTERNS), compiled and eager swapped in odd
        rounds."""
        for i in range(n):
            for step in PATTERNS[design].split():
                kind = step.lower() if i % 2 == 0 else {"c": "e", "e": "c"}[step.lower()]
                fn, side = calls[kind]
                if step.isupper():
                    res[design][side].append(t(fn))
                else:
                    fn()

    def blocks(n: int) -> None:
        tc, te = res["blocks"]
        for i in range(n // 20):
            for f, out in ((c, tc), (e, te)) if i % 2 == 0 else ((e, te), (c, tc)):
                f()
                for _ in range(19):
                    out.append(t(f))

    start = time.perf_counter()
    while time.perf_counter() - start < a.seconds:
        rounds("alternate", 100)
        rounds("primed", 100)
        blocks(100)
    for design, (tc, te) in res.items():
        m = min(len(tc), len(te))
        ratios = [ev / cv for ev, cv in zip(te[:m], tc[:m])]
        low, high = interval(ratios)
        row: dict[str, Any] = {
            "bench": "interleave_order", "design": design, "device": a.device,
            "layers": a.layers, "clock": a.clock, "rounds": m,
            "ratio": statistics.median(ratios), "ratio_low": low, "ratio_high": high,
            "ratio_of_medians": statistics.median(te) / statistics.median(tc),
            "compiled_s": statistics.median(tc), "eager_s": statistics.median(te),
            "load1": load1(),
            "gpu": torch.cuda.get_device_name() if on_gpu else None}
        if design != "blocks":  # rounds 0, 2, …: compiled first; 1, 3, …: eager first
            row["compiled_first"] = statistics.median(ratios[0::2])
            row["eager_first"] = statistics.median(ratios[1::2])
        print(json.dumps(row))


if __name__ == "__main__":
    main()
