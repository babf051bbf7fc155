"""What ``minify`` and ``bisect`` will run, for the user to confirm first (``consent``)."""

from __future__ import annotations

import os
import sys
from typing import Any, Iterable, Mapping

from tuidebug.compiler.consent import Plan, origin_notes
from tuidebug.minify.source import MinifyError
from tuidebug.trace.format.reader import Trace, TraceError


def _trace(path: str | os.PathLike[str]) -> Trace:
    try:
        return Trace(path)
    except TraceError as e:
        raise MinifyError(str(e)) from e


def bisect_plan(trace_path: str | os.PathLike[str], repro: str | None = None,
                allowed: Mapping[str, Any] | Iterable[str] = ()) -> Plan:
    """The command every bisection run executes (the traced script, or ``repro``); the
    trace's risky config in ``confirm`` unless ``allowed`` (confirmed by name)."""
    from tuidebug.minify.bisection import _test_command, trace_overrides
    from tuidebug.minify.signature import Signature

    trace = _trace(trace_path)
    if trace.status != "failed" or trace.error is None:
        raise MinifyError(f"the trace {trace_path} did not fail (status: {trace.status}); "
                          "there is nothing to bisect")
    cmd, cwd = _test_command(trace, repro, Signature.from_trace_error(trace.error), allowed)
    config = trace_overrides(trace, allowed) if not repro else None
    notes = [] if repro else origin_notes(trace.manifest, trace.root)
    notes.append("run again for every bisection step, under Inductor's compiler bisector")
    return Plan("bisect", cmd[0], cmd[1:], cwd, config.apply if config else {}, {}, notes,
                config.confirm if config else {}, config.left_out if config else {})


def minify_plan(trace_path: str | os.PathLike[str],
                allowed: Mapping[str, Any] | Iterable[str] = ()) -> Plan:
    """Minify runs programs it generates from the failing graph's ops (an allowlist of tensor
    ops; nothing from the trace is executed as code) in its own worker processes, with the
    trace's Inductor flags (risky ones in ``confirm`` unless ``allowed``)."""
    from tuidebug.minify.source import load_failure

    failure = load_failure(trace_path, allowed)
    trace = failure.trace
    notes = origin_notes(trace.manifest, trace.root)
    from tuidebug.minify.oppolicy import refusal

    refused = sorted({why for n in failure.graph.compute_nodes()
                      if (why := refusal(str(n.target))) is not None})
    if refused:
        notes.append("ops never run (their values become inputs): " + "; ".join(refused))
    if failure.skipped_flags:
        notes.append("flags of the trace not applied: " + ", ".join(failure.skipped_flags))
    return Plan("minify", sys.executable,
                ["-m", "tuidebug.minify.worker",
                 f"(candidate programs generated from graph {failure.record.id}'s ops)"],
                "a temporary work directory", dict(failure.flags), {}, notes,
                dict(failure.confirm_flags))
