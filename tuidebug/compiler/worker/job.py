"""A recompile job as the client sees it: its spec, state, progress and result (torch-free)."""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tuidebug.compiler.recompile_spec import RecompileSpec
from tuidebug.compiler.worker.job_result import JobResult
from tuidebug.errors import WorkerError

__all__ = ["RecompileJob", "JobResult", "WorkerError", "JOB_STATES", "DEFAULT_TIMEOUT"]

DEFAULT_TIMEOUT = 900.0
OUTPUT_TAIL = 200  # lines of a job's stdout/stderr kept for its report
JOB_STATES = ("queued", "running", "ok", "failed", "crashed", "timeout", "cancelled", "error")
FINAL = {"ok", "failed", "crashed", "timeout", "cancelled", "error"}


@dataclass
class RecompileJob:
    """One recompile (or trace) job. Its fields are updated by the worker's reader thread.

    ``state``: queued → running → ok | failed | crashed | timeout | cancelled | error.
    ``ok``: the new trace was written and compiled fine. ``failed``: the job ran, the trace records
    a failure (compile error, eager mismatch, the script raised). ``crashed``: the job's process
    died (signal, abort) or the worker died under it; the trace shows how far it got.
    ``timeout``: killed after ``timeout`` seconds. ``error``: could not be run at all.
    """

    id: int
    spec: RecompileSpec
    timeout: float
    state: str = "queued"
    phase: str | None = None
    messages: list[str] = field(default_factory=list)
    output: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=OUTPUT_TAIL))
    pid: int | None = None
    submitted_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    result: JobResult | None = None  # set when it is done
    on_progress: Callable[["RecompileJob", str], None] | None = None
    on_done: Callable[["RecompileJob"], None] | None = None
    _event: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def out(self) -> Path:
        return Path(self.spec.out)

    @property
    def source(self) -> Path | None:
        s = self.spec.source_trace
        return Path(s) if s else None

    @property
    def sets(self) -> dict[str, Any]:
        return dict(self.spec.sets)

    @property
    def done(self) -> bool:
        return self.state in FINAL

    @property
    def ok(self) -> bool:
        return self.state == "ok"

    @property
    def elapsed_s(self) -> float | None:
        if self.started_at is None:
            return None
        return (self.finished_at or time.time()) - self.started_at

    @property
    def error(self) -> str | None:
        return self.result.error if self.result is not None else None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the job is finished; False if ``timeout`` passed first."""
        return self._event.wait(timeout)

    def summary(self) -> str:
        """One line for a status bar."""
        from tuidebug.compiler.recompile import format_sets

        what = format_sets(self.sets) or "no flag change"
        t = f" in {self.elapsed_s:.1f}s" if self.elapsed_s is not None else ""
        if self.state == "running":
            return f"recompiling ({what}): {self.phase or 'starting'}{t}"
        if self.state == "queued":
            return f"queued: {what}"
        tail = f": {self.error}" if self.error and self.state != "ok" else ""
        return f"{self.state} ({what}){t}{tail}"
