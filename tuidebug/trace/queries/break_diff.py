"""Graph breaks of two traces compared: the breaks trace B added and those it no longer has,
matched by the user's line (its file's name, function and text, so that two checkouts of one
script match) and cause; a break whose line only moved is the same break."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from tuidebug.trace.queries.graph_breaks import GraphBreak, trace_breaks
from tuidebug.trace.format.reader import Trace


@dataclass(frozen=True)
class BreaksAcross:
    """``added``: breaks only B has; ``gone``: breaks only A has; ``kept``: how many both."""

    added: list[GraphBreak]
    gone: list[GraphBreak]
    kept: int

    def to_json(self) -> dict[str, Any]:
        return {"added": [b.to_json() for b in self.added],
                "gone": [b.to_json() for b in self.gone], "kept": self.kept}


def _ident(b: GraphBreak) -> tuple[str, str, str, str]:
    ul = b.user_line or b.site
    if ul is None:
        return ("?", "?", "?", b.key)
    return (PurePath(ul.file.replace("\\", "/")).name, ul.fn, ul.code or str(ul.line), b.key)


def _unmatched(these: list[GraphBreak], others: list[GraphBreak]) -> list[GraphBreak]:
    """The breaks of ``these`` with no break of ``others`` to match (each matched once)."""
    left = [_ident(x) for x in others]
    out = []
    for x in these:
        ident = _ident(x)
        if ident in left:
            left.remove(ident)
        else:
            out.append(x)
    return out


def across(a: Trace, b: Trace) -> BreaksAcross:
    """The graph breaks of ``b`` compared with ``a``'s."""
    ba = [x for bs in trace_breaks(a).values() for x in bs]
    bb = [x for bs in trace_breaks(b).values() for x in bs]
    added, gone = _unmatched(bb, ba), _unmatched(ba, bb)
    return BreaksAcross(added=added, gone=gone, kept=len(bb) - len(added))


def finding_lines(d: dict[str, Any]) -> list[str]:
    """One line per break added or gone (``BreaksAcross.to_json``)."""
    out = []
    for verb, key in (("added", "added"), ("gone", "gone")):
        for x in d.get(key) or []:
            ul = x.get("user_line") or x.get("site") or {}
            where = f"{PurePath(str(ul.get('file') or '?')).name}:{ul.get('line') or '?'}"
            code = f" {ul['code']}" if ul.get("code") else ""
            out.append(f"graph break {verb}: {where}{code} ({x.get('cause')})")
    return out
