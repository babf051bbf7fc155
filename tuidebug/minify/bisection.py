"""``tuidebug bisect``: name the backend / Inductor subsystem / pass responsible for a failure.

Runs a test repeatedly under Inductor's compiler bisector (driven through
``tuidebug.compiler.compat``, like every private torch API), in child processes: either a
minified ``repro.py`` (judged by the trace's failure signature; in a warm worker, or a fresh
process per run with ``fresh``) or the script the trace recorded (judged by its exit status, a
fresh process per run, with the trace's ``--set`` config applied by ``script_child``; refused
for an accuracy failure, which an exit status does not show). Importing this module does not
import torch; :func:`bisect` does (the bisector runs in the calling process).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from tuidebug import proc
from tuidebug.minify.pool import WorkerPool, child_env
from tuidebug.minify.signature import Signature
from tuidebug.minify.source import MinifyError
from tuidebug.trace.format.reader import Trace, TraceError


@dataclass
class BisectOutcome:
    """What the bisector found: the backend, the subsystem and which application of it."""

    backend: str | None
    subsystem: str | None = None
    bisect_number: int | None = None
    debug_info: str | None = None
    log: str = ""

    def describe(self) -> str:
        if self.backend is None:
            return "no backend reproduces the failure (it does not happen under the bisector)"
        if self.backend != "inductor" and self.subsystem is None:
            return f"the failure already happens with backend {self.backend!r} (before Inductor)"
        if self.subsystem is None:
            return (f"the failure is in backend {self.backend!r}, but disabling none of its "
                    "subsystems fixes it")
        text = f"backend {self.backend!r}, subsystem {self.subsystem!r}"
        if self.bisect_number is not None and self.debug_info and \
                self.debug_info != self.subsystem:
            text += f", application #{self.bisect_number}: {self.debug_info}"
        return text


@dataclass
class BisectReport:
    """The bisector's answer and what it cost."""

    found: str
    backend: str | None
    subsystem: str | None
    bisect_number: int | None
    debug_info: str | None
    runs: int
    wall_s: float
    command: list[str] = field(default_factory=list)
    log: str = ""


def trace_overrides(trace: Trace, allowed: Mapping[str, Any] | Iterable[str] = ()) -> Any:
    """The trace's ``config_overrides`` sorted by ``trace_config.split`` (applied, to confirm
    by name, left out); ``MinifyError`` when they are not an object."""
    from tuidebug.compiler import trace_config

    return trace_config.split(trace.manifest.config_overrides, allowed)


def _test_command(trace: Trace, repro: str | None, signature: Signature | None = None,
                  allowed: Mapping[str, Any] | Iterable[str] = ()) -> tuple[list[str], str]:
    """The command each bisection run executes, and its working directory. The trace's
    config overrides are applied as ``trace_overrides`` sorts them: risky ones only when
    ``allowed`` (confirmed by name), the rest of what is refused left out (``bisect_plan``
    names both before anything runs)."""
    if repro:
        path = Path(repro)
        if not path.is_file():
            raise MinifyError(f"no such repro: {repro}")
        return [sys.executable, str(path.resolve())], str(path.resolve().parent)
    if signature is not None and signature.kind == "accuracy":
        # a script's exit status says nothing about a mismatch that tuidebug's capture found
        # (most scripts never compare compiled with eager): every run would look fixed
        raise MinifyError(
            f"the trace's failure is an accuracy mismatch ({signature.describe()}), which the "
            "traced script's exit status does not show, so bisecting by re-running it cannot "
            f"tell a good run from a bad one. Minify it first, then bisect the repro, which "
            f"checks the outputs itself:\n  tuidebug minify {trace.root} -o repro.py\n"
            f"  tuidebug bisect {trace.root} --repro repro.py")
    command = trace.manifest.command or []
    if len(command) < 3 or command[:2] != ["tuidebug", "trace"]:
        raise MinifyError("the trace does not record the traced script's command line; "
                          "pass --repro (a repro.py from `tuidebug minify`)")
    cwd = trace.manifest.cwd or os.getcwd()
    script = command[2]
    if not Path(cwd, script).is_file():
        raise MinifyError(f"the traced script {script} is not in {cwd} any more; pass --repro")
    # the Inductor config set at trace time (--set) applies to every run, as it did then
    overrides = trace_overrides(trace, allowed).apply
    return [sys.executable, "-m", "tuidebug.minify.script_child", json.dumps(overrides),
            script, *command[3:]], cwd


def bisect(trace_path: str | os.PathLike[str], repro: str | None = None, timeout: float = 600.0,
           on_step: Callable[[int, str], None] | None = None, fresh: bool = False,
           allowed: Mapping[str, Any] | Iterable[str] = ()) -> BisectReport:
    """Bisect the failure of the trace at ``trace_path`` (see the module docstring).

    A ``repro`` is run in a warm worker process (torch imported once; the bisector's state is
    passed through files) unless ``fresh``; the traced script always runs in a fresh process.
    """
    try:
        trace = Trace(trace_path)
    except TraceError as e:
        raise MinifyError(str(e)) from e
    if trace.status != "failed" or trace.error is None:
        raise MinifyError(f"the trace {trace_path} did not fail (status: {trace.status}); "
                          "there is nothing to bisect")
    signature = Signature.from_trace_error(trace.error)
    cmd, cwd = _test_command(trace, repro, signature, allowed)
    from tuidebug.compiler import compat  # imports torch: the bisector runs in this process

    runs = 0
    state = tempfile.mkdtemp(prefix="tuidebug-bisect-")
    logs = tempfile.mkdtemp(prefix="tuidebug-bisect-logs-")
    pool = WorkerPool(1, log_dir=logs) if repro and not fresh else None
    t0 = time.perf_counter()

    def judge(result: dict[str, Any] | None, rc: int) -> bool:
        if result is None:
            return rc == 0
        return not signature.matches(Signature.from_result(result))

    def in_worker(extra: dict[str, str]) -> bool:
        assert pool is not None and repro is not None
        result = pool.submit(Path(repro).resolve(), timeout, {"bisect_dir": state}).result()
        if result.get("outcome") in ("timeout", "crashed", "error"):
            return False  # still broken, if not in the same way
        return judge(result, 1)

    def in_child(extra: dict[str, str]) -> bool:
        result_file = Path(logs) / f"result-{runs}.json"
        env = child_env({**extra, "TORCHINDUCTOR_CACHE_DIR": state,
                         "TUIDEBUG_REPRO_RESULT": str(result_file)})
        child = proc.spawn(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        rc = proc.wait(child, timeout)  # killed when it times out, or on Ctrl-C
        if rc is None:
            return False  # a hang counts as still failing
        result = None
        if repro and result_file.exists():
            try:
                result = json.loads(result_file.read_text())
            except json.JSONDecodeError:
                pass
        return judge(result, rc)

    def is_good(extra: dict[str, str]) -> bool:
        nonlocal runs
        runs += 1
        return in_worker(extra) if pool is not None else in_child(extra)

    def step(text: str) -> None:
        if on_step:
            on_step(runs + 1, text)

    try:
        found, log = compat.run_bisect(is_good, state, step)
    except compat.NotAvailable as e:
        raise MinifyError(str(e)) from e
    finally:
        if pool is not None:
            pool.close()
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(logs, ignore_errors=True)
    outcome = BisectOutcome(**found, log=log) if found else BisectOutcome(None, log=log)
    return BisectReport(outcome.describe(), outcome.backend, outcome.subsystem,
                        outcome.bisect_number, outcome.debug_info, runs,
                        round(time.perf_counter() - t0, 2), [shlex.quote(c) for c in cmd],
                        outcome.log)
