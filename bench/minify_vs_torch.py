#!/usr/bin/env python3
"""Bench: `tuidebug minify` vs. PyTorch's own minifier on the planted bugs of
examples/failing_compile.py (a ~150-node ATen graph; C++ compile error, runtime error and
accuracy mismatch planted with ``cpp.inject_relu_bug_TESTING_ONLY``).

For each bug, both minifiers start from their own capture of one run of the example:

* tuidebug: ``tuidebug trace`` writes the trace; ``tuidebug minify TRACE`` is timed.
* PyTorch:  the example runs with ``TORCHDYNAMO_REPRO_AFTER=aot`` (``TORCHDYNAMO_REPRO_LEVEL``
  2, or 4 for accuracy), which writes ``minifier_launcher.py``; ``python minifier_launcher.py
  minify`` is timed (with a timeout).

Each capture and each minifier run starts from a fresh, empty Inductor cache directory
(``TORCHINDUCTOR_CACHE_DIR`` under the bug's work directory; PyTorch's launcher hard-codes its
capture's directory, so that one is emptied before the minifier runs). Reported per bug: wall time,
compile attempts (tuidebug: candidates compiled plus the confirmation re-runs of its starting
candidate; PyTorch: "Made N queries", each an isolated process) and each minifier's own
starting and final graph's compute nodes (ATen calls and tuple indexing; placeholders, output
and attribute reads excluded; PyTorch's start is counted in its ``minifier_launcher.py``).

    python bench/minify_vs_torch.py [--bugs compile_error,runtime_error,accuracy] [--jobs 2]
                                    [--torch-timeout 1800] [--out DIR] [--skip-torch]

Where tuidebug's minify starts (``--starts``, for an accuracy mismatch; ``minify --start``):
one trace, then ``minify`` from each start in turn, round after round (``--rounds``, interleaved),
each from a fresh Inductor cache; per start its wall and CPU seconds (the minify process and its
workers), candidates compiled and the load average around the runs:

    python bench/minify_vs_torch.py --bugs accuracy --skip-torch --starts divergence,kernels,graph \
                                    --rounds 2
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuidebug.machine import load1  # noqa: E402

EXAMPLE = ROOT / "examples" / "failing_compile.py"
BUGS = ("compile_error", "runtime_error", "accuracy")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TORCHDYNAMO_REPRO", "TORCH_BISECT", "TORCHINDUCTOR_"))}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra)
    return env


def _run(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float,
         log: Path) -> tuple[int | None, float]:
    """(exit status or None on timeout, wall seconds); output to ``log``."""
    t0 = time.perf_counter()
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
    return rc, time.perf_counter() - t0


def count_compute_nodes(repro: Path) -> int | None:
    """ATen calls / tuple indexing in the ``forward`` of a repro (either minifier's format, and
    PyTorch's ``minifier_launcher.py``): assignments, except FX's ``x = None`` deletions and
    ``_tensor_constant0 = self._tensor_constant0`` attribute reads."""
    try:
        tree = ast.parse(repro.read_text())
    except (OSError, SyntaxError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "forward":
            return sum(1 for st in node.body if isinstance(st, ast.Assign)
                       and not (isinstance(st.value, ast.Constant) and st.value.value is None)
                       and not isinstance(st.value, ast.Attribute))
    return None


def bench_ours(bug: str, work: Path, jobs: int) -> dict[str, Any]:
    trace = work / "trace"
    rc, capture_s = _run([sys.executable, "-m", "tuidebug.cli", "trace", "-o", str(trace),
                          str(EXAMPLE), "--bug", bug], cwd=work,
                         env=_env(TORCHINDUCTOR_CACHE_DIR=str(work / "ours-capture-inductor-cache")),
                         timeout=900, log=work / "trace.log")
    out: dict[str, Any] = {"capture_s": round(capture_s, 1)}
    if not (trace / "manifest.json").exists():
        return {**out, "error": f"trace failed (status {rc}); see {work / 'trace.log'}"}
    env = _env(TORCHINDUCTOR_CACHE_DIR=str(work / "ours-inductor-cache"))
    rc, wall = _run([sys.executable, "-m", "tuidebug.cli", "minify", "--yes", str(trace), "-o",
                     str(work / "ours_repro.py"), "--jobs", str(jobs), "--json"],
                    cwd=work, env=env, timeout=3600, log=work / "ours.log")
    text = (work / "ours.log").read_text(errors="replace")
    start = text.find("{\n")
    try:
        result = json.loads(text[start:]) if start >= 0 else {}
    except json.JSONDecodeError:
        result = {}
    attempts = result.get("attempts")
    confirm = result.get("confirm_runs") or 0
    return {**out, "wall_s": round(wall, 1), "exit": rc,
            "attempts": attempts + confirm if attempts is not None else None,
            "candidates": attempts, "confirm_runs": confirm,
            "nodes_before": result.get("nodes_before"), "nodes": result.get("nodes_after"),
            "verified": result.get("verified"), "processes": result.get("launches")}


def bench_starts(bug: str, work: Path, jobs: int, starts: list[str],
                 rounds: int) -> dict[str, list[dict[str, Any]]]:
    """One trace of ``bug``; then ``minify --start S`` for each of ``starts``, interleaved over
    ``rounds``: per start a row per round (wall and CPU seconds, candidates, load average)."""
    import resource

    trace = work / "trace"
    _run([sys.executable, "-m", "tuidebug.cli", "trace", "-o", str(trace), str(EXAMPLE), "--bug",
          bug], cwd=work, env=_env(TORCHINDUCTOR_CACHE_DIR=str(work / "capture-cache")),
         timeout=900, log=work / "trace.log")
    rows: dict[str, list[dict[str, Any]]] = {s: [] for s in starts}
    for r in range(rounds):
        for start in starts:
            name = f"{start}-{r}"
            load = load1()
            cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            rc, wall = _run([sys.executable, "-m", "tuidebug.cli", "minify", "--yes", str(trace),
                             "-o", str(work / f"{name}.py"), "--jobs", str(jobs), "--json",
                             "--start", start], cwd=work,
                            env=_env(TORCHINDUCTOR_CACHE_DIR=str(work / f"{name}-cache")),
                            timeout=3600, log=work / f"{name}.log")
            cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            text = (work / f"{name}.log").read_text(errors="replace")
            try:
                result = json.loads(text[text.find("{\n"):]) if "{\n" in text else {}
            except json.JSONDecodeError:
                result = {}
            row = {"wall_s": round(wall, 1), "exit": rc,
                   "cpu_s": round((cpu1.ru_utime + cpu1.ru_stime)
                                  - (cpu0.ru_utime + cpu0.ru_stime), 1),
                   "candidates": result.get("attempts"), "start": result.get("start"),
                   "nodes": result.get("nodes_after"), "verified": result.get("verified"),
                   "load_before": round(load, 1), "load_after": round(load1(), 1)}
            rows[start].append(row)
            print(f"[bench] {bug} --start {start} round {r + 1}: {row}", file=sys.stderr,
                  flush=True)
    return rows


def bench_torch(bug: str, work: Path, timeout: float) -> dict[str, Any]:
    cwd = work / "torch"
    cwd.mkdir(exist_ok=True)
    level = "4" if bug == "accuracy" else "2"
    env = _env(TORCHDYNAMO_REPRO_AFTER="aot", TORCHDYNAMO_REPRO_LEVEL=level,
               TORCHINDUCTOR_CACHE_DIR=str(work / "torch-inductor-cache"))
    rc, capture_s = _run([sys.executable, str(EXAMPLE), "--bug", bug], cwd=cwd, env=env,
                         timeout=900, log=work / "torch-capture.log")
    out: dict[str, Any] = {"capture_s": round(capture_s, 1)}
    launchers = sorted(cwd.glob("torch_compile_debug/*/minifier/minifier_launcher.py"))
    if not launchers:
        return {**out, "error": f"no minifier_launcher.py written (status {rc}); "
                                f"see {work / 'torch-capture.log'}"}
    launcher = launchers[-1]
    # The launcher copies the capture's TORCH*/INDUCTOR* environment into itself, so it sets
    # TORCHINDUCTOR_CACHE_DIR to the capture's cache (holding the kernels just compiled) whatever
    # we pass: empty that directory, and point the variable at it too, so that the minifier
    # starts from a fresh, empty cache either way.
    cache = work / "torch-inductor-cache"
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir()
    rc, wall = _run([sys.executable, launcher.name, "minify"], cwd=launcher.parent,
                    env=_env(TORCHINDUCTOR_CACHE_DIR=str(cache)), timeout=timeout,
                    log=work / "torch-minify.log")
    log = (work / "torch-minify.log").read_text(errors="replace")
    m = re.search(r"Made (\d+) queries", log)
    isolated = sum(1 for _ in launcher.parent.rglob("isolate/*.py"))
    repro = launcher.parent / "repro.py"
    started = re.search(r"Started off with (\d+) nodes", log)
    return {**out, "wall_s": round(wall, 1), "exit": rc, "timed_out": rc is None,
            "attempts": int(m.group(1)) if m else isolated,
            "nodes": count_compute_nodes(repro) if repro.exists() else None,
            "nodes_before": count_compute_nodes(launcher),
            "fx_nodes_before": int(started.group(1)) if started else None,
            "processes": isolated + 1}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bugs", default=",".join(BUGS))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--torch-timeout", type=float, default=1800.0)
    ap.add_argument("--out", help="work directory (default: a new temp dir, kept)")
    ap.add_argument("--skip-torch", action="store_true")
    ap.add_argument("--starts", default=None,
                    help="compare tuidebug's minify starts instead (e.g. divergence,graph)")
    ap.add_argument("--rounds", type=int, default=2, help="--starts: interleaved rounds")
    ns = ap.parse_args()
    root = Path(ns.out) if ns.out else Path(tempfile.mkdtemp(prefix="minify-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    if ns.starts:
        found = {}
        for bug in ns.bugs.split(","):
            work = root / f"{bug}-starts"
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            found[bug] = bench_starts(bug, work, ns.jobs, ns.starts.split(","), ns.rounds)
        (root / "starts.json").write_text(json.dumps(found, indent=1))
        for bug, by in found.items():
            for start, runs in by.items():
                walls = [r["wall_s"] for r in runs]
                cpus = [r["cpu_s"] for r in runs]
                print(f"{bug:<14} {start:<11} wall {min(walls)}-{max(walls)}s  cpu "
                      f"{min(cpus)}-{max(cpus)}s  candidates {[r['candidates'] for r in runs]}  "
                      f"load {[r['load_before'] for r in runs]}  start {runs[0]['start']}")
        print(f"\nwork directory: {root}  (starts.json, logs, repros)")
        return 0
    rows: dict[str, dict[str, Any]] = {}
    for bug in ns.bugs.split(","):
        work = root / bug
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        print(f"[bench] {bug}: tuidebug minify …", file=sys.stderr, flush=True)
        ours = bench_ours(bug, work, ns.jobs)
        print(f"[bench] {bug}: tuidebug {ours}", file=sys.stderr, flush=True)
        theirs: dict[str, Any] = {}
        if not ns.skip_torch:
            print(f"[bench] {bug}: PyTorch minifier (timeout {ns.torch_timeout:.0f}s) …",
                  file=sys.stderr, flush=True)
            theirs = bench_torch(bug, work, ns.torch_timeout)
            print(f"[bench] {bug}: PyTorch {theirs}", file=sys.stderr, flush=True)
        rows[bug] = {"tuidebug": ours, "torch": theirs}
    (root / "results.json").write_text(json.dumps(rows, indent=1))
    _table(rows)
    print(f"\nwork directory: {root}  (results.json, logs, both repros)")
    return 0


def _fmt(v: Any, suffix: str = "") -> str:
    return "-" if v is None else f"{v}{suffix}"


def _table(rows: dict[str, dict[str, Any]]) -> None:
    print(f"\n{'bug':<14} {'minifier':<9} {'wall':>8} {'attempts':>9} {'nodes':>11} {'procs':>6}"
          f"  note")
    for bug, r in rows.items():
        o, t = r["tuidebug"], r["torch"]
        before = o.get("nodes_before")  # each row shows its own minifier's starting count
        print(f"{bug:<14} {'tuidebug':<9} {_fmt(o.get('wall_s'), 's'):>8} "
              f"{_fmt(o.get('attempts')):>9} {_fmt(before) + ' -> ' + _fmt(o.get('nodes')):>11} "
              f"{_fmt(o.get('processes')):>6}  "
              f"{'verified in a fresh process' if o.get('verified') else o.get('error', 'NOT verified')}")
        if t:
            note = t.get("error") or ("TIMED OUT (best so far)" if t.get("timed_out") else "")
            print(f"{'':<14} {'pytorch':<9} {_fmt(t.get('wall_s'), 's'):>8} "
                  f"{_fmt(t.get('attempts')):>9} "
                  f"{_fmt(t.get('nodes_before')) + ' -> ' + _fmt(t.get('nodes')):>11} "
                  f"{_fmt(t.get('processes')):>6}  {note}")
            if o.get("wall_s") and t.get("wall_s"):
                print(f"{'':<14} {'speed-up':<9} {t['wall_s'] / o['wall_s']:>7.1f}x"
                      + (" (at least; PyTorch timed out)" if t.get("timed_out") else ""))


if __name__ == "__main__":
    sys.exit(main())
