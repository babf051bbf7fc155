"""Commands that read traces: ``info``, ``open``, ``import``, ``svg``, ``diff``.

None of them imports torch. Whatever the user names (a trace, an archive, a TORCH_TRACE log, a
debug folder, a job) becomes a trace through the one door, ``tuidebug.trace.open``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tuidebug.cli.output import console, note
from tuidebug.errors import CliError
from tuidebug.trace.format.written import Written
from tuidebug.trace.open import ACCEPTED, Opened, job_of, open_input, trace_dir

TRACE_HELP = ACCEPTED
RANK_HELP = ("for a job directory (tuidebug trace --nproc-per-node) or a multi-rank TORCH_TRACE "
             "log: the rank to read (default: the lowest)")


def import_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source")
    p.add_argument("-o", "--output", required=True, help="the new trace directory")
    p.add_argument("--rank", type=int, help=RANK_HELP)


def cmd_import(ns: argparse.Namespace) -> int:
    from tuidebug.trace.importers import import_path
    from tuidebug.trace.importers.job_import import import_job, is_multi_rank

    if ns.rank is None and is_multi_rank(Path(ns.source)):  # every rank, as a job directory
        job = import_job(Path(ns.source), Path(ns.output))
        print(f"[tuidebug] imported every rank of {ns.source} → {job}", file=sys.stderr)
        return print_job_info(job, as_json=False)
    written = Written()  # the summary is built from what the import wrote, not read back
    out = import_path(Path(ns.source), Path(ns.output), rank=ns.rank, written=written)
    print(f"[tuidebug] imported {ns.source} → {out}", file=sys.stderr)
    return print_info(Path(out), as_json=False, written=written)


# -- info -----------------------------------------------------------------------------------------

def print_info(path: Path, *, as_json: bool, written: Written | None = None) -> int:
    """Print the summary of the trace folder ``path`` (a table, or JSON); 0 when its status is
    ok, else 1. ``written``: what its writer wrote in this process (read from memory)."""
    from tuidebug.trace.format.reader import Trace
    from tuidebug.trace.format.safefile import strict_dumps
    from tuidebug.trace.queries.summary import trace_summary

    # the table shows no kernel's sizes: not read for it
    summary = trace_summary(Trace(path, written=written), kernel_sizes=as_json)  # TraceError: printed by main
    if as_json:
        print(strict_dumps(summary, indent=1, default=str))
    else:
        from tuidebug.viewers.info import render_summary

        render_summary(summary, console())
    return 0 if summary["status"] == "ok" else 1


def info_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help=TRACE_HELP)
    p.add_argument("--json", action="store_true", help="machine-readable summary")
    p.add_argument("--rank", type=int, help=RANK_HELP)


def cmd_info(ns: argparse.Namespace) -> int:
    opened = open_input(ns.trace, ns.rank, on_note=note)
    if opened.job is not None and ns.rank is None:  # a job: every rank, side by side
        print_job_info(opened.job, as_json=ns.json)
    else:
        print_info(opened.one_trace(), as_json=ns.json)
    return 0


# -- open -----------------------------------------------------------------------------------------

def open_trace(path: Path, job: Path | None = None, start: str | None = None) -> int:
    """Open the trace folder ``path`` in the terminal UI (a rank of ``job``: on the ranks
    screen, unless ``start`` names another); returns the app's exit code."""
    from tuidebug.trace.format.reader import Trace

    trace = Trace(path)
    try:
        from tuidebug.tui.app import run_app
    except ImportError as e:
        raise CliError(f"the terminal UI is not available: {e}") from e
    return run_app(trace, job=job, start=start)


def open_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help=TRACE_HELP)
    p.add_argument("--rank", type=int, help=RANK_HELP)


def cmd_open(ns: argparse.Namespace) -> int:
    return open_path(Path(ns.trace), ns.rank)


def open_path(path: Path, rank: int | None = None) -> int:
    """Open whatever ``path`` names (``open_input``) in the TUI: a job on its ranks screen."""
    opened = open_input(path, rank, on_note=note)
    if opened.job is not None:
        say_job_rank(opened)
    elif opened.trace is not None and (job := job_of(opened.trace)) is not None:
        # a rank's folder named itself (as `trace --nproc-per-node` prints it): that rank, with
        # its job's ranks screen a key away
        from tuidebug.trace.jobs.job import rank_of

        print(f"[tuidebug] {path} is rank {rank_of(job, opened.trace)} of the distributed job "
              f"{job} (R: its ranks screen)", file=sys.stderr)
        return open_trace(opened.trace, job=job, start="overview")
    return open_trace(opened.one_trace(), job=opened.job.resolve() if opened.job else None)


def say_job_rank(opened: Opened) -> None:
    """Tell that a job opens on its ranks screen, and which rank."""
    print(f"[tuidebug] {opened.named} is a distributed job: the ranks screen, rank "
          f"{opened.rank} open (R: the ranks screen, o there: open another rank)",
          file=sys.stderr)


# -- svg ------------------------------------------------------------------------------------------

SVG_DESCRIPTION = ("Render a captured FX graph as SVG with Graphviz's dot. Graphs over the node "
                   "budget are collapsed by nn.Module automatically; long edges become stubs.")


def svg_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help=TRACE_HELP)
    p.add_argument("--rank", type=int, help=RANK_HELP)
    p.add_argument("--graph", metavar="ID", help="graph id (default: the first; see tuidebug info)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--stage", metavar="NAME",
                       help="stage name, snapshot file stem or index (default: the last snapshot)")
    which.add_argument("--pass", dest="pass_index", metavar="N", type=int,
                       help="the graph after pass N (an index from the pass list)")
    p.add_argument("--kernels", action="store_true",
                   help="post-fusion view: one cluster per generated kernel around its FX nodes")
    p.add_argument("--diff", nargs="*", metavar="STAGE",
                   help="what changed: --diff STAGE_A STAGE_B, or --pass N --diff for one pass")
    p.add_argument("--depth", type=int, metavar="N",
                   help="collapse nodes into their nn.Module, keeping N levels of the module path")
    p.add_argument("--budget", type=int, default=400, metavar="N",
                   help="above this many nodes, collapse automatically (default: 400)")
    p.add_argument("--full", action="store_true", help="never collapse automatically (slow when big)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="S",
                   help="seconds for all layout attempts together (default: 60)")
    p.add_argument("--keep-dot", action="store_true", help="keep the .dot file beside the SVG")
    p.add_argument("-o", "--output", metavar="FILE", help="SVG file (default: <trace>-<graph>-<stage>.svg)")


def cmd_svg(ns: argparse.Namespace) -> int:
    from tuidebug.trace.format.reader import Trace
    from tuidebug.inert import inert
    from tuidebug.viewers.svg import export

    diff: list[str] | bool | None = None
    if ns.diff is not None:
        if len(ns.diff) == 2:
            diff = list(ns.diff)
        elif not ns.diff and (ns.pass_index is not None or ns.stage is not None):
            diff = True
        else:
            raise CliError("--diff takes two stages (--diff STAGE_A STAGE_B), or none with "
                           "--pass N / --stage NAME to compare it with the snapshot before")
        if ns.stage is not None and diff is not True:
            raise CliError("--stage and --diff STAGE_A STAGE_B cannot be combined")
    trace = Trace(trace_dir(ns.trace, ns.rank, on_note=note))  # TraceError…: printed by main
    e = export(trace, ns.graph, ns.stage, ns.kernels, diff, ns.depth, ns.output,
               pass_index=ns.pass_index, budget=ns.budget, collapse=not ns.full,
               timeout=ns.timeout, keep_dot=ns.keep_dot)
    for w in e.warnings:
        print(f"warning: {inert(w)}", file=sys.stderr)
    d = e.dot
    what = f"{d.total} nodes" + (f", {d.shown} shown" if d.shown != d.total else "")
    notes = "; ".join(d.notes)
    print(f"wrote {inert(e.svg, multiline=False)} "
          f"({inert(what)}{'; ' + inert(notes) if notes else ''}; "
          f"{e.rendered.engine} {e.rendered.seconds:.2f}s)")
    if len(e.rendered.tries) > 1:
        print("layout: " + "; ".join(e.rendered.tries), file=sys.stderr)
    return 0


# -- diff -----------------------------------------------------------------------------------------

def show_diff(a: Path, b: Path, *, as_json: bool, code: bool, unchanged: bool = False,
              context: int = 3, max_lines: int = 120,
              extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Compare traces ``a`` and ``b`` and print the comparison (rich, or JSON with ``extra``)."""
    from tuidebug.trace.diff import diff_traces

    d = diff_traces(a, b, code=code, context=context, max_diff_lines=max(max_lines, 400))
    if as_json:
        from tuidebug.trace.format.safefile import strict_dumps

        print(strict_dumps({**(extra or {}), **d}, indent=1, default=str))
    else:
        from tuidebug.viewers.diff_view import render_diff

        render_diff(d, console(), code=code, unchanged=unchanged, max_code_lines=max_lines)
    return d


def diff_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace_a", help=TRACE_HELP + "; a job: its lowest rank")
    p.add_argument("trace_b", help="the trace to compare with, in any of those forms")
    p.add_argument("--json", action="store_true", help="machine-readable comparison")
    p.add_argument("--no-code", action="store_true", help="leave out code diffs")
    p.add_argument("--unchanged", action="store_true", help="list unchanged kernels too")
    p.add_argument("--context", type=int, default=3, help="lines of context in code diffs")
    p.add_argument("--max-lines", type=int, default=120, help="lines shown per code diff")


def cmd_diff(ns: argparse.Namespace) -> int:
    a, b = (trace_dir(t, on_note=note) for t in (ns.trace_a, ns.trace_b))
    show_diff(a, b, as_json=ns.json, code=not ns.no_code,
              unchanged=ns.unchanged, context=ns.context, max_lines=ns.max_lines)
    return 0


# -- job directories (every rank of a distributed job) ---------------------------------------------

def print_job_info(path: Path, *, as_json: bool) -> int:
    """Print a job directory's per-rank table and the ranks' first divergence; 0 when every rank
    is ok and the ranks agree."""
    from tuidebug.trace.jobs.ranks import analyze_job

    report = analyze_job(path)
    from tuidebug.trace.importers.job_import import MARKER, missing

    if (path / MARKER).is_file():  # imported from TORCH_TRACE logs: what they lack, said
        report["imported_from"] = {"kind": "torch_trace", "missing": missing(path)}
    if as_json:
        from tuidebug.trace.format.safefile import strict_dumps

        print(strict_dumps(report, indent=1, default=str))
    else:
        from tuidebug.viewers.ranks_view import render_job

        render_job(report, console())
    ok = all(r.get("status") == "ok" for r in report["ranks"])
    return 0 if ok and report["divergence"] is None else 1


# -- perfetto ---------------------------------------------------------------------------------------

PERFETTO_DESCRIPTION = (
    "Write TRACE as Chrome trace-event JSON, to open in Perfetto (ui.perfetto.dev) or "
    "chrome://tracing: the compile phases and passes of every graph on one process's tracks and, "
    "for a trace made with --profile, a median call of each compiled graph (its kernel calls) "
    "and of its eager graph (its FX nodes) on two more.")


def perfetto_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help=TRACE_HELP)
    p.add_argument("--rank", type=int, help=RANK_HELP)
    p.add_argument("-o", "--output", help="the JSON file (default: <trace name>.perfetto.json)")


def cmd_perfetto(ns: argparse.Namespace) -> int:
    from tuidebug.trace.format.atomic import write_text
    from tuidebug.trace.queries.perfetto import chrome_trace
    from tuidebug.trace.format.reader import Trace
    from tuidebug.trace.format.safefile import strict_dumps
    from tuidebug.trace.format.safefile import safe_name
    from tuidebug.inert import inert

    trace = Trace(trace_dir(ns.trace, ns.rank, on_note=note))
    # named for the trace's folder (resolved: `tuidebug perfetto .` is not ".perfetto.json"),
    # made a safe name: an archive's or a log's folder name is data
    out = Path(ns.output) if ns.output else \
        Path(f"{safe_name(trace.root.resolve().name)}.perfetto.json")
    data = chrome_trace(trace)
    try:
        write_text(out, strict_dumps(data))
    except OSError as e:
        raise CliError(f"cannot write {out}: {e.strerror or e}") from None
    spans = sum(1 for e in data["traceEvents"] if e.get("ph") == "X")
    print(f"wrote {inert(out, multiline=False)}: {spans} spans "
          "(open it in https://ui.perfetto.dev)")
    return 0
