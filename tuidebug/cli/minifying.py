"""Commands that shrink and explain a failure: ``minify`` and ``bisect``.

Neither imports torch in the CLI process for minify (the workers do); bisect imports it to drive
Inductor's compiler bisector.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tuidebug.cli.consent_args import allow_flag_argument, allowed_flags
from tuidebug.cli.output import note
from tuidebug.cli.viewing import RANK_HELP
from tuidebug.errors import MinifyError
from tuidebug.trace.open import ACCEPTED, trace_dir


def positive_int(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return n


def positive_float(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < x < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text}")
    return x


MINIFY_DESCRIPTION = ("Delta-debug the failing graph of a trace (compile error, runtime error or "
                      "accuracy mismatch against eager) into the smallest standalone repro.py that "
                      "still fails the same way, and check it in a fresh process.")
BISECT_DESCRIPTION = ("Run a test repeatedly under Inductor's compiler bisector "
                      "(torch._inductor.compiler_bisector), in child processes, and print "
                      "the backend, subsystem and pass application that the failure needs.")


def minify_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help=f"a failed trace: {ACCEPTED}")
    p.add_argument("--rank", type=int, help=RANK_HELP)
    p.add_argument("-o", "--output", default="repro.py", help="where to write the repro "
                   "(default: repro.py)")
    p.add_argument("--jobs", "-j", type=positive_int, default=2,
                   help="candidates tested in parallel, one warm worker process each (default 2)")
    p.add_argument("--timeout", type=positive_float, default=60.0,
                   help="seconds one candidate may take before its worker is replaced (default 60)")
    p.add_argument("--accuracy-tol", type=positive_float, default=None, metavar="TOL",
                   help="accuracy: the judge's tolerance (default: the trace's --accuracy-tol, "
                        "else each output dtype's default, as the trace judged it)")
    p.add_argument("--keep-work", action="store_true",
                   help="keep the work directory (every candidate, worker logs)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("-y", "--yes", action="store_true",
                   help="run without asking (what will run is still printed); without it, "
                        "tuidebug asks on the terminal and refuses when there is none")
    p.add_argument("--force", action="store_true",
                   help="write the repro over an existing file")
    p.add_argument("--start", choices=("divergence", "kernels", "graph"), default="divergence",
                   help="where delta debugging starts: the first diverging kernel of an "
                        "accuracy mismatch when the trace knows it, else the kernels the error "
                        "points to (default); `kernels`: ignore the diverging kernel; `graph`: "
                        "the whole graph")
    allow_flag_argument(p)


def bisect_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help=f"a failed trace: {ACCEPTED}")
    p.add_argument("--rank", type=int, help=RANK_HELP)
    p.add_argument("--repro", "-r", help="test this repro.py (from `tuidebug minify`; much "
                   "faster) instead of re-running the traced script")
    p.add_argument("--fresh", action="store_true", help="run the repro in a fresh process each "
                   "time instead of one warm worker")
    p.add_argument("--timeout", type=positive_float, default=600.0,
                   help="seconds per run (default 600)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("-y", "--yes", action="store_true",
                   help="run without asking (what will run is still printed); without it, "
                        "tuidebug asks on the terminal and refuses when there is none")
    allow_flag_argument(p)


def _reporter(as_json: bool) -> tuple[Any, Any]:
    """(on_progress callback, stop function): a rich status line, or plain lines off a TTY."""
    from rich.console import Console

    console = Console(stderr=True)
    if as_json or not console.is_terminal:
        last: list[Any] = [None]

        def plain(pr: Any) -> None:
            key = (pr.step, pr.attempts, pr.nodes)
            if key != last[0] or pr.message:
                last[0] = key
                print(f"[minify] {pr.elapsed_s:6.1f}s  {pr.step:<9} attempts {pr.attempts:<3} "
                      f"nodes {pr.nodes}/{pr.nodes_before}"
                      + (f"  {pr.message}" if pr.message else ""), file=sys.stderr, flush=True)
        return plain, lambda: None

    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                        console=console, transient=False)
    task = progress.add_task("starting workers…")
    progress.start()

    def rich_update(pr: Any) -> None:
        cached = f" ({pr.cache_hits} cached)" if pr.cache_hits else ""
        desc = (f"[bold]{pr.step:<9}[/] attempts {pr.attempts}{cached} · nodes "
                f"[cyan]{pr.nodes}[/]/{pr.nodes_before}")
        progress.update(task, description=desc)
        if pr.message:
            progress.console.print(f"  {pr.message}", markup=False, highlight=False)
    return rich_update, progress.stop


def cmd_minify(ns: argparse.Namespace) -> int:
    from tuidebug.compiler.consent import ask
    from tuidebug.minify.minifier import minify
    from tuidebug.minify.plans import minify_plan

    if Path(ns.output).exists() and not ns.force:
        raise MinifyError(f"{ns.output} exists; choose another file with -o, or --force to "
                          "write over it")
    trace = trace_dir(ns.trace, ns.rank, on_note=note)  # TraceError, UnpackError, ImportFailed
    allowed = allowed_flags(ns)
    allowed.update(ask(minify_plan(trace, allowed), yes=ns.yes))  # NotConfirmed: by main

    on_progress, stop = _reporter(ns.json)
    try:
        result = minify(trace, ns.output, jobs=ns.jobs, timeout=ns.timeout,
                        on_progress=on_progress, tol=ns.accuracy_tol,
                        keep_work=ns.keep_work, allowed=allowed, start=ns.start)
    finally:  # MinifyError: printed by main
        stop()
    if ns.json:
        print(json.dumps(result.to_json(), indent=1))
    else:
        print(f"{result.signature}\n"
              f"  started from {result.start or 'the whole graph'}\n"
              f"  {result.nodes_before} -> {result.nodes_after} compute nodes, "
              f"{result.inputs_after} input(s), flags: {', '.join(result.flags) or 'none'}\n"
              f"  {result.attempts} candidates compiled ({result.cache_hits} cache hits, "
              f"{result.rejected} failed differently) + {result.confirm_runs} confirmation "
              f"re-run{'s' if result.confirm_runs != 1 else ''} of the start, "
              f"{result.launches} processes, {result.wall_s:.1f}s")
        if result.repro_path:
            print(f"  wrote {result.repro_path}: {result.message}")
        else:
            print(f"  {result.message}")
        if result.work_dir:
            print(f"  work directory (candidates, logs): {result.work_dir}")
    if result.interrupted:
        return 130
    return 0 if result.verified else 1


def cmd_bisect(ns: argparse.Namespace) -> int:
    from tuidebug.compiler.consent import ask
    from tuidebug.minify.bisect_task import FRESH_HINT
    from tuidebug.minify.bisection import bisect
    from tuidebug.minify.plans import bisect_plan

    trace = trace_dir(ns.trace, ns.rank, on_note=note)  # TraceError, UnpackError, ImportFailed
    allowed = allowed_flags(ns)
    allowed.update(ask(bisect_plan(trace, ns.repro, allowed), yes=ns.yes))  # NotConfirmed

    def step(n: int, text: str) -> None:
        print(f"[bisect] run {n}: {text}", file=sys.stderr, flush=True)

    if not ns.repro:
        print(f"[bisect] {FRESH_HINT}", file=sys.stderr)
    # MinifyError: printed by main
    report = bisect(trace, ns.repro, timeout=ns.timeout, on_step=step, fresh=ns.fresh,
                    allowed=allowed)
    if ns.json:
        print(json.dumps({k: v for k, v in report.__dict__.items()}, indent=1))
    else:
        print(f"responsible: {report.found}")
        print(f"  {report.runs} runs of {' '.join(report.command)} in {report.wall_s:.1f}s")
    return 0 if report.backend else 1
