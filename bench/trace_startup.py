"""What ``tuidebug trace`` costs a script that never compiles, and a tiny one that compiles: CPU
seconds (the CLI and every process under it) and wall seconds, against the script run plainly,
runs alternating (plain, then each checkout in turn) so that load moves every side alike.

    .venv/bin/python bench/trace_startup.py [--rounds N] [--tree DIR …]

``--tree``: a checkout whose ``tuidebug`` traces (repeatable; default this one): give an older
checkout (``git worktree add /tmp/old COMMIT``) to compare before and after. Each run of the
compiling script has its own empty Inductor cache (a cold compile, as a user's first run).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._spread import spread  # noqa: E402
from tuidebug.machine import cores, load1  # noqa: E402

SCRIPTS = {
    "never compiles": "import torch\nprint((torch.ones(8) * 2).sum())\n",
    "tiny compile": ("import torch\nf = torch.compile(lambda x: torch.relu(x) * 2)\n"
                     "print(f(torch.ones(8)).sum())\n"),
}


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(CPU seconds of ``cmd`` and its children, wall seconds), run in ``cwd`` (not a
    checkout: ``python -m`` puts the working directory before PYTHONPATH)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=cwd)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode not in (0, 12):  # 12: nothing compiled (the script that never compiles)
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime), wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tree", action="append", default=None,
                    help="a checkout whose tuidebug traces (repeatable; default: this one)")
    ns = ap.parse_args()
    trees = [Path(t).resolve() for t in ns.tree or [str(ROOT)]]
    print(f"load average {load1():.1f} on {cores()} cores; {ns.rounds} rounds, alternating")
    with tempfile.TemporaryDirectory() as tmp:
        results: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for name, text in SCRIPTS.items():
            script = Path(tmp) / f"{name.replace(' ', '_')}.py"
            script.write_text(text)
            for r in range(ns.rounds):
                sides = [("plain", None)] + [(str(t), t) for t in trees]
                for label, tree in sides:
                    run = Path(tmp) / f"{len(results)}-{r}-{abs(hash(label))}"
                    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(run / "cache"))
                    if tree is None:
                        cmd = [sys.executable, str(script)]
                    else:
                        env["PYTHONPATH"] = str(tree)
                        cmd = [sys.executable, "-m", "tuidebug.cli", "trace", "-o",
                               str(run / "trace"), str(script)]
                    results.setdefault((name, label), []).append(timed(cmd, env, Path(tmp)))
        print(f"{'script':16} {'run':40} {'CPU s median [min–max]':>26} {'wall s':>22}")
        for (name, label), xs in results.items():
            print(f"{name:16} {label[-40:]:40} {spread([c for c, _ in xs]):>26} "
                  f"{spread([w for _, w in xs]):>22}")
    print(f"load average {load1():.1f} at the end")


if __name__ == "__main__":
    main()
