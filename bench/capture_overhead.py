"""Compile wall time with capture divided by without, on the bundled examples, side by side.

Each measurement is a fresh process with its own empty Inductor cache directory (a cold compile,
as a user's first run), alternating plain / capture runs. Goal: capture/plain at most 1.15.

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
DEFAULT = ["mlp.py", "conv_net.py", "reductions.py", "transformer_block.py"]


def run(mode: str, example: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=f"{tmp}/cache",
                   PYTHONPATH=str(ROOT))
        proc = subprocess.run(
            [sys.executable, str(ROOT / "bench" / "_run_example.py"), mode,
             str(ROOT / "examples" / example), f"{tmp}/trace"],
            env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"{example} ({mode}) failed:\n{proc.stderr[-3000:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])["seconds"]


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
    print(f"{'example':24} {'plain s':>9} {'capture s':>10} {'ratio':>7}")
    ratios = []
    for ex in ns.examples:
        plain, cap = [], []
        for _ in range(ns.repeat):
            plain.append(run(plain_mode, ex))
            cap.append(run(mode, ex))
        p, c = statistics.median(plain), statistics.median(cap)
        ratios.append(c / p)
        print(f"{ex:24} {p:9.2f} {c:10.2f} {c / p:7.3f}", flush=True)
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"{'geomean':24} {'':9} {'':10} {geo:7.3f}   (goal: <= 1.15)")


if __name__ == "__main__":
    main()
