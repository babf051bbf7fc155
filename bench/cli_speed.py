"""How much CPU a whole ``tuidebug`` command costs (interpreter start and imports included),
optionally against another checkout, interleaved.

    .venv/bin/python bench/cli_speed.py [--repeat 8] [--against DIR] -- info /tmp/tr24
    .venv/bin/python bench/cli_speed.py --against /tmp/old -- diff /tmp/tr24 /tmp/tr24-copy

Each run is ``python -m tuidebug.cli ARGS…`` in a child process with ``PYTHONPATH`` set to this
repository (and, with ``--against``, to DIR in turn: a checkout or an extracted ``git archive``
of another commit), run from bytecode as an installed tool is (``PYTHONDONTWRITEBYTECODE`` is
dropped from the children's environment; the first run of each writes it, and is not counted).
Reported: the child's CPU seconds (user + system, ``os.wait4``: what a loaded machine inflates
least) and peak RSS, median [min–max]; with ``--against``, the ratio this / other per
interleaved pair; the load average before and after. The 24-layer trace is made by
``bench/tui_open.py`` (see its docstring).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from _spread import spread  # noqa: E402
from tuidebug.machine import load1  # noqa: E402


def run(root: Path, args: list[str]) -> tuple[float, float]:
    """(CPU seconds, peak RSS MB) of one ``tuidebug ARGS`` run from ``root``."""
    env = dict(os.environ, PYTHONPATH=str(root))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    p = subprocess.Popen([sys.executable, "-m", "tuidebug.cli", *args], cwd=root, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) not in (0, 1):  # 1: the trace's status is not ok
        raise RuntimeError(f"tuidebug {' '.join(args)} failed in {root}")
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=8)
    ap.add_argument("--against", type=Path, help="another checkout, run in turn with this one")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="-- the command and its arguments")
    ns = ap.parse_args()
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    if not args:
        ap.error("give the command after --, e.g. -- info /tmp/tr24")
    roots = {"this": ROOT} | ({"other": ns.against.resolve()} if ns.against else {})
    for root in roots.values():
        run(root, args)  # writes the bytecode; not counted
    rows: dict[str, list[tuple[float, float]]] = {name: [] for name in roots}
    load_before = load1()
    for _ in range(ns.repeat):
        for name, root in roots.items():
            rows[name].append(run(root, args))
    load_after = load1()
    print(f"tuidebug {' '.join(args)}: n={ns.repeat}, load {load_before:.1f} -> {load_after:.1f}")
    for name, rs in rows.items():
        print(f"  {name:5} ({roots[name]}) CPU {spread([r[0] for r in rs], '{:.3f}')} s   "
              f"peak RSS {spread([r[1] for r in rs], '{:.0f}')} MB")
    if ns.against:
        ratios = [a[0] / b[0] for a, b in zip(rows["this"], rows["other"])]
        print(f"  CPU this / other per pair: {spread(ratios, '{:.2f}')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
