"""Does a busy CPU move ``trace --profile``'s verdict? (issue 26: within ±15% of the quiet one.)

Traces an example with ``tuidebug trace --profile N`` alternately as the machine is, then with
CPU hogs beside it (a real process spinning a busy loop per core, ``bench/_hogs.py``, started
before the trace and killed after it), ``--pairs`` times; reads each trace's whole-call verdict
(eager/compiled, the median of the interleaved rounds' ratios, and its interval) and the load
the capture saw. Each hogged trace also says what the hogs did (their CPU time, the load before
and after): a pair whose hogs did not contend for every core is no evidence, and FAILs.
Prints one line per trace, then the verdicts' ratio with hogs to without: the median over the
pairs and its range, and PASS when every pair is within ``--band`` and was contended.

    python bench/profile_under_load.py                       # examples/transformer_block.py
    python bench/profile_under_load.py --example item_per_layer.py --args "--layers 3"
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _hogs import Contention, cores, hogging  # noqa: E402
from tuidebug.machine import load1  # noqa: E402


def trace(example: str, args: list[str], runs: int, out: Path) -> dict:
    """One ``trace --profile``: its first whole call as profile.json recorded it."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT),
                                                                      os.environ.get("PYTHONPATH")])))
    cmd = [sys.executable, "-m", "tuidebug.cli", "trace", "--profile", str(runs), "-o", str(out),
           str(ROOT / "examples" / example), *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"trace failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
    calls = json.loads((out / "profile.json").read_text()).get("calls") or []
    if not calls:
        raise SystemExit(f"{out}: no whole call was measured")
    return calls[0]


def with_hogs(n: int | None, fn) -> tuple[dict, Contention]:
    """``fn()`` with ``n`` busy-loop processes (None: one per core) running beside it, and what
    they did."""
    with hogging(n) as load:
        out = fn()
    return out, load


def line(label: str, call: dict) -> str:
    m = call.get("machine") or {}
    c, e = call["compiled"], call["eager"]
    return (f"{label:<6} ratio {call['ratio']:.3f} [{call['ratio_low']:.3f}–"
            f"{call['ratio_high']:.3f}]  compiled {c['median_s'] * 1e6:.0f} us "
            f"(p10 {c['p10_s'] * 1e6:.0f}, p90 {c['p90_s'] * 1e6:.0f}), eager "
            f"{e['median_s'] * 1e6:.0f} us; {call['rounds']} rounds, {call['threads']} thread(s), "
            f"load {m.get('load1')} → {m.get('load1_during')}, oversubscribed "
            f"{m.get('oversubscribed')}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--example", default="transformer_block.py")
    ap.add_argument("--args", default="", help="the example's own arguments, one string")
    ap.add_argument("--runs", type=int, default=10, help="trace --profile N")
    ap.add_argument("--pairs", type=int, default=2, help="quiet/hogged traces, alternating")
    ap.add_argument("--hogs", type=int, default=None,
                    help="busy-loop processes beside the trace (default: one per core)")
    ap.add_argument("--band", type=float, default=0.15)
    a = ap.parse_args()
    args = shlex.split(a.args)
    print(f"{a.example} {' '.join(args)}: trace --profile {a.runs}, {a.pairs} pairs, "
          f"{a.hogs or cores()} hog(s), {cores()} cores, load now "
          f"{load1():.2f}")
    ratios: list[float] = []
    contended = True
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.pairs):
            quiet = trace(a.example, args, a.runs, Path(tmp) / f"quiet{i}")
            print(line("quiet", quiet), flush=True)
            hogged, load = with_hogs(a.hogs, lambda: trace(a.example, args, a.runs,
                                                           Path(tmp) / f"hog{i}"))
            print(line("hog", hogged), flush=True)
            print(f"       {load.describe()}", flush=True)
            contended &= load.contended
            ratios.append(hogged["ratio"] / quiet["ratio"])
    within = all(abs(r - 1) <= a.band for r in ratios)
    good = within and contended
    print(f"hog/quiet verdict ratio: median {statistics.median(ratios):.3f}, range "
          f"{min(ratios):.3f}–{max(ratios):.3f} over {len(ratios)} pairs "
          f"({', '.join(f'{r:.3f}' for r in ratios)}): within ±{a.band:.0%}: "
          f"{'yes' if within else 'NO'}; every hogged trace contended: "
          f"{'yes' if contended else 'NO'}: {'PASS' if good else 'FAIL'}")
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
