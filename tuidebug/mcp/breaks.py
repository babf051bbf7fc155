"""The MCP ``graph_breaks`` answer: every graph break of a trace with its cause, the user's line
and its code, what ran eagerly, and the advice (``trace.queries.graph_breaks``, the answer
``info`` and the TUI give). The sentences are this module's own words (counts), never text
read from a trace.
"""

from __future__ import annotations

from typing import Any

from tuidebug.mcp.bounded import Answer, next_call
from tuidebug.mcp.evidence import compile_file, ref
from tuidebug.trace.queries.graph_breaks import SourceLine, summarize, trace_breaks
from tuidebug.trace.format.reader import Trace


def _where(s: SourceLine | None) -> dict[str, Any] | None:
    return None if s is None else {"file": s.file, "line": s.line, "fn": s.fn, "code": s.code}


def graph_breaks_answer(h: str, trace: Trace) -> Answer:
    """The breaks grouped by cause in ``data``; each break (its user line first) an item."""
    by_compile = trace_breaks(trace)
    items = []
    for cid, breaks in by_compile.items():
        for i, b in enumerate(breaks):
            items.append({
                "compile_id": cid, "frame": b.frame, "user_line": _where(b.user_line),
                "site": _where(b.site) if b.site != b.user_line else None,
                "cause": b.cause, "explanation": b.explanation, "hints": b.hints,
                "advice": b.advice, "eager": b.eager, "resumed_in": b.resumed_in,
                "gb_id": b.gb_id,
                "ref": ref(compile_file(cid), "dynamo_graph_break_reason", i)})
    s = summarize([b for bs in by_compile.values() for b in bs])
    data = {"count": s.count, "causes": [
        {"cause": c.cause, "count": c.count, "lines": c.lines[:20], "advice": c.advice}
        for c in s.causes]}
    first = next((it["user_line"] for it in items if it["user_line"]), None)
    nexts = [n for n in (
        next_call("kernels_for_line", "what was compiled from the line of the first break",
                  trace=h, file=str(first["file"]), line=int(first["line"])) if first else None,
        next_call("expand", "the first break as Dynamo wrote it", trace=h,
                  ref=items[0]["ref"]) if items else None) if n]
    return Answer("graph_breaks", f"{s.count} graph break(s) from {len(s.causes)} cause(s)"
                  if s.count else "no graph break in this trace", h, data, items, "breaks",
                  next=nexts)
