"""Sub-commands that need the compiler package: ``flags`` (and ``flags demo``), ``recompile``,
``diff``. Nothing here imports torch: recompiles run in the worker process."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def _cli_error(msg: str) -> Exception:
    """``tuidebug.cli.CliError``: ``main`` prints it as one line and exits with 2."""
    from tuidebug.cli import CliError

    return CliError(msg)


def _message(e: BaseException) -> str:
    """What an error says: ``str(KeyError(m))`` is ``repr(m)``, every other one's is ``m``."""
    return str(e.args[0]) if isinstance(e, KeyError) and len(e.args) == 1 else str(e)


def cmd_flags(ns: argparse.Namespace) -> int:
    if ns.pattern == "demo":
        from tuidebug.compiler.flag_demos import demo_main

        if len(ns.names) > 1:
            raise _cli_error("flags demo takes one flag name (or none, to list the demos)")
        try:
            return demo_main(ns.names[0] if ns.names else None, out=ns.output, as_json=ns.json,
                             keep=ns.keep, timeout=ns.timeout, device=ns.device)
        except (LookupError, ValueError) as e:
            raise _cli_error(_message(e)) from None
    if ns.names:
        raise _cli_error(f"unexpected arguments: {' '.join(ns.names)} "
                         "(`tuidebug flags PATTERN`, or `tuidebug flags demo NAME`)")
    from tuidebug.compiler.flags import flags_main

    return flags_main(ns.pattern, ns.json)


# -- recompile ------------------------------------------------------------------------------------

def cmd_recompile(ns: argparse.Namespace) -> int:
    from tuidebug.compiler import recompile
    from tuidebug.compiler.flags import FlagValueError, UnknownFlag
    from tuidebug.compiler.worker import RecompileWorker

    if not ns.set:
        raise _cli_error("nothing to change: give at least one --set NAME=VALUE")
    try:
        sets = recompile.parse_sets(ns.set)
        spec = recompile.recompile_spec(ns.trace, sets, ns.output, use_cache=not ns.no_cache)
    except (UnknownFlag, FlagValueError, recompile.RecompileError) as e:
        raise _cli_error(_message(e)) from None
    out = Path(spec["out"])
    print(f"[tuidebug] recompiling {ns.trace} with {recompile.format_sets(sets)} → {out}",
          file=sys.stderr, flush=True)

    def progress(job: Any, message: str) -> None:
        if not ns.quiet and (message.startswith("phase") or message.startswith("compiling")):
            print(f"[tuidebug] {message}", file=sys.stderr, flush=True)

    worker = RecompileWorker(warmup=False, timeout=ns.timeout, use_cache=not ns.no_cache,
                             on_progress=progress)
    try:
        job = worker.submit_spec(spec)
        job.wait()
    finally:
        worker.close()
    result = job.result or {}
    if job.state != "ok":
        print(f"tuidebug: recompile {job.state}: {job.error or ''}", file=sys.stderr)
        tail = result.get("output_tail")
        if tail and not ns.json:
            print("\n".join(str(tail).splitlines()[-15:]), file=sys.stderr)
    else:
        print(f"[tuidebug] recompiled in {job.elapsed_s:.1f}s", file=sys.stderr, flush=True)
    if (out / "manifest.json").exists():
        _show_diff(Path(ns.trace), out, as_json=ns.json, code=not ns.no_code,
                   extra={"job": result} if ns.json else None)
    elif ns.json:
        print(json.dumps({"job": result}, indent=1, default=str))
    return 0 if job.state == "ok" else 1


# -- diff -----------------------------------------------------------------------------------------

def _show_diff(a: Path, b: Path, *, as_json: bool, code: bool, unchanged: bool = False,
               context: int = 3, max_lines: int = 120, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    from tuidebug.trace.diff import diff_traces
    from tuidebug.trace.reader import TraceError

    try:
        d = diff_traces(a, b, code=code, context=context, max_diff_lines=max(max_lines, 400))
    except TraceError as e:
        raise _cli_error(str(e)) from None
    if as_json:
        print(json.dumps({**(extra or {}), **d}, indent=1, default=str))
    else:
        from rich.console import Console

        from tuidebug.viewers.diff_view import render_diff

        render_diff(d, Console(), code=code, unchanged=unchanged, max_code_lines=max_lines)
    return d


def cmd_diff(ns: argparse.Namespace) -> int:
    _show_diff(Path(ns.trace_a), Path(ns.trace_b), as_json=ns.json, code=not ns.no_code,
               unchanged=ns.unchanged, context=ns.context, max_lines=ns.max_lines)
    return 0


# -- registration ---------------------------------------------------------------------------------

def register(sub: Any) -> None:
    p = sub.add_parser(
        "flags", help="list and search every Inductor flag with its documentation; "
                      "`flags demo NAME` toggles one and shows what changes")
    p.add_argument("pattern", nargs="?", help="substring or glob (e.g. triton.*), or `demo`")
    p.add_argument("names", nargs="*", help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true")
    p.add_argument("-o", "--output", help="flags demo: directory for the two traces "
                                          "(default: a temporary one, removed unless --keep)")
    p.add_argument("--keep", action="store_true", help="flags demo: keep the traces")
    p.add_argument("--timeout", type=float, default=900.0, help="flags demo: seconds per compile")
    p.add_argument("--device", choices=("cpu", "cuda"),
                   help="flags demo: the example's device (default: cuda if available)")
    p.set_defaults(fn=cmd_flags)

    p = sub.add_parser("recompile", help="recompile a trace with changed Inductor flags and "
                                         "compare (the original trace is never modified)")
    p.add_argument("trace")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="an Inductor flag to change (repeatable)")
    p.add_argument("-o", "--output", help="new trace directory (default: <TRACE>-<flag>=<value>)")
    p.add_argument("--no-cache", action="store_true",
                   help="keep the graph-level caches off even when --set names fx_graph_cache "
                        "(as `tuidebug trace --set`); kernel binaries are reused either way")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds before the job is killed")
    p.add_argument("--json", action="store_true", help="print the job result and the comparison as JSON")
    p.add_argument("--no-code", action="store_true", help="leave out code diffs")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(fn=cmd_recompile)

    p = sub.add_parser("diff", help="compare two traces: config, passes, IR, fusion, kernels, times")
    p.add_argument("trace_a")
    p.add_argument("trace_b")
    p.add_argument("--json", action="store_true", help="machine-readable comparison")
    p.add_argument("--no-code", action="store_true", help="leave out code diffs")
    p.add_argument("--unchanged", action="store_true", help="list unchanged kernels too")
    p.add_argument("--context", type=int, default=3, help="lines of context in code diffs")
    p.add_argument("--max-lines", type=int, default=120, help="lines shown per code diff")
    p.set_defaults(fn=cmd_diff)
