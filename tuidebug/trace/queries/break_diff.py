"""Graph breaks of two traces compared: the breaks trace B added and those it no longer has,
matched by the user's line (its file's name, function and text, so that two checkouts of one
script match) and cause; a break whose line only moved is the same break."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from tuidebug.trace.queries.graph_breaks import GraphBreak, trace_breaks
from tuidebug.trace.format.reader import Trace


@dataclass(frozen=True)
class BreaksAcross:
    """``added``: breaks only B has; ``gone``: breaks only A has; ``kept``: how many both have
    (each break once, however often it was met); ``met``: the breaks both have that were met
    a different number of times — (the break as B has it, times in A, times in B): a break
    met once per compile is met less when fewer compiles reach it (``dynamic=True`` removing a
    recompile), and it is still there."""

    added: list[GraphBreak]
    gone: list[GraphBreak]
    kept: int
    met: list[tuple[GraphBreak, int, int]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"added": [b.to_json() for b in self.added],
                "gone": [b.to_json() for b in self.gone], "kept": self.kept,
                "met": [{**b.to_json(), "times_a": na, "times_b": nb}
                        for b, na, nb in self.met]}


def break_ident(b: GraphBreak) -> tuple[str, str, str, str]:
    ul = b.user_line or b.site
    if ul is None:
        return ("?", "?", "?", b.key)
    return (PurePath(ul.file.replace("\\", "/")).name, ul.fn, ul.code or str(ul.line), b.key)


def _by_ident(breaks: list[GraphBreak]) -> dict[tuple[str, str, str, str], list[GraphBreak]]:
    out: dict[tuple[str, str, str, str], list[GraphBreak]] = {}
    for x in breaks:
        out.setdefault(break_ident(x), []).append(x)
    return out


def across(a: Trace, b: Trace) -> BreaksAcross:
    """The graph breaks of ``b`` compared with ``a``'s, each break by its line and cause: one
    met in two compiles of A and one of B is the same break, not one gone."""
    ba = _by_ident([x for bs in trace_breaks(a).values() for x in bs])
    bb = _by_ident([x for bs in trace_breaks(b).values() for x in bs])
    added = [xs[0] for k, xs in bb.items() if k not in ba]
    gone = [xs[0] for k, xs in ba.items() if k not in bb]
    met = [(xs[0], len(ba[k]), len(xs)) for k, xs in bb.items()
           if k in ba and len(ba[k]) != len(xs)]
    return BreaksAcross(added=added, gone=gone, kept=sum(1 for k in bb if k in ba), met=met)


def finding_lines(d: dict[str, Any]) -> list[str]:
    """One line per break added or gone, and per break met a different number of times
    (``BreaksAcross.to_json``)."""
    out = []

    def at(x: dict[str, Any]) -> str:
        ul = x.get("user_line") or x.get("site") or {}
        where = f"{PurePath(str(ul.get('file') or '?')).name}:{ul.get('line') or '?'}"
        return where + (f" {ul['code']}" if ul.get("code") else "")

    for verb, key in (("added", "added"), ("gone", "gone")):
        for x in d.get(key) or []:
            out.append(f"graph break {verb}: {at(x)} ({x.get('cause')})")
    for x in d.get("met") or []:
        out.append(f"graph break still there, met {x.get('times_a')}× → {x.get('times_b')}× "
                   f"(once per compile that reaches it): {at(x)} ({x.get('cause')})")
    return out
