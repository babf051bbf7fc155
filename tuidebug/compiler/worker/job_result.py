"""How a recompile job ended, as one typed record (torch-free).

The job's child judges its end (``child.JobChild.result``) and the server sends it to the client
as the ``result`` of its ``{"event": "done"}`` line; the server and the client make one of their
own where the job never ran to its end (a bad spec, a cancel, a dead worker). It crosses the
process boundary only through :meth:`JobResult.to_json` and :meth:`JobResult.from_json`; every
reader gets ``RecompileJob.result`` as this record.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from tuidebug.trace.format.error_record import ErrorRecord
from tuidebug.trace.format.fields import opt, opt_int, opt_str


@dataclass(frozen=True)
class JobResult:
    """``state``: ok | failed | crashed | timeout | cancelled | error (``job.JOB_STATES``);
    ``error``: why it is not ok, in a line; ``note``: a remark on an ok one. What its process
    did: ``exit_code``, or the ``signal`` that ended it; ``elapsed_s``; ``output_tail``: the
    last lines of its output. What its trace says (when it has a manifest): ``trace_status``,
    ``trace_phase``, ``trace_error`` (the failure, in brief) and ``graphs``. The client adds
    ``out`` (the new trace's folder); a dead worker's jobs carry ``worker_log``."""

    state: str
    error: str | None = None
    note: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    elapsed_s: float | None = None
    output_tail: str | None = None
    trace_status: str | None = None
    trace_phase: str | None = None
    trace_error: ErrorRecord | None = None
    graphs: int | None = None
    out: str | None = None
    worker_log: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The fields that are set, as the protocol's ``result`` object."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["trace_error"] = self.trace_error.to_json() if self.trace_error is not None else None
        return {k: v for k, v in out.items() if v is not None}

    @classmethod
    def from_json(cls, value: Any) -> "JobResult":
        """The result in ``value`` (a field of the wrong type reads as absent); a job whose
        result says no state (or is not an object) crashed."""
        d = value if isinstance(value, dict) else {}
        return cls(
            state=opt_str(d.get("state")) or "crashed", error=opt_str(d.get("error")),
            note=opt_str(d.get("note")), exit_code=opt_int(d.get("exit_code")),
            signal=opt_str(d.get("signal")), elapsed_s=opt(d.get("elapsed_s"), int, float),
            output_tail=opt_str(d.get("output_tail")),
            trace_status=opt_str(d.get("trace_status")), trace_phase=opt_str(d.get("trace_phase")),
            trace_error=ErrorRecord.from_json(d.get("trace_error")),
            graphs=opt_int(d.get("graphs")),
            out=opt_str(d.get("out")), worker_log=opt_str(d.get("worker_log")))
