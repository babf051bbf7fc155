"""The user lines of a trace (``{file, line, fn, code, context}``: where in the user's code a
symbol, a guard or a specialization came from), read with the types their readers rely on."""

from __future__ import annotations

from typing import Any

MAX_CONTEXT = 15  # lines of source context kept per user line (capture writes 7)
MAX_CONTEXT_CODE = 300  # characters per line of context


def user_line(value: Any) -> dict[str, Any] | None:
    """A ``user_line`` of a trace (or an FX node's ``source``): ``{file, line, fn, code}``
    with those types, and its ``context`` (``[{line, code}]``, the source around it, when the
    trace has it: a wrongly typed entry is dropped, a long one cut); else None."""
    if (not isinstance(value, dict) or not isinstance(value.get("line"), int)
            or isinstance(value.get("line"), bool)):
        return None
    out = {"file": str(value.get("file") or "?"), "line": value["line"],
           "fn": str(value.get("fn") or ""), "code": str(value.get("code") or "")}
    context = value.get("context")
    if isinstance(context, list):
        out["context"] = [{"line": c["line"], "code": c["code"][:MAX_CONTEXT_CODE]}
                          for c in context[:MAX_CONTEXT]
                          if isinstance(c, dict) and type(c.get("line")) is int
                          and isinstance(c.get("code"), str)]
    return out


def clean(data: dict[str, Any]) -> dict[str, Any]:
    """A shapes.json body with each of its user lines as ``user_line`` reads it."""
    for key in ("symbols", "guards", "specializations"):
        for item in data.get(key) or []:
            if "user_line" in item:
                item["user_line"] = user_line(item["user_line"])
    return data
