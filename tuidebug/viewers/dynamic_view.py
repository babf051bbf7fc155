"""The lines ``info`` prints about a compile's dynamic shapes: its symbols, the dimensions it
specialized, why it recompiled (and what would avoid it), the recompile limit being hit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text

from tuidebug.inert import inert_text

MAX_SYMBOLS = 6  # per compile; info --json lists every one


def where(line: Any) -> str:
    """``file.py:12`` of a ``user_line`` ("" when unknown)."""
    if not isinstance(line, dict) or not line.get("line"):
        return ""
    return f"{Path(str(line.get('file') or '?')).name}:{line['line']}"


def _head(cid: str, label: str, style: str = "dim") -> list[Any]:
    # the label names trace values too (the recompile limit from the compile's Dynamo config)
    return [inert_text(f"  {cid} ", "bold"), inert_text(label, style)]


# what a recompile's advice may recommend, by the id ``advise --try`` tried it under
_TRIED_IN_ADVICE = {"dynamic=True": "dynamic=True", "static KV cache": "static KV cache"}


def dynamic_notes(c: dict[str, Any], tried: dict[str, dict[str, Any]] | None = None
                  ) -> list[Text]:
    """What ``info`` says about compile ``c`` (an entry of the summary's ``compiles``);
    ``tried``: what ``advise --try`` measured, by suggestion id — advice that names something
    tried says how that went."""
    cid = str(c.get("id"))
    out: list[Text] = []
    rec = c.get("recompile")
    if rec:
        if rec.get("limit_hit"):
            out.append(Text.assemble(*_head(cid, f"RECOMPILE LIMIT HIT ({rec.get('limit')}): ",
                                            "bold red"),
                                     inert_text(str(rec.get("failed_guard") or "")[:200])))
        else:
            value = rec.get("failing_value")
            out.append(Text.assemble(
                *_head(cid, f"recompiled after {rec.get('previous') or '?'}: "),
                inert_text(str(rec.get("failed_guard") or "?")[:200]),
                inert_text(f" (failing value {value})" if value is not None else "")))
        guard_at = rec.get("guard_at")
        if isinstance(guard_at, dict) and where(guard_at):
            out.append(Text.assemble(("      guard from ", "dim"), inert_text(where(guard_at)),
                                     inert_text(f"  {str(guard_at.get('code') or '')[:160]}")))
        called = rec.get("called_at")
        if isinstance(called, dict) and where(called):
            label = ("      resumed after the graph break at " if rec.get("resumed")
                     else "      called at ")
            out.append(Text.assemble((label, "dim"), inert_text(where(called)),
                                     inert_text(f"  {str(called.get('code') or '')[:160]}")))
        wraps = rec.get("wraps")
        if isinstance(wraps, dict) and wraps.get("function"):
            # a decorator's wrapper compiled (transformers' ``wrapper`` around a forward)
            out.append(Text.assemble(("      compiled as ", "dim"),
                                     inert_text(str(wraps.get("wrapper") or "a wrapper")),
                                     (", a decorator's wrapper around ", "dim"),
                                     inert_text(str(wraps["function"])),
                                     inert_text(f" ({where(wraps)})" if where(wraps) else "")))
        if rec.get("suggestion"):
            out.append(Text.assemble(("      avoid it: ", "dim"),
                                     inert_text(str(rec["suggestion"])[:600])))
            for named, sid in _TRIED_IN_ADVICE.items():
                t = (tried or {}).get(sid)
                if t is not None and named in str(rec["suggestion"]):
                    out.append(Text.assemble(
                        (f"      {named} was tried: ", "dim"),
                        inert_text(str(t.get("verdict")), "green" if t.get("helped")
                                   else "yellow")))
    symbols = c.get("symbols") or []
    if symbols:
        parts = [(f"{s['source']}: " if s.get("source") else "")
                 + f"{s.get('range') or s.get('name')}"
                 + (f" ({s.get('kind')})" if s.get("kind") == "unbacked" else "")
                 for s in symbols[:MAX_SYMBOLS]]
        more = f" … {len(symbols) - MAX_SYMBOLS} more" if len(symbols) > MAX_SYMBOLS else ""
        out.append(Text.assemble(*_head(cid, "symbols: "), inert_text("; ".join(parts) + more)))
    for sp in c.get("specializations") or []:
        at = where(sp.get("user_line"))
        out.append(Text.assemble(
            *_head(cid, "specialized: ", "yellow"),
            inert_text(f"{sp.get('source') or sp.get('symbol')} = {sp.get('value')}"),
            inert_text(f" by {sp['guard']}" if sp.get("guard") else ""),
            inert_text(f" at {at}" if at else ""),
            (" (marked dynamic)", "bold red") if sp.get("marked_dynamic") else ""))
    return out
