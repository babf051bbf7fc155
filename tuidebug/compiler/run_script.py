"""Child process of ``tuidebug trace``: run a user's script with capture on.

Runs in its own process so that a crash of the compiler (a segfault in a C++ compiler, OOM)
cannot take the CLI down: the trace on disk says how far it got, and the parent reports it.
Exit codes: 0 ok; 10 compile or compiled-code failure; 11 the script raised before anything
was compiled; 12 nothing was compiled; 13 the script raised after compiling (trace is fine);
14 the trace could not be written (disk full, read-only); 15 the script exited with a non-zero
code before compiling anything (the code is the manifest's ``script_exit_code``); the script's
own code when it calls sys.exit with one after compiling. With ``--own-exit`` (a rank of a
distributed job, and ``tuidebug trace`` itself) the exit code is the script's own, whatever the
capture says (0, its ``sys.exit`` code, 1 for an uncaught exception, death by SIGINT for an
uncaught KeyboardInterrupt, as Python gives them); the capture's verdict is then only in the
trace (its status, ``script_error``, ``script_exit_code``, warnings).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import runpy
import signal
import sys
import traceback
from typing import Any

from tuidebug.errors import UnknownFlag
from tuidebug.trace.format.manifest import ScriptError

EXIT_OK, EXIT_COMPILE_FAILED, EXIT_RAISED_EARLY, EXIT_NO_COMPILE, EXIT_RAISED_LATE = 0, 10, 11, 12, 13
EXIT_WRITE_FAILED, EXIT_EXITED_EARLY = 14, 15


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tuidebug-capture")
    ap.add_argument("--out", required=True)
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--use-cache", action="store_true")
    ap.add_argument("--accuracy-tol", type=float, default=None)
    ap.add_argument("--profile", type=int, default=0, metavar="N")
    ap.add_argument("--numerics", action="store_true")
    ap.add_argument("--overrides", default="{}", metavar="JSON",
                    help="Inductor config values to apply, {name: value}, validated by the "
                         "parent (tuidebug.compiler.recompile.parse_sets)")
    ap.add_argument("--apply", default=None, metavar="JSON",
                    help="a suggestion to apply without editing the script (tuidebug advise "
                         "--try): {config, compile_kwargs, dynamic_sources}")
    ap.add_argument("--progress", default=None, metavar="FILE",
                    help="a rank of a distributed job: append its collectives to this progress "
                         "log (tuidebug.trace.jobs.progress)")
    ap.add_argument("--own-exit", action="store_true",
                    help="exit with the script's own code (a rank of a distributed job: "
                         "tracing never changes the job's outcome)")
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    ns = ap.parse_args(argv)

    from tuidebug.compiler.capture import CaptureSession

    def progress(msg: str) -> None:
        print(f"[tuidebug] {msg}", file=sys.stderr, flush=True)

    session = CaptureSession(ns.out, check_accuracy=not ns.no_check, use_cache=ns.use_cache,
                             accuracy_tol=ns.accuracy_tol, profile_runs=ns.profile,
                             numerics=ns.numerics,
                             command=["tuidebug", "trace", ns.script, *ns.args],
                             on_progress=progress)
    session.start()
    ranks = None
    if ns.progress:
        from pathlib import Path

        from tuidebug.compiler.capture.collectives import Collectives
        from tuidebug.compiler.capture.rank_progress import RankProgress

        assert session.writer is not None
        try:
            ranks = RankProgress(Path(ns.progress), session.writer.warn,
                                 session.concern(Collectives).where).install()
            session.collectives = ranks.issued
            _dump_stacks_on_request(Path(ns.progress), session.writer.warn)
        except Exception as e:  # noqa: BLE001 - the rank runs on, its collectives not logged
            from tuidebug.trace.jobs.unlogged import NOT_LOGGED_WARNING

            if ranks is None:  # (installed, only the stacks' handler failed: they are logged)
                session.writer.warn(f"{NOT_LOGGED_WARNING}{ns.progress}: "
                                    f"{type(e).__name__}: {e}")
                # said at the job's level too (trace/jobs/unlogged.py): its waits not known
                session.writer.update(collectives_not_logged=f"{type(e).__name__}: {e}")
            else:
                session.writer.warn(f"this rank's Python stacks will not be dumped on "
                                    f"--timeout: {type(e).__name__}: {e}")
            # nor counted: it times no call, and tells the other ranks (counted_ranks)
            if session.collectives is None:
                session.uncounted = f"installing the counter failed: {type(e).__name__}: {e}"
    try:
        return run_in_session(session, os.path.abspath(ns.script), ns.args,
                              json.loads(ns.overrides), own_exit=ns.own_exit,
                              apply=json.loads(ns.apply) if ns.apply else None)
    finally:
        if ranks is not None:
            ranks.uninstall()


def _dump_stacks_on_request(progress: Any, warn: Any) -> None:
    """A rank: on SIGUSR1 (``tuidebug trace --timeout`` asks before it ends the job), write
    every thread's Python stack to ``job/rank_<r>.stacks.txt`` — from the signal handler
    itself (faulthandler), so a rank blocked in a collective's C++ wait answers too."""
    import faulthandler
    import signal

    from tuidebug.trace.jobs.progress import stacks_path

    path = stacks_path(progress)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                     | getattr(os, "O_NOFOLLOW", 0), 0o644)
        try:
            faulthandler.register(signal.SIGUSR1, file=fd, all_threads=True, chain=False)
        except BaseException:
            os.close(fd)
            path.unlink()  # the launcher signals only a rank whose file exists
            raise
    except (OSError, AttributeError, ValueError, RuntimeError) as e:
        warn(f"this rank's stacks cannot be dumped at --timeout: {type(e).__name__}: {e}")


def run_in_session(session: Any, script: str, args: list[str],
                   overrides: dict[str, Any], own_exit: bool = False,
                   apply: dict[str, Any] | None = None) -> int:
    """Run ``script`` (``args`` as its argv) as ``__main__`` under the started capture
    ``session``, with the Inductor ``overrides`` (and a suggestion, ``apply``:
    ``compat.applied``'s arguments) in force; record how the script ended (its
    exception, its exit code) and stop the session. Returns this module's exit code, or with
    ``own_exit`` the script's own (what ``python script.py`` would have exited with).
    Shared by ``tuidebug trace`` (this process) and recompile jobs (compiler/recompile.py)."""
    from tuidebug.compiler import compat

    writer = session.writer
    assert writer is not None
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(script))
    script_exc: BaseException | None = None
    exit_code = 0
    try:  # what comes before the script too: an error there (a broken Inductor install
        # raising in missing_flags) ends the trace as the script's own would, not 'running'
        # a flag this torch lacks fails the run before the script runs (set_flags would leave
        # out every flag of its module, while the manifest said they were set)
        missing = compat.missing_flags(overrides) if overrides else []
        if missing:
            raise UnknownFlag(f"--set {', '.join(missing)}: torch {compat.TORCH_VERSION} has no "
                              "such config flag; nothing was set and the script was not run")
        if overrides:  # applied after the capture's own changes: a --set wins
            writer.update(config_overrides=overrides)
            session.set_config(overrides)
        tried = None
        if apply:
            writer.update(applied=apply)
            tried = compat.applied(dict(apply.get("config") or {}),
                                   dict(apply.get("compile_kwargs") or {}),
                                   [str(s) for s in apply.get("dynamic_sources") or []],
                                   apply.get("static_cache_len"))
        with tried if tried is not None else contextlib.nullcontext():
            runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        # as the C exit() Python ends with takes it, once, before it is recorded:
        # sys.exit(256) ends 0 (recorded as 256, the rank read as script_failed)
        exit_code = e.code % 256 if isinstance(e.code, int) else (0 if e.code is None else 1)
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)  # sys.exit("message"), as Python itself prints it
    except BaseException as e:  # noqa: BLE001 - reported below, with its traceback
        script_exc = e
    finally:
        compiled = session.graph_count
        if script_exc is not None and not session.errors:
            writer.update(script_error=ScriptError(
                type(script_exc).__name__, str(script_exc)[:5000],
                "".join(traceback.format_exception(script_exc))[-20000:],
                after_compiling=compiled > 0).to_json())
        if exit_code:
            writer.update(script_exit_code=exit_code)
        session.stop(script_exc)
    if writer.write_error:
        print(f"tuidebug: error: the trace in {session.out_dir} could not be written "
              f"completely ({writer.write_error}; disk full or read-only?); what was written "
              "before is intact", file=sys.stderr)
    if own_exit:
        if script_exc is not None:
            traceback.print_exception(script_exc)
            # Python ends by SIGINT itself on an uncaught KeyboardInterrupt (a shell sees 130)
            return -signal.SIGINT if isinstance(script_exc, KeyboardInterrupt) else 1
        # as the C exit() Python ends with takes it: sys.exit(-1) is 255, sys.exit(256) is 0
        return exit_code % 256 if isinstance(exit_code, int) else 1
    if writer.write_error:
        return EXIT_WRITE_FAILED
    if session.errors:
        return EXIT_COMPILE_FAILED
    if script_exc is not None:
        traceback.print_exception(script_exc)
        return EXIT_RAISED_LATE if compiled else EXIT_RAISED_EARLY
    if compiled == 0:
        return EXIT_EXITED_EARLY if exit_code else EXIT_NO_COMPILE
    # as Python's own exit takes it (sys.exit(-1) is 255): a negative code here is no signal
    return exit_code % 256 if isinstance(exit_code, int) else 1

if __name__ == "__main__":
    code = main()
    if code < 0:  # --own-exit: the script ended as a process killed by that signal does
        from tuidebug import proc

        proc.die_of(-code)
    sys.exit(code)
