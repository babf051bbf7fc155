"""Commands that share a trace: ``serve`` (the TUI as a web page) and ``pack`` (a trace as one
``.tar.gz``). What they are given becomes a trace through the one door, ``tuidebug.trace.open``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tuidebug.cli.output import note
from tuidebug.cli.viewing import RANK_HELP, TRACE_HELP
from tuidebug.errors import CliError
from tuidebug.trace.open import open_input

SERVE_DESCRIPTION = (
    "Serve the TUI on TRACE (a trace, a .tar.gz made by `tuidebug pack`, a TORCH_TRACE log, a "
    "debug folder, or a distributed job's folder: on its ranks screen) as a web page: every browser tab gets its own app. Listens on 127.0.0.1 "
    "unless --host names another address (anyone who can reach it can read the trace: there is "
    "no login). Nothing that runs code (recompile, minify, bisect) is available unless started "
    "with --allow-run.")
PACK_DESCRIPTION = (
    "Write TRACE as one .tar.gz to attach to a bug report, with a manifest of every file's "
    "sha256 (tuidebug-pack.json). Every command that reads a trace reads the archive "
    "directly. --redact leaves out the generated code (wrapper, kernels, repro scripts) and your source lines.")


def serve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help=TRACE_HELP)
    p.add_argument("--host", default="127.0.0.1",
                   help="the address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=0, help="the port (default: a free one)")
    p.add_argument("--allow-run", action="store_true",
                   help="allow what runs code on this machine from the page: recompile, "
                        "minify, bisect")
    p.add_argument("--max-sessions", type=int, default=4, metavar="N",
                   help="browser sessions (app processes) open at once (default 4)")
    p.add_argument("--rank", type=int, help=RANK_HELP)


def cmd_serve(ns: argparse.Namespace) -> int:
    from tuidebug.cli.viewing import say_job_rank
    from tuidebug.trace.format.reader import Trace
    from tuidebug.tui.serve import is_loopback, serve

    opened = open_input(ns.trace, ns.rank, on_note=note)  # a job: its ranks screen, as open's
    if opened.job is not None:
        say_job_rank(opened)
    path, job = opened.one_trace(), opened.job.resolve() if opened.job else None
    Trace(path)  # a path that is no trace stops here, with the reader's message
    if not is_loopback(ns.host):
        print(f"[tuidebug] warning: listening on {ns.host}: anyone who can reach it can read "
              "this trace (there is no login)", file=sys.stderr)
    if ns.allow_run:
        print("[tuidebug] --allow-run: the page can recompile, minify and bisect on this "
              "machine", file=sys.stderr)

    def ready(url: str) -> None:
        print(f"[tuidebug] serving {ns.trace} at {url}/  (Ctrl+C stops)", flush=True)

    serve(path, host=ns.host, port=ns.port, allow_run=ns.allow_run,
          max_sessions=max(1, ns.max_sessions), on_ready=ready, job=job)
    return 0


def pack_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help=TRACE_HELP)
    p.add_argument("-o", "--output", help="the archive (default: TRACE.tar.gz)")
    p.add_argument("--redact", action="store_true",
                   help="leave out generated code and source lines")
    p.add_argument("--force", action="store_true", help="write over an existing archive")
    p.add_argument("--rank", type=int, help="for a job directory or a multi-rank TORCH_TRACE "
                   "log: the rank to pack (an archive holds one trace)")


def cmd_pack(ns: argparse.Namespace) -> int:
    from tuidebug.trace.archive.pack import pack

    opened = open_input(ns.trace, ns.rank, on_note=note)
    if opened.job is not None and ns.rank is None:
        raise CliError(f"{ns.trace} is a distributed job; an archive holds one trace: choose "
                       "a rank with --rank N")
    src, named = opened.one_trace(), Path(ns.trace)
    out = Path(ns.output) if ns.output else named.resolve().with_name(
        named.resolve().name + ".tar.gz")
    if out.exists() and not ns.force:
        raise CliError(f"{out} exists; choose another with -o, or --force")
    manifest = pack(src, out, redact=ns.redact)
    size = out.stat().st_size
    redacted = (f", redacted ({manifest['dropped_files']} code files left out)" if ns.redact
                else "")
    print(f"[tuidebug] packed {len(manifest['files'])} files of {named} → {out} "
          f"({size / 1e6:.2f} MB{redacted})", file=sys.stderr)
    return 0
