"""A compile's ``compiles/<id>.shapes.json`` from what a TORCH_TRACE log has: its
``create_symbol``, ``create_unbacked_symbol``, ``symbolic_shape_specialization``,
``guard_added_fast``/``guard_added`` and ``propagate_real_tensors`` records (kept by the
dynamic-shape parser, each with its user line) and its guard tree. A log has no ShapeEnv:
a symbol's range is the one it was created with (or the one value a specialization gives it),
and a recompile's input values are unknown."""

from __future__ import annotations

import re
from typing import Any

from tuidebug.trace.queries import guards as guard_tree
from tuidebug.trace.format import safefile

_RANGE = re.compile(r"^\[\s*(?P<lo>[^,\]]+),\s*(?P<hi>[^\]]+)\]$")


def _bound(text: str) -> int | str:
    text = text.strip()
    return safefile.to_int(text, text)


def _value(text: Any) -> Any:
    return safefile.to_int(text, text) if isinstance(text, str) else text


def user_line(stack: Any, strings: dict[int, str]) -> dict[str, Any] | None:
    """The innermost frame of a record's ``user_stack`` outside torch (file names are indices
    into the log's string table)."""
    if not isinstance(stack, list):
        return None
    for frame in reversed(stack):
        if not isinstance(frame, dict) or not isinstance(frame.get("line"), int):
            continue
        name = frame.get("filename")
        name = strings.get(name, "?") if isinstance(name, int) else str(name)
        if name.startswith("<") or "/torch/" in name:
            continue
        return {"file": name, "line": frame["line"], "fn": str(frame.get("name") or ""),
                "code": str(frame.get("loc") or "")}
    return None


def shapes_from_log(detail: dict[str, Any]) -> dict[str, Any] | None:
    """The shapes file of one compile (None when the log says nothing about its shapes)."""
    events = [e for e in detail.get("dynamic_shapes") or [] if isinstance(e, dict)]
    tree = detail.get("guards") if isinstance(detail.get("guards"), str) else None
    if not events and tree is None:
        return None
    symbols: dict[str, dict[str, Any]] = {}
    shape_guards: list[dict[str, Any]] = []
    specializations = []
    for e in events:
        kind = e.get("event")
        if kind in ("create_symbol", "create_unbacked_symbol") and e.get("symbol"):
            m = _RANGE.match(str(e.get("vr") or ""))
            lo, hi = (_bound(m["lo"]), _bound(m["hi"])) if m else (None, None)
            name = str(e["symbol"])
            symbols.setdefault(name, {
                "name": name, "source": e.get("source"),
                "sources": [str(e["source"])] if e.get("source") else [],
                "kind": "unbacked" if kind == "create_unbacked_symbol" else "backed",
                "hint": _value(e.get("val")), "lower": lo, "upper": hi,
                "range": guard_tree.render_range(name, lo, hi) if m else None,
                "created_range": e.get("vr"), "replaced_by": None,
                "user_line": e.get("user_line")})
        elif kind in ("guard_added_fast", "guard_added", "propagate_real_tensors") \
                and e.get("expr"):
            shape_guards.append({"kind": "PROPAGATE_REAL_TENSORS" if kind.startswith(
                "propagate") else "SHAPE_ENV", "expr": str(e["expr"]),
                "user_line": e.get("user_line")})
        elif kind == "symbolic_shape_specialization":
            sym = str(e.get("symbol"))
            listed = e.get("sources")
            sources = [str(s) for s in listed] if isinstance(listed, list) else []
            guard = next((g["expr"] for g in reversed(shape_guards)
                          if re.search(rf"\b{re.escape(sym)}\b", g["expr"])), None)
            specializations.append({
                "symbol": sym, "source": sources[0] if sources else None, "sources": sources,
                "value": _value(e.get("value")), "reason": e.get("reason"), "guard": guard,
                "user_line": e.get("user_line")})
            if sym in symbols:  # the log's word on its range: one value
                value = _value(e.get("value"))
                symbols[sym].update(replaced_by=str(e.get("value")), lower=value, upper=value,
                                    range=guard_tree.render_range(sym, value, value))
    names = {n: str(s["source"]) for n, s in symbols.items() if s.get("source")}
    for g in shape_guards:
        g["source"] = next((names[t] for t in re.findall(r"\b[su]\d+\b", g["expr"])
                            if t in names), None)
    parsed, dropped = guard_tree.parse_guard_tree(tree or "")
    return {"symbols": list(symbols.values()), "guards": parsed + shape_guards,
            "specializations": specializations, "guard_tree": tree is not None,
            "recompile": None, "cut": dropped + int(detail.get("dynamic_shapes_dropped") or 0)}
