"""Compile wall time with capture divided by without, on the bundled examples, side by side.

Each measurement is a fresh process with its own empty Inductor cache directory (a cold compile,
as a user's first run), alternating plain / capture runs. Goal: capture/plain at most 1.15.
Wall seconds and CPU seconds (the run's process and the compiler processes it waited for) are
both reported: on a loaded machine the wall ratio moves with the load, the CPU ratio holds.

    .venv/bin/python bench/capture_overhead.py [--repeat N] [examples...]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuidebug.machine import cores, load1  # noqa: E402

DEFAULT = ["mlp.py", "conv_net.py", "reductions.py", "transformer_block.py"]


def run(mode: str, example: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one cold run of ``example`` in ``mode``."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=f"{tmp}/cache",
                   PYTHONPATH=str(ROOT))
        proc = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "_run_example.py"), mode,
             str(ROOT / "examples" / example), f"{tmp}/trace"],
            env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"{example} ({mode}) failed:\n{proc.stderr[-3000:]}")
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        return out["seconds"], out["cpu_seconds"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--no-check", action="store_true",
                    help="capture without the eager comparison")
    ap.add_argument("--same-caches", action="store_true",
                    help="plain runs also turn off the graph-level caches capture turns off "
                         "(FX graph, AOTAutograd, PGO): the same compile work on both sides")
    ap.add_argument("examples", nargs="*", default=DEFAULT)
    ns = ap.parse_args()
    mode = "capture-nocheck" if ns.no_check else "capture"
    plain_mode = "plain-samecaches" if ns.same_caches else "plain"
    print(f"load average {load1():.1f} on {cores()} cores")
    print(f"{'example':24} {'plain s':>9} {'capture s':>10} {'ratio':>7}"
          f" {'plain cpu':>10} {'capture cpu':>12} {'cpu ratio':>10}")
    ratios, cpu_ratios = [], []
    for ex in ns.examples:
        plain, cap = [], []
        for _ in range(ns.repeat):
            plain.append(run(plain_mode, ex))
            cap.append(run(mode, ex))
        p, c = (statistics.median(w for w, _ in plain), statistics.median(w for w, _ in cap))
        pc, cc = (statistics.median(u for _, u in plain), statistics.median(u for _, u in cap))
        ratios.append(c / p)
        cpu_ratios.append(cc / pc)
        print(f"{ex:24} {p:9.2f} {c:10.2f} {c / p:7.3f} {pc:10.2f} {cc:12.2f} {cc / pc:10.3f}",
              flush=True)

    def geo(rs: list[float]) -> float:
        return math.exp(sum(math.log(r) for r in rs) / len(rs))

    print(f"{'geomean':24} {'':9} {'':10} {geo(ratios):7.3f} {'':10} {'':12} "
          f"{geo(cpu_ratios):10.3f}   (goal: <= 1.15)")
    print(f"load average {load1():.1f} at the end")


if __name__ == "__main__":
    main()
