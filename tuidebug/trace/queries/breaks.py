"""The graph breaks a trace records, per Dynamo compile: where each is in the user's code and
why, read from each compile's ``dynamo_graph_break_reason`` (Dynamo's text: "Graph break in
user code at FILE:LINE", then "Graph Break Reason: …" and the reason's first line).

A frame's analysis that restarted at a break (compile ``0/0``, then ``0/0_1``) records the
break on the first id: ``breaks_of(…, "0/0_1")`` finds it there. Pure data: no torch.
(The full list of breaks per compile with their advice is the explain question's; this module
is the small reading the profile's ledger needs, to be merged with it.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

_AT = re.compile(r"Graph break in user code at (?P<file>.+?):(?P<line>\d+)\s*$", re.M)
_REASON = re.compile(r"Graph Break Reason:\s*(?P<head>[^\n]*)\n(?P<rest>.*)", re.S)


@dataclass(frozen=True)
class Break:
    """One graph break: its user ``file``:``line`` and a one-line ``reason``."""

    compile_id: str
    reason: str
    file: str | None = None
    line: int | None = None

    @property
    def place(self) -> str:
        """``model.py:42`` (the file's name, not its folders), or ``?``."""
        if not self.file:
            return "?"
        return f"{self.file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{self.line}"


def parse_break(compile_id: str, text: Any) -> Break | None:
    """A ``Break`` of Dynamo's text of one break, or None when it is not such a text."""
    if not isinstance(text, str) or not text.strip():
        return None
    at = _AT.search(text)
    file, line = (at.group("file"), int(at.group("line"))) if at else (None, None)
    reason = ""
    m = _REASON.search(text)
    if m:
        head = m.group("head").strip()
        # "Encountered graph break when attempting to trace CALL: …": the specific reason is
        # the first non-empty line after it
        rest = [ln.strip() for ln in m.group("rest").splitlines() if ln.strip()]
        reason = rest[0] if rest and head.startswith("Encountered graph break") else head
    if not reason:
        reason = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return Break(compile_id, reason[:300], file, line)


def _frame_ids(cid: str, compiles: Mapping[str, Any]) -> list[str]:
    """``cid`` and the compiles it restarted from (``0/0_1`` → ``0/0``)."""
    out = [cid]
    base = cid
    while re.fullmatch(r".+_\d+", base):
        base = base.rsplit("_", 1)[0]
        if base in compiles:
            out.append(base)
    return out


def breaks_of(compiles: Mapping[str, Any], cid: str) -> list[Break]:
    """The graph breaks that ended compile ``cid``'s graph (its own, or its restart's)."""
    for k in _frame_ids(cid, compiles):
        c = compiles.get(k)
        texts = c.get("dynamo_graph_break_reason") if isinstance(c, dict) else None
        if isinstance(texts, list) and texts:
            found = [b for b in (parse_break(cid, t) for t in texts) if b is not None]
            if found:
                return found
    return []
