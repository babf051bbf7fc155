"""Time from "flag changed" to "comparison shown": the warm recompile worker vs a cold re-run.

For each bundled example, a base trace is made first (``tuidebug trace``, untimed: the trace the
user has open). Then, per repeat and side by side:

* ``cold``: a fresh ``tuidebug trace --set FLAG`` process (imports torch, compiles with caches
  off, as ``tuidebug trace`` does), then the comparison is computed and rendered;
* ``warm``: the same change submitted to a warm ``RecompileWorker`` (torch imported and warmed
  up before the clock starts, as it is while the TUI is open), Inductor's caches on but *empty*
  (a fresh cache directory: nothing compiled before can be reused), then the same comparison;
* ``primed``: as ``warm``, but the worker first recompiled the base trace unchanged into the
  same fresh cache directory (untimed; the TUI can do this in the background when a trace is
  opened), so only kernels the flag changed are compiled again;
* ``nocache``: as ``warm`` with Inductor's caches off (``force_disable_caches``, as cold).

Each timed step ends when the comparison has been rendered (rich, with code diffs, into a
buffer). Goal: warm / cold at most 0.35.

    .venv/bin/python bench/recompile_latency.py [--repeat N] [--set NAME=VALUE] [examples...]
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuidebug.compiler.worker import RecompileWorker  # noqa: E402
from tuidebug.trace.diff import diff_traces  # noqa: E402
from tuidebug.machine import cores  # noqa: E402

DEFAULT = ["mlp.py", "conv_net.py", "reductions.py", "transformer_block.py"]
MODES = ("cold", "warm", "primed", "nocache")


def show(a: Path, b: Path) -> list[str]:
    from rich.console import Console

    from tuidebug.viewers.diff_view import render_diff

    d = diff_traces(a, b)
    render_diff(d, Console(file=io.StringIO(), width=120, force_terminal=True))
    return d["lines"]


def cold(example: str, sets: list[str], out: Path, cache: Path) -> tuple[float, list[str]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), TORCHINDUCTOR_CACHE_DIR=str(cache))
    cmd = [sys.executable, "-m", "tuidebug.cli", "trace", "-o", str(out)]
    for s in sets:
        cmd += ["--set", s]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd + [str(ROOT / "examples" / example)], env=env,
                          capture_output=True, text=True)
    if not (out / "manifest.json").exists():
        raise SystemExit(f"cold trace of {example} failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--set", action="append", default=None, metavar="NAME=VALUE",
                    help="the flag change to time (default: max_fusion_size=1)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--json", help="also write the raw timings here")
    ap.add_argument("examples", nargs="*", default=DEFAULT)
    ns = ap.parse_args()
    sets = ns.set or ["max_fusion_size=1"]
    modes = [m for m in ns.modes.split(",") if m]
    tmp = Path(tempfile.mkdtemp(prefix="tuidebug-bench-recompile-"))
    base_cache = tmp / "cache-base"
    worker = RecompileWorker(timeout=1200, env={"TORCHINDUCTOR_CACHE_DIR": str(tmp / "cache-worker")})
    t0 = time.perf_counter()
    worker.start()
    worker.wait_ready()
    print(f"worker ready in {time.perf_counter() - t0:.1f}s (import {worker.info.get('import_s')}s, "
          f"warm-up {worker.info.get('warmup_s')}s; not counted below)", flush=True)
    print(f"change: {' '.join(sets)}   machine: {cores()} cores", flush=True)
    print(f"{'example':22} " + " ".join(f"{m + ' s':>10}" for m in modes)
          + "  " + " ".join(f"{m + '/cold':>13}" for m in modes if m != "cold"), flush=True)
    raw: dict[str, dict[str, list[float]]] = {}
    ratios: dict[str, list[float]] = {m: [] for m in modes if m != "cold"}
    try:
        for ex in ns.examples:
            base = tmp / f"{Path(ex).stem}-base"
            cold(ex, [], base, base_cache)  # the trace the user has open (untimed)
            times: dict[str, list[float]] = {m: [] for m in modes}
            for r in range(ns.repeat):
                for mode in modes:
                    out = tmp / f"{Path(ex).stem}-{mode}-{r}"
                    cache = tmp / f"cache-{Path(ex).stem}-{mode}-{r}"
                    if mode == "cold":
                        t, out = cold(ex, sets, out, cache)
                        t0 = time.perf_counter()
                        show(base, out)
                        times[mode].append(t + time.perf_counter() - t0)
                        continue
                    env = {"TORCHINDUCTOR_CACHE_DIR": str(cache)}
                    if mode == "primed":
                        prime = worker.submit(base, {}, tmp / f"{Path(ex).stem}-prime-{r}", env=env)
                        prime.wait()
                    t0 = time.perf_counter()
                    job = worker.submit(base, sets, out, env=env, use_cache=(mode != "nocache"))
                    job.wait()
                    if job.state != "ok":
                        raise SystemExit(f"{ex} ({mode}): {job.state}: {job.error}")
                    show(base, out)
                    times[mode].append(time.perf_counter() - t0)
                    shutil.rmtree(cache, ignore_errors=True)
            med = {m: statistics.median(v) for m, v in times.items()}
            raw[ex] = times
            for m in ratios:
                ratios[m].append(med[m] / med["cold"])
            print(f"{ex:22} " + " ".join(f"{med[m]:10.2f}" for m in modes) + "  "
                  + " ".join(f"{med[m] / med['cold']:13.3f}" for m in modes if m != "cold"),
                  flush=True)
    finally:
        worker.close()
        shutil.rmtree(tmp, ignore_errors=True)
    geo = {m: math.exp(sum(math.log(x) for x in v) / len(v)) for m, v in ratios.items() if v}
    print(f"{'geomean':22} " + " " * (11 * len(modes)) + " "
          + " ".join(f"{geo[m]:13.3f}" for m in modes if m != "cold") + "   (goal: warm/cold <= 0.35)")
    if ns.json:
        Path(ns.json).write_text(json.dumps({"sets": sets, "times": raw, "geomean": geo}, indent=1))


if __name__ == "__main__":
    main()
