"""Per compile, what dynamic shapes did: its symbols, its guards grouped by input, the
dimensions specialized to a constant, and (for a recompile) why it happened — the one answer
``info --json``, ``info`` and the TUI's shapes screen give."""

from __future__ import annotations

import re
from typing import Any

from tuidebug.trace.queries import guards as guard_tree
from tuidebug.trace.queries import recompiles, shape_nodes
from tuidebug.trace.format.reader import Trace


def marked_sources(detail: dict[str, Any]) -> set[str]:
    """Sources the user marked dynamic that the compile specialized (Dynamo refuses those
    with a ConstraintViolationError naming them)."""
    reason = str((detail.get("metrics") or {}).get("fail_reason") or "")
    return set(re.findall(r"You marked (\S+) as dynamic", reason))


_SIZE_GUARD = re.compile(r"\.size\(\)\[\d+\]|\.stride\(\)\[\d+\]")


def guard_counts(detail: dict[str, Any], shapes: dict[str, Any]) -> dict[str, Any]:
    """The one guard count of a compile every view shows: ``count`` (Dynamo's own, its
    ``guard_count`` metric, when recorded; else the guards the capture kept), ``shape`` (guards
    on sizes: the shape-environment guards kept, or the size checks in the guard text when
    that names more), ``kept`` (the guards ``shapes.json`` holds); None for an unknown count.
    ``shapes``: ``Trace.compile_shapes`` or ``Trace.compile_shapes_brief`` (its
    ``guard_counts``)."""
    counts = shapes.get("guard_counts")
    if isinstance(counts, dict):
        n_kept, n_shape = int(counts.get("kept", 0)), int(counts.get("shape", 0))
    else:
        kept = shapes.get("guards") or []
        n_kept, n_shape = len(kept), sum(1 for g in kept if g.get("expr"))
    metrics = detail.get("metrics") or detail.get("summary") or {}
    dynamo = metrics.get("guard_count")
    text = detail.get("guards")
    text = "\n".join(map(str, text)) if isinstance(text, list) else str(text or "")
    in_text = sum(1 for ln in text.splitlines() if _SIZE_GUARD.search(ln))
    count = dynamo if isinstance(dynamo, int) and not isinstance(dynamo, bool) else (
        n_kept if n_kept or shapes else None)
    return {"count": count, "shape": max(n_shape, in_text), "kept": n_kept}


def compile_dynamic(trace: Trace, cid: str) -> dict[str, Any]:
    """``symbols`` (name, source, hint, range, kind, user_line; ``user_line_from``: the FX
    node it was taken from when the symbol's creation had none), ``specializations`` (source,
    value, guard, user_line, marked_dynamic), ``guards`` (count, shape: guards on sizes),
    ``recompile`` (``recompiles.explain``; None when not a recompile)."""
    compiles = trace.compiles
    detail = compiles.get(cid) or {}
    shapes = trace.compile_shapes_brief(cid)
    marked = marked_sources(detail)
    symbols = shapes.get("symbols") or []
    derived = shape_nodes.derived_user_lines(trace, cid, symbols)
    return {
        "symbols": [{**{k: s.get(k) for k in ("name", "source", "hint", "range", "lower",
                                              "upper", "kind", "replaced_by", "user_line")},
                     "user_line_from": None, **derived.get(str(s.get("name")), {})}
                    for s in symbols],
        "specializations": [
            {"source": sp.get("source"), "symbol": sp.get("symbol"), "value": sp.get("value"),
             "guard": sp.get("guard"), "reason": sp.get("reason"),
             "user_line": sp.get("user_line"),
             "marked_dynamic": bool(set(sp.get("sources") or []) & marked)}
            for sp in shapes.get("specializations") or []],
        "guards": guard_counts(detail, shapes),
        "recompile": recompiles.explain_compile(trace, cid),
    }


def guard_groups(trace: Trace, cid: str) -> dict[str, list[dict[str, Any]]]:
    """The compile's guards grouped by the input they check (``guards.by_source``), each with
    ``text``: its code, or its expression with symbols named by their inputs."""
    shapes = trace.compile_shapes(cid)
    names = {str(s["name"]): str(s["source"]) for s in shapes.get("symbols") or []
             if s.get("source")}
    out = []
    for g in shapes.get("guards") or []:
        expr = g.get("expr")
        text = (f"{expr}   ({guard_tree.with_sources(expr, names)})"
                if expr and guard_tree.with_sources(expr, names) != expr
                else (expr or g.get("code") or ""))
        out.append({**g, "text": text})
    return guard_tree.by_source(out)
