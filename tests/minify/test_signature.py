"""The failure-signature matcher, on the real error texts of the planted bugs."""

from __future__ import annotations

import json
from pathlib import Path

from tuidebug.minify.signature import Signature, diagnostics, normalize
from tuidebug.trace.format.error_record import ErrorRecord


def _error(trace: Path) -> dict:
    return json.loads((trace / "manifest.json").read_text())["error"]


def _trace_sig(err: dict) -> Signature:
    """The signature of a trace's error, as minify reads it (a typed record)."""
    error = ErrorRecord.from_json(err)
    assert error is not None
    return Signature.from_trace_error(error)


def _as_result(err: dict, kind: str) -> dict:
    return {"outcome": "failed", "kind": kind, "type": err["type"], "message": err["message"],
            "traceback": err.get("traceback", "")}


def test_signatures_of_the_planted_bugs(bug_traces: dict[str, Path]) -> None:
    ce = _trace_sig(_error(bug_traces["compile_error"]))
    assert (ce.kind, ce.type.rsplit(".", 1)[-1]) == ("compile", "CppCompileError")
    assert "'compile' was not declared in this scope" in ce.diags
    rt = _trace_sig(_error(bug_traces["runtime_error"]))
    assert (rt.kind, rt.type, rt.key) == ("runtime", "RuntimeError", "unhandled error")
    acc = _trace_sig(_error(bug_traces["accuracy"]))
    assert (acc.kind, acc.type) == ("accuracy", "AccuracyMismatch")


def test_same_failure_matches_despite_run_to_run_noise(bug_traces: dict[str, Path]) -> None:
    err = _error(bug_traces["compile_error"])
    sig = _trace_sig(err)
    # another run: other temp dir, other cache hash, other line/column and tmp numbers
    noisy = (err["message"].replace("/tmp/torchinductor_", "/var/tmp/other/torchinductor_")
             .replace(":105:38:", ":77:12:").replace("tmp17", "tmp3"))
    assert sig.matches(Signature.from_result(_as_result({**err, "message": noisy}, "compile")))


def test_a_candidate_failing_differently_does_not_count(bug_traces: dict[str, Path]) -> None:
    ce_err = _error(bug_traces["compile_error"])
    rt_err = _error(bug_traces["runtime_error"])
    ce = _trace_sig(ce_err)
    rt = _trace_sig(rt_err)
    # the runtime bug's real failure is not the compile error, and vice versa
    assert not ce.matches(Signature.from_result(_as_result(rt_err, "runtime")))
    assert not rt.matches(Signature.from_result(_as_result(ce_err, "compile")))
    # same exception type and kind, but the compiler reports another error
    other = ce_err["message"].replace("'compile' was not declared in this scope",
                                      "expected ';' before '}' token")
    other = other.replace("‘compile’ was not declared in this scope",
                          "expected ‘;’ before ‘}’ token")
    assert not ce.matches(Signature.from_result(_as_result({**ce_err, "message": other},
                                                           "compile")))
    # a runtime error with another message, and a candidate that did not fail at all
    assert not rt.matches(Signature.from_result(
        {"outcome": "failed", "kind": "runtime", "type": "builtins.RuntimeError",
         "message": "index 40 is out of bounds for dimension 0 with size 32"}))
    assert not rt.matches(Signature.from_result({"outcome": "passed"}))
    acc = _trace_sig(_error(bug_traces["accuracy"]))
    assert not acc.matches(Signature.from_result(_as_result(rt_err, "runtime")))
    assert acc.matches(Signature.from_result({"outcome": "failed", "kind": "accuracy",
                                              "type": "AccuracyMismatch", "message": "x"}))


def test_normalize_strips_what_varies() -> None:
    a = normalize("/tmp/torchinductor_u/ab/cabc.main.cpp:105:38: error: ‘tmp17’ at 0x7f3a")
    b = normalize("/home/x/.cache/cd/cdef.main.cpp:9:1: error: 'tmp3' at 0x55aa")
    assert a == b
    assert diagnostics("x.cpp:1:2: warning: unused\nx.cpp:3:4: error: boom 12") == {"boom N"}
