"""Commands that run the compiler: ``trace``, ``recompile``, ``flags`` (and ``flags demo``).

Nothing here imports torch: a trace runs in a child process (``run_trace``), a recompile in the
worker process, and the flag registry is read from Inductor's config source.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from tuidebug import proc
from tuidebug.cli import distributed
from tuidebug.cli.capture_child import run_child
from tuidebug.cli.consent_args import allow_flag_argument, allowed_flags
from tuidebug.cli.minifying import positive_float, positive_int
from tuidebug.cli.output import console, err, note
from tuidebug.cli.viewing import RANK_HELP, TRACE_HELP, open_trace, print_info, show_diff
from tuidebug.errors import CliError
from tuidebug.trace.format import schema
from tuidebug.trace.format.manifest import Manifest, find_manifest
from tuidebug.trace.jobs.job import rank_from_env
from tuidebug.trace.open import archive_stem, open_input


# -- trace ----------------------------------------------------------------------------------------

def profile_runs(text: str) -> int:
    """``--profile N``: a number of runs (the script comes after it, not as its value)."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(
            f"takes a number of runs, not {text!r}: write --profile 10 before the script")
    return positive_int(text)


def default_out(script: Path) -> Path:
    return Path("tuidebug-traces") / f"{script.stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def _check_writable(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".tuidebug-write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as e:
        raise CliError(f"cannot write the trace to {out}: {e.strerror or e}") from e


def _validated_sets(sets: list[str]) -> dict[str, Any]:
    """``--set NAME=VALUE`` items checked against the flag registry and converted to the flags'
    types (as ``tuidebug recompile`` does); a bad one is a one-line error (UnknownFlag,
    FlagValueError, RecompileError)."""
    from tuidebug.compiler.recompile import parse_sets

    return parse_sets(sets)


def run_trace(script: str, script_args: list[str], out: Path | None, *, check: bool = True,
              use_cache: bool = False, sets: list[str] | None = None,
              quiet: bool = False, accuracy_tol: float | None = None,
              profile: int = 0, progress: Path | None = None,
              own_exit: bool = False, numerics: bool = False,
              on_start: Callable[[int], None] | None = None) -> tuple[int, Path, list[str]]:
    """Trace ``script`` in a child process. Returns (exit code, trace dir, the last lines of
    the child's stderr that are not tuidebug's own: ``run_child``'s). ``progress``: a rank's
    progress log (its collectives, as they happen); ``own_exit``: the exit code is the
    script's own (``run_script --own-exit``), not the capture's verdict; ``numerics``: every
    compile's kernels judged one by one, not only a mismatch's; ``on_start``: called with the
    child's pid once it runs."""
    if profile and not check:
        raise CliError("--profile runs after the eager check: drop --no-check")
    if numerics and not check:
        raise CliError("--numerics judges kernels within the eager check: drop --no-check")
    path = Path(script)
    if not path.exists():
        raise CliError(f"no such script: {script}")
    if not path.is_file():
        raise CliError(f"not a file: {script}")
    overrides = _validated_sets(sets) if sets else {}
    out = out or default_out(path)
    if out.exists() and not out.is_dir():
        raise CliError(f"{out} exists and is not a directory; choose another with -o")
    if out.exists() and any(out.iterdir()):
        raise CliError(f"output directory {out} is not empty; choose another with -o")
    _check_writable(out)
    cmd = [sys.executable, "-m", "tuidebug.compiler.run_script", "--out", str(out)]
    if not check:
        cmd.append("--no-check")
    if accuracy_tol is not None:
        cmd += ["--accuracy-tol", repr(float(accuracy_tol))]
    if use_cache:
        cmd.append("--use-cache")
    if profile:
        cmd += ["--profile", str(int(profile))]
    if overrides:
        cmd += ["--overrides", json.dumps(overrides)]
    if progress is not None:
        cmd += ["--progress", str(progress)]
    if own_exit:
        cmd.append("--own-exit")
    if numerics:
        cmd.append("--numerics")
    cmd += [str(path), *script_args]
    if not quiet:
        print(f"[tuidebug] tracing {script} → {out}", file=sys.stderr, flush=True)
    code, tail = run_child(cmd, proc.child_env(), on_start)
    return code, out, tail


def _why_nothing_compiled(out: Path) -> str:
    """What the capture said happened instead of compiling (its warning, from what Dynamo did:
    frames skipped and why, frames compiled for another backend), or that it said nothing."""
    from tuidebug.trace.queries.frames import nothing_compiled

    warnings = (find_manifest(out) or Manifest()).warnings
    said = [w for w in warnings if w.startswith("nothing was compiled")]
    return said[0] if said else nothing_compiled([], {})


def _raised_in_compile(out: Path) -> str | None:
    """What to say of the script's exception where torch.compile raised it: the compile that
    failed, judged as ``info`` judges it (``summary.script_outcome`` on the trace's compiles:
    their failures' reasons are in the compile files, not in the manifest's summaries, and only
    the files of compiles whose summary has a ``fail_type`` are read); None
    where no compile's error is the script's, or the trace cannot be read."""
    from tuidebug.errors import TraceError
    from tuidebug.trace.format.reader import Trace
    from tuidebug.trace.queries.summary import script_outcome

    try:
        trace = Trace(out)
        raised = script_outcome(trace.manifest, trace.compiles_failed()).get(
            "script_error") or {}
    except TraceError:
        return None
    if not raised.get("in_compile"):
        return None
    return (f"torch.compile raised: Dynamo's compile {raised['in_compile']} "
            f"({raised['in_compile_at']}) failed (traceback above); the trace is complete")


def trace_outcome(code: int, out: Path, tail: list[str] | None = None) -> int:
    """Say what the capture found, beside how the script ended; returns the script's own exit
    code (the capture child ran with ``--own-exit``: what ``python script.py`` exits with), or
    ends this process by the signal that ended the script (as ``python script.py`` would have
    ended: a shell sees 128 + the signal, 130 for Ctrl-C). Tracing never changes the outcome
    of the user's job: what tuidebug has to say (nothing compiled, a failed compile, an
    accuracy mismatch, an incomplete trace) is said here and in the trace, never by the code."""
    m = find_manifest(out)
    said = f"; it said: {tail[-1][:300]}" if tail else ""
    if m is None:
        err(f"the capture wrote no trace in {out} (it failed before the script ran; see "
            "above); the script's exit code is the capture's")
    elif code < 0 and m.script_error is None:
        err(f"the script's process died ({proc.signal_name(-code)}); the trace in {out} shows "
            "how far it got")
    elif not m.graphs:
        if m.script_error is not None:
            note(_raised_in_compile(out) or "the script raised an exception before compiling "
                 "anything (traceback above)")
        elif code != 0:
            note(f"the script exited with code {code} before compiling{said}")
        else:
            note("the script reached no Inductor graph: " + _why_nothing_compiled(out))
    elif m.error is not None:
        what = {"accuracy": "the compiled code ran, but its outputs differ from eager's",
                "runtime": "the compiled code failed while it ran"}.get(
                    str(m.error.phase), "compilation failed")
        err(f"{what}; the trace in {out} records the failure "
            f"(try: tuidebug open {out}, or tuidebug minify {out})")
    elif m.script_error is not None:
        note(_raised_in_compile(out) or "the script raised after compiling (traceback above); "
             "the trace is complete")
    elif code != 0:
        note(f"the script exited with code {code}; the trace is complete")
    if code < 0:
        proc.die_of(-code)
    return code


def _misplaced_options(script_args: list[str], own: list[str]) -> list[str]:
    """The script's arguments that are ``tuidebug trace``'s own options (``own``), which argparse
    hands to the script when they come after it."""
    return [a for a in script_args if a.split("=", 1)[0] in own]


def trace_arguments(p: argparse.ArgumentParser) -> None:
    options = [
        p.add_argument("-o", "--output",
                       help="trace directory (default: tuidebug-traces/<script>-<time>)"),
        p.add_argument("--no-check", action="store_true",
                       help="do not compare compiled outputs against eager"),
        p.add_argument("--accuracy-tol", type=positive_float, default=None, metavar="TOL",
                       help="the eager check's tolerance for every output (default: by dtype, "
                            "1e-4 for float32, 1e-2 for bfloat16/float16; see "
                            "docs/trace-format.md)"),
        p.add_argument("--use-cache", action="store_true",
                       help="let Inductor use its caches (a cache hit records less)"),
        p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                       help="set an Inductor flag for this trace (repeatable; checked against "
                            "the flag registry, as `tuidebug flags` lists them)"),
        p.add_argument("--profile", type=profile_runs, nargs="?", const=10, default=0,
                       metavar="N", help="after the eager check, run each compiled graph and "
                       "its eager graph N more times (default 10) under torch.profiler: time "
                       "per kernel, FX node, source line and module (profile.json); a training "
                       "step's backward too (with autograd.grad: .grad is never touched)"),
        p.add_argument("--numerics", action="store_true",
                       help="judge every compile's kernels one by one against eager and "
                            "float64 (the first diverging kernel), not only on a mismatch"),
        p.add_argument("--open", action="store_true", help="open the trace in the TUI afterwards"),
    ]
    own = [s for a in options for s in a.option_strings] + distributed.torchrun_arguments(p)
    p.add_argument("script", help="the script; tuidebug's options go before it")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    p.set_defaults(trace_options=own)


def cmd_trace(ns: argparse.Namespace) -> int:
    if ns.nproc_per_node is not None:
        return distributed.launch(ns)
    if ns.timeout is not None:
        raise CliError("--timeout ends a distributed job that hangs: it goes with "
                       "--nproc-per-node N")
    where = rank_from_env(os.environ)
    if where is not None:
        return distributed.trace_rank(ns, where)
    code, out, tail = run_trace(ns.script, ns.args, Path(ns.output) if ns.output else None,
                                check=not ns.no_check, use_cache=ns.use_cache, sets=ns.set,
                                accuracy_tol=ns.accuracy_tol, profile=ns.profile,
                                numerics=ns.numerics, own_exit=True)
    if (out / schema.MANIFEST).exists():
        print_info(out, as_json=False)
    rc = trace_outcome(code, out, tail)
    misplaced = _misplaced_options(ns.args, ns.trace_options)
    if rc != 0 and misplaced:
        print(f"tuidebug: hint: {' '.join(misplaced)} went to the script; tuidebug's options go "
              f"before the script: tuidebug trace -o DIR {ns.script} …", file=sys.stderr)
    if rc == 0 and ns.open:
        return open_trace(out)
    return rc


# -- flags ----------------------------------------------------------------------------------------

def _message(e: BaseException) -> str:
    """What an error says: ``str(KeyError(m))`` is ``repr(m)``, every other one's is ``m``."""
    return str(e.args[0]) if isinstance(e, KeyError) and len(e.args) == 1 else str(e)


def flags_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("pattern", nargs="?", help="substring or glob (e.g. triton.*), or `demo`")
    p.add_argument("names", nargs="*", help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true")
    p.add_argument("-o", "--output", help="flags demo: directory for the two traces "
                                          "(default: a temporary one, removed unless --keep)")
    p.add_argument("--keep", action="store_true", help="flags demo: keep the traces")
    p.add_argument("--timeout", type=float, default=900.0, help="flags demo: seconds per compile")
    p.add_argument("--device", choices=("cpu", "cuda"),
                   help="flags demo: the example's device (default: cuda if available)")


def cmd_flags(ns: argparse.Namespace) -> int:
    if ns.pattern == "demo":
        from tuidebug.compiler.demo_run import demo_main

        if len(ns.names) > 1:
            raise CliError("flags demo takes one flag name (or none, to list the demos)")
        try:
            return demo_main(ns.names[0] if ns.names else None, out=ns.output, as_json=ns.json,
                             keep=ns.keep, timeout=ns.timeout, device=ns.device,
                             console=console())
        except (LookupError, ValueError) as e:
            raise CliError(_message(e)) from None
    if ns.names:
        raise CliError(f"unexpected arguments: {' '.join(ns.names)} "
                       "(`tuidebug flags PATTERN`, or `tuidebug flags demo NAME`)")
    return print_flags(ns.pattern, ns.json)


def print_flags(pattern: str | None, as_json: bool, out: Any = None) -> int:
    """Print the flags matching ``pattern`` (all when None) as a table or JSON on ``out`` (a rich
    console; default stdout); 1 when none match."""
    from tuidebug.compiler.flags import flag_json, load_registry, values_in_force
    from tuidebug.viewers import flags_table

    out = out or console()
    registry = load_registry()
    in_force = values_in_force()
    flags = registry.search(pattern) if pattern else list(registry)
    if not flags:
        flags_table.print_no_match(pattern, registry.similar(pattern or ""), out)
        return 1
    if as_json:
        out.out(json.dumps([flag_json(f, in_force) for f in flags], indent=2, default=repr),
                highlight=False)
        return 0
    flags_table.print_flags(flags, in_force, out)
    return 0


# -- recompile ------------------------------------------------------------------------------------

def recompile_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help=TRACE_HELP)
    p.add_argument("--rank", type=int, help=RANK_HELP)
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
    p.add_argument("-y", "--yes", action="store_true",
                   help="run without asking (what will run is still printed); without it, "
                        "tuidebug asks on the terminal and refuses when there is none")
    allow_flag_argument(p)


def cmd_recompile(ns: argparse.Namespace) -> int:
    from tuidebug.compiler import recompile
    from tuidebug.compiler.worker import RecompileWorker

    if not ns.set:
        raise CliError("nothing to change: give at least one --set NAME=VALUE")
    # UnknownFlag, FlagValueError, RecompileError: printed by main
    sets = recompile.parse_sets(ns.set)
    opened = open_input(ns.trace, ns.rank, on_note=note)  # TraceError, UnpackError, ImportFailed
    trace = opened.one_trace()
    output = ns.output or (recompile.default_out(archive_stem(opened.named), sets)
                           if opened.kind == "archive" else None)  # not in the archive cache
    allowed = allowed_flags(ns)
    spec = recompile.recompile_spec(trace, sets, output, use_cache=not ns.no_cache,
                                    allowed=allowed)
    from tuidebug.compiler.consent import ask, spec_plan

    # NotConfirmed: printed by main; flags typed by name at the prompt are applied too
    typed = ask(spec_plan(spec, recompile.read_manifest(trace)), yes=ns.yes)
    spec = spec.confirmed(typed)  # what was shown, with the flags typed by name at the prompt
    out = Path(spec.out)
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
    result = job.result.to_json() if job.result is not None else {}
    if job.state != "ok":
        print(f"tuidebug: recompile {job.state}: {job.error or ''}", file=sys.stderr)
        tail = job.result.output_tail if job.result is not None else None
        if tail and not ns.json:
            print("\n".join(str(tail).splitlines()[-15:]), file=sys.stderr)
    else:
        print(f"[tuidebug] recompiled in {job.elapsed_s:.1f}s", file=sys.stderr, flush=True)
    if (out / schema.MANIFEST).exists():
        show_diff(trace, out, as_json=ns.json, code=not ns.no_code,
                  extra={"job": result} if ns.json else None)
    elif ns.json:
        print(json.dumps({"job": result}, indent=1, default=str))
    return 0 if job.state == "ok" else 1
