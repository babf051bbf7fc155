"""``tuidebug trace --profile``: what it costs and how repeatable its numbers are, side by side.

Per example: ``tuidebug trace`` wall time with ``--profile N`` divided by without (each run a
fresh process, alternating); and the same example profiled twice: per kernel call, the spread of
its time between the two traces (|a - b| / mean; median and worst over the calls), and the ratio
of the two compiled-call and eager-call times — once for the median call's times (what info
shows), once for the fastest call's (steadier where other processes share the cores). A training
step (transformer_block.py: one forward, one backward) has its backward profiled too: its
kernels count among the kernel calls, and ``bwd b/a`` / ``bwd eager b/a`` are the ratios of the
two traces' compiled and eager backward call times (nan: no backward).

    .venv/bin/python bench/profile_overhead.py [--runs N] [--repeat R] [examples...]
    .venv/bin/python bench/profile_overhead.py --runs 3 --repeat 1 transformer_block.py  # training
    .venv/bin/python bench/profile_overhead.py --device cuda transformer_block.py   # on a GPU
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ["mlp.py", "conv_net.py"]


def trace(example: str, out: Path, profile: int, script_args: list[str]) -> float:
    cmd = [sys.executable, "-m", "tuidebug.cli", "trace", "-o", str(out)]
    if profile:
        cmd += ["--profile", str(profile)]
    cmd += [str(ROOT / "examples" / example), *script_args]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{example} (profile={profile}) failed:\n{proc.stderr[-3000:]}")
    return seconds


def kernel_times(out: Path, fastest: bool) -> tuple[dict[str, float], dict[str, float]]:
    """Per kernel call its time (the median call's, or the fastest's), forward and backward
    kernels alike; and the wall times (median or fastest) of the compiled and eager call and,
    for a training step, of their backward (``compiled``, ``eager``, ``bwd``, ``bwd_eager``)."""
    data = json.loads((out / "profile.json").read_text())
    times: dict[str, float] = {}
    walls = {"compiled": 0.0, "eager": 0.0, "bwd": 0.0, "bwd_eager": 0.0}
    wall, key = ("wall_min_s", "time_min_s") if fastest else ("wall_s", "time_s")
    for cid, c in data["compiles"].items():
        b = c.get("backward") or {}
        for name, section in (("compiled", c["compiled"]), ("eager", c["eager"]),
                              ("bwd", b.get("compiled") or {}),
                              ("bwd_eager", b.get("eager") or {})):
            walls[name] += section.get(wall) or 0.0
        for k in c["kernels"] + (b.get("kernels") or []):
            if k.get(key):
                times[f"{cid}/{k['graph']}/{k['call']}"] = k[key]
    return times, walls


def ratio(a: float, b: float) -> float:
    return b / a if a else float("nan")


def spread(a: dict[str, float], b: dict[str, float]) -> list[float]:
    return [abs(a[k] - b[k]) / ((a[k] + b[k]) / 2) for k in a if k in b and a[k] + b[k] > 0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10, help="--profile N (default 10)")
    ap.add_argument("--repeat", type=int, default=2, help="traces of each kind per example")
    ap.add_argument("--device", default=None, help="passed to the examples (--device cuda)")
    ap.add_argument("examples", nargs="*", default=DEFAULT)
    ns = ap.parse_args()
    script_args = ["--device", ns.device] if ns.device else []
    print(f"{'example':22} {'plain s':>8} {'profile s':>9} {'ratio':>6}   {'kernels':>7} "
          f"{'':7} {'spread med':>10} {'spread max':>10} {'compiled b/a':>12} {'eager b/a':>9} "
          f"{'bwd b/a':>7} {'bwd eager b/a':>13}")
    for example in ns.examples:
        plain, prof = [], []
        with tempfile.TemporaryDirectory() as tmp:
            outs = []
            for i in range(ns.repeat):
                plain.append(trace(example, Path(tmp) / f"plain{i}", 0, script_args))
                out = Path(tmp) / f"profile{i}"
                prof.append(trace(example, out, ns.runs, script_args))
                outs.append(out)
            measured = {which: (kernel_times(outs[0], which == "fastest"),
                                kernel_times(outs[-1], which == "fastest"))
                        for which in ("median", "fastest")}
        p, q = statistics.median(plain), statistics.median(prof)
        for i, (which, ((ta, wa), (tb, wb))) in enumerate(measured.items()):
            sp = spread(ta, tb)
            head = (f"{example:22} {p:8.1f} {q:9.1f} {q / p:6.2f}" if not i else " " * 47)
            print(f"{head}   {len(sp):7d} {which:7} "
                  f"{statistics.median(sp) if sp else float('nan'):10.2f} "
                  f"{max(sp) if sp else float('nan'):10.2f} "
                  f"{ratio(wa['compiled'], wb['compiled']):12.2f} "
                  f"{ratio(wa['eager'], wb['eager']):9.2f} "
                  f"{ratio(wa['bwd'], wb['bwd']):7.2f} "
                  f"{ratio(wa['bwd_eager'], wb['bwd_eager']):13.2f}", flush=True)


if __name__ == "__main__":
    main()
