"""A recompile job's result crosses from its child to the server to the client as one typed
record (``compiler/worker/job_result.py``): what the child writes reads back the same, and a
result line with fields of the wrong type (the protocol is JSON) reads as absent, not as a
crash in the client's reader thread."""

from __future__ import annotations

import json

from tuidebug.compiler.worker import JobResult
from tuidebug.trace.format.error_record import ErrorRecord


def test_a_result_reads_back_as_it_was_sent() -> None:
    r = JobResult("failed", error="CppCompileError during phase 'codegen': boom", exit_code=10,
                  elapsed_s=1.5, output_tail="a\nb", trace_status="failed",
                  trace_phase="codegen", graphs=1,
                  trace_error=ErrorRecord.from_json({"phase": "codegen", "type": "CppCompileError",
                                                     "message": "boom", "graph": "0_0-inference"}))
    sent = json.loads(json.dumps(r.to_json()))
    assert "signal" not in sent and sent["trace_error"]["type"] == "CppCompileError"
    assert JobResult.from_json(sent) == r


def test_a_damaged_result_line_reads_as_a_crash_with_what_is_sound() -> None:
    assert JobResult.from_json(None) == JobResult("crashed")
    assert JobResult.from_json({"error": "x"}) == JobResult("crashed", error="x")
    odd = JobResult.from_json({"state": "ok", "exit_code": "0", "elapsed_s": True,
                               "trace_error": "boom", "graphs": 2.5, "signal": 9})
    assert odd == JobResult("ok")
