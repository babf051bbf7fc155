"""Benchmark: a program's calls timed before and after one profiler session, in one process.

    python bench/after_profile.py --session {none,torch,tuidebug} [--device cuda] [--seconds 8]

Capture profiles each graph (``torch.profiler``) during the program's first call, and times the
whole call (compiled against eager) later in the same process. On CUDA, Kineto leaves CUPTI
attached after a session unless ``TEARDOWN_CUPTI=1`` (pytorch/pytorch#144455), and every later
kernel launch pays for it: the timing after the session is not the program's.
``--session torch`` runs a plain ``torch.profiler.profile`` session (CPU and CUDA activities)
between the two timings; ``tuidebug`` runs it through ``compat.profiled`` (capture's one way
to profile); ``none`` runs none. Each mode needs a process of its own (CUPTI is per process):
run the three one after another. The model is examples/item_per_layer.py (8 layers: many small
kernel launches, where the cost shows). Prints one JSON line per timing: compiled and eager
medians and the eager/compiled ratio per interleaved, primed round (median [min-max] over
rounds).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _item_calls import item_calls  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--session", choices=["none", "torch", "tuidebug"], required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seconds", type=float, default=8.0)
    a = ap.parse_args()
    on_gpu = a.device == "cuda"
    c, e, t = item_calls(a.device)

    def timing(when: str) -> None:
        tc: list[float] = []
        te: list[float] = []
        start, i = time.perf_counter(), 0
        while time.perf_counter() - start < a.seconds:
            for f, out in ((c, tc), (e, te)) if i % 2 == 0 else ((e, te), (c, tc)):
                f()  # primed: each clocked call follows a call of its own
                out.append(t(f))
            i += 1
        ratios = sorted(ev / cv for ev, cv in zip(te, tc))
        print(json.dumps({
            "bench": "after_profile", "session": a.session, "when": when, "device": a.device,
            "rounds": len(ratios), "compiled_us": round(statistics.median(tc) * 1e6, 1),
            "eager_us": round(statistics.median(te) * 1e6, 1),
            "ratio": round(statistics.median(ratios), 4),
            "ratio_p10_p90": [round(ratios[len(ratios) // 10], 4),
                              round(ratios[len(ratios) * 9 // 10], 4)]}), flush=True)

    for _ in range(10):
        c()
        e()
    timing("before")

    def both() -> None:
        c()
        e()

    if a.session == "torch":
        from torch.profiler import ProfilerActivity, profile
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
        with profile(activities=acts) as prof:
            for _ in range(5):
                both()
        len(list(prof.events()))
    elif a.session == "tuidebug":
        from tuidebug.compiler.compat.profiling import profiled
        profiled(both, 5, ("tuidebug",), torch.device(a.device))
    timing("after")


if __name__ == "__main__":
    main()
