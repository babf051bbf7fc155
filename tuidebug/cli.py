"""The one entry point: ``tuidebug <command> …``.

This module stays light: it never imports torch itself. Commands that need the compiler run it
in a child process (``trace``) or import it only when they run.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from tuidebug import __version__

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
DEMO_EXAMPLE = "transformer_block.py"


class CliError(Exception):
    """A user error: printed as one line, exit code 2."""


def _console() -> Any:
    from rich.console import Console

    return Console()


def _err(msg: str) -> None:
    print(f"tuidebug: error: {msg}", file=sys.stderr)


# -- trace ----------------------------------------------------------------------------------------

def _default_out(script: Path) -> Path:
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
    types (as ``tuidebug recompile`` does); a bad one is a one-line CliError."""
    from tuidebug.compiler.flags import FlagValueError, UnknownFlag
    from tuidebug.compiler.recompile import RecompileError, parse_sets

    try:
        return parse_sets(sets)
    except (UnknownFlag, FlagValueError, RecompileError) as e:
        raise CliError(str(e)) from None


def _run_child(cmd: list[str], env: dict[str, str]) -> tuple[int, list[str]]:
    """Run the capture child with its stderr passed through; returns its exit code and the
    last lines it wrote there that are not tuidebug's own (what the script said last)."""
    tail: collections.deque[str] = collections.deque(maxlen=5)
    with subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True,
                          errors="replace") as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            sys.stderr.write(line)
            sys.stderr.flush()
            if line.strip() and not line.startswith("[tuidebug]"):
                tail.append(line.rstrip())
    return proc.returncode, list(tail)


def run_trace(script: str, script_args: list[str], out: Path | None, *, check: bool = True,
              use_cache: bool = False, sets: list[str] | None = None,
              quiet: bool = False) -> tuple[int, Path, list[str]]:
    """Trace ``script`` in a child process. Returns (exit code, trace dir, the last lines of
    the child's stderr that are not tuidebug's own)."""
    path = Path(script)
    if not path.exists():
        raise CliError(f"no such script: {script}")
    if not path.is_file():
        raise CliError(f"not a file: {script}")
    overrides = _validated_sets(sets) if sets else {}
    out = out or _default_out(path)
    if out.exists() and any(out.iterdir()):
        raise CliError(f"output directory {out} is not empty; choose another with -o")
    _check_writable(out)
    cmd = [sys.executable, "-m", "tuidebug.compiler.run_script", "--out", str(out)]
    if not check:
        cmd.append("--no-check")
    if use_cache:
        cmd.append("--use-cache")
    if overrides:
        cmd += ["--overrides", json.dumps(overrides)]
    cmd += [str(path), *script_args]
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if not quiet:
        print(f"[tuidebug] tracing {script} → {out}", file=sys.stderr, flush=True)
    code, tail = _run_child(cmd, env)
    return code, out, tail


def _manifest(out: Path) -> dict[str, Any]:
    """The trace's manifest as written, or {} (none yet, or unreadable)."""
    try:
        data = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _trace_outcome(code: int, out: Path, tail: list[str] | None = None) -> int:
    from tuidebug.compiler import run_script as rs

    if code == rs.EXIT_EXITED_EARLY:
        n = _manifest(out).get("script_exit_code", "non-zero")
        said = f"; it said: {tail[-1][:300]}" if tail else ""
        _err(f"the script exited with code {n} before compiling{said}")
        return 3
    if code == rs.EXIT_NO_COMPILE:
        _err("the script never compiled anything: it did not call a torch.compile'd function "
             "(torch.compile is lazy: the compiled function must be called)")
        return 3
    if code == rs.EXIT_RAISED_EARLY:
        _err("the script raised an exception before compiling anything (traceback above)")
        return 3
    if code < 0:
        import signal

        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        _err(f"the capturing process died ({name}); the trace in {out} shows how far it got")
        return 1
    if code == rs.EXIT_COMPILE_FAILED:
        _err(f"compilation failed; the trace in {out} records the failure "
             f"(try: tuidebug open {out}, or tuidebug minify {out})")
        return 1
    if code == rs.EXIT_WRITE_FAILED:
        _err(f"the trace in {out} could not be written completely (disk full or read-only?); "
             "what was written before is intact")
        return 1
    if code == rs.EXIT_RAISED_LATE:
        _err("the script raised after compiling (traceback above); the trace is complete")
        return 1
    if code != 0:
        _err(f"the script exited with code {code}; the trace is complete")
        return 1
    return 0


def _misplaced_options(script_args: list[str], own: list[str]) -> list[str]:
    """The script's arguments that are ``tuidebug trace``'s own options (``own``), which argparse
    hands to the script when they come after it."""
    return [a for a in script_args if a.split("=", 1)[0] in own]


def cmd_trace(ns: argparse.Namespace) -> int:
    code, out, tail = run_trace(ns.script, ns.args, Path(ns.output) if ns.output else None,
                                check=not ns.no_check, use_cache=ns.use_cache, sets=ns.set)
    if (out / "manifest.json").exists():
        _print_info(out, as_json=False)
    rc = _trace_outcome(code, out, tail)
    misplaced = _misplaced_options(ns.args, ns.trace_options)
    if rc != 0 and misplaced:
        print(f"tuidebug: hint: {' '.join(misplaced)} went to the script; tuidebug's options go "
              f"before the script: tuidebug trace -o DIR {ns.script} …", file=sys.stderr)
    if rc == 0 and ns.open:
        return _open(out)
    return rc


# -- inputs that are not tuidebug traces -------------------------------------------------------------

def resolve_trace(path: Path, rank: int | None = None) -> Path:
    """A tuidebug trace for ``path``: itself, or an import of a TORCH_TRACE log or a
    torch_compile_debug folder (made once, next to the source; the source is never modified)."""
    from tuidebug.trace.importers import ImportFailed, detect, ensure_trace

    if detect(path) in (None, "tuidebug"):
        return path  # Trace() says what is wrong with it
    try:
        out = ensure_trace(path, rank=rank)
    except ImportFailed as e:
        raise CliError(str(e)) from e
    print(f"[tuidebug] imported {path} → {out}", file=sys.stderr)
    return out


def cmd_import(ns: argparse.Namespace) -> int:
    from tuidebug.trace.importers import ImportFailed, import_path

    try:
        out = import_path(Path(ns.source), Path(ns.output), rank=ns.rank)
    except ImportFailed as e:
        raise CliError(str(e)) from e
    print(f"[tuidebug] imported {ns.source} → {out}", file=sys.stderr)
    return _print_info(Path(out), as_json=False)


# -- info -----------------------------------------------------------------------------------------

def _print_info(path: Path, *, as_json: bool, rank: int | None = None) -> int:
    from tuidebug.trace.reader import Trace, TraceError
    from tuidebug.trace.summary import trace_summary

    path = resolve_trace(path, rank)
    try:
        summary = trace_summary(Trace(path))
    except TraceError as e:
        raise CliError(str(e)) from e
    if as_json:
        print(json.dumps(summary, indent=1, default=str))
    else:
        from tuidebug.viewers.info import render_summary

        render_summary(summary, _console())
    return 0 if summary["status"] == "ok" else 1


def cmd_info(ns: argparse.Namespace) -> int:
    _print_info(Path(ns.trace), as_json=ns.json, rank=ns.rank)
    return 0


# -- open / demo ----------------------------------------------------------------------------------

def _open(path: Path, rank: int | None = None) -> int:
    from tuidebug.trace.reader import Trace, TraceError

    path = resolve_trace(path, rank)
    try:
        trace = Trace(path)
    except TraceError as e:
        raise CliError(str(e)) from e
    try:
        from tuidebug.tui.app import run_app
    except ImportError as e:
        raise CliError(f"the terminal UI is not available: {e}") from e
    return run_app(trace)


def cmd_open(ns: argparse.Namespace) -> int:
    return _open(Path(ns.trace), ns.rank)


def cmd_demo(ns: argparse.Namespace) -> int:
    example = EXAMPLES_DIR / DEMO_EXAMPLE
    if not example.exists():
        raise CliError(f"bundled example not found: {example}")
    out = Path(ns.output) if ns.output else _default_out(example)
    code, out, tail = run_trace(str(example), [], out)
    rc = _trace_outcome(code, out, tail)
    if rc != 0:
        return rc
    if ns.no_open or not _interactive():
        _print_info(out, as_json=False)
        if not ns.no_open:
            print(f"[tuidebug] no terminal to open the UI in; open it with: tuidebug open {out}",
                  file=sys.stderr)
        return 0
    return _open(out)


def _interactive() -> bool:
    """Whether the terminal UI can run here: stdin and stdout are a terminal."""
    return all(s is not None and s.isatty() for s in (sys.stdin, sys.stdout))


# -- registry ---------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="tuidebug",
        description="Debug torch.compile: trace Inductor, explore passes, IR, kernels and "
                    "provenance, export SVGs, recompile with other flags, minify failures.")
    ap.add_argument("--version", action="version", version=f"tuidebug {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("trace", help="run a script with capture on and write a trace")
    options = [
        p.add_argument("-o", "--output",
                       help="trace directory (default: tuidebug-traces/<script>-<time>)"),
        p.add_argument("--no-check", action="store_true",
                       help="do not compare compiled outputs against eager"),
        p.add_argument("--use-cache", action="store_true",
                       help="let Inductor use its caches (a cache hit records less)"),
        p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                       help="set an Inductor flag for this trace (repeatable; checked against "
                            "the flag registry, as `tuidebug flags` lists them)"),
        p.add_argument("--open", action="store_true", help="open the trace in the TUI afterwards"),
    ]
    p.add_argument("script", help="the script; tuidebug's options go before it")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    p.set_defaults(fn=cmd_trace, trace_options=[s for a in options for s in a.option_strings])

    rank_help = "for a multi-rank TORCH_TRACE log: the rank to open (default: the lowest)"
    p = sub.add_parser("info", help="summarise a trace (or a TORCH_TRACE log / debug folder)")
    p.add_argument("trace")
    p.add_argument("--json", action="store_true", help="machine-readable summary")
    p.add_argument("--rank", type=int, help=rank_help)
    p.set_defaults(fn=cmd_info)

    p = sub.add_parser("open", help="open a trace (or a TORCH_TRACE log / debug folder) in the TUI")
    p.add_argument("trace")
    p.add_argument("--rank", type=int, help=rank_help)
    p.set_defaults(fn=cmd_open)

    p = sub.add_parser("import", help="import a TORCH_TRACE log or torch_compile_debug folder")
    p.add_argument("source")
    p.add_argument("-o", "--output", required=True, help="the new trace directory")
    p.add_argument("--rank", type=int, help=rank_help)
    p.set_defaults(fn=cmd_import)

    p = sub.add_parser("demo", help="trace the bundled transformer example and open it")
    p.add_argument("-o", "--output")
    p.add_argument("--no-open", action="store_true", help="print the summary instead")
    p.set_defaults(fn=cmd_demo)

    for register in _extra_commands():
        register(sub)
    return ap


def _extra_commands() -> list[Callable[[Any], None]]:
    """Commands that live with their packages (each registers its own sub-parser)."""
    out = []
    for mod, fn in (("tuidebug.viewers.cli", "register"), ("tuidebug.compiler.cli", "register"),
                    ("tuidebug.minify.cli", "register")):
        try:
            module = __import__(mod, fromlist=[fn])
        except ModuleNotFoundError as e:
            if e.name == mod:
                continue
            raise
        out.append(getattr(module, fn))
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        argv = ["demo"]
    ap = build_parser()
    ns = ap.parse_args(argv)
    if not getattr(ns, "fn", None):
        ap.print_help()
        return 2
    try:
        return int(ns.fn(ns) or 0)
    except CliError as e:
        _err(str(e))
        return 2
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except BrokenPipeError:  # `tuidebug info TRACE | head`: quietly, as rich does (exit 1)
        _silence_stdout()
        return 1


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit raises nothing more."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    # Run the imported module's main, so that CliError raised by sub-commands (which import
    # tuidebug.cli) is the class main() catches, also under ``python -m tuidebug.cli``.
    from tuidebug.cli import main as _main

    sys.exit(_main())
