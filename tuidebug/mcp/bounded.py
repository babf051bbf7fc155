"""An MCP answer, bounded: its record, its pages, and its text within a size cap.

Every tool of the MCP server answers with one :class:`Answer`: what it found (``data``, a list of
``items`` paged by a ``cursor``), the evidence references a second call can expand, and what to
ask next. :func:`render` writes it as JSON of at most ``cap`` characters: long strings are cut
(saying how long they were and which reference shows them whole), then items are left for the
next page. Every string that came from a trace is made inert first (``inert``: control
characters, escape sequences and direction overrides shown visibly) and stays inside ``data`` /
``items``: the server's own words (``answer``, ``next``) never quote a trace.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Union

from tuidebug.inert import inert

DEFAULT_CAP = 20_000  # characters of one answer (about 5k tokens)
MIN_CAP = 2_000
# to fit the cap, long strings, lists and objects are cut to these (characters, elements, keys),
# in turn
LIMITS = ((None, None, None), (4_000, 100, None), (1_000, 30, None), (300, 10, 40),
          (120, 4, 12))
CUT = "…[cut: {n} characters; expand the item's ref for the whole]"
MORE = "…[{n} more; a smaller question, or a higher --max-chars, shows them]"
MORE_KEY = "…"
CUT_PART = "…[cut: {n} characters over the size cap; a higher --max-chars shows it]"
# what a `next` argument may be: a handle, an id, a file:line, never free text from a trace
_SAFE_ARG = re.compile(r"^[A-Za-z0-9_.:/+\-\[\]#=]{1,200}$")
ArgValue = Union[str, int]


@dataclass(frozen=True)
class Next:
    """A call worth making next: the tool, its arguments, and why (the server's own words)."""

    tool: str
    args: dict[str, ArgValue]
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"tool": self.tool, "args": self.args, "why": self.why}


@dataclass
class Answer:
    """One tool's answer. ``answer``: one sentence in the server's own words (no trace text);
    ``data``: what the trace says (a dict, untrusted text made inert); ``items``: the list this
    answer pages through, each ideally with a ``ref``; ``refs``: references to expand (trace-
    relative ``file#/json/pointer``, ``file#L10-L20``); ``next``: calls worth making."""

    tool: str
    answer: str
    trace: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    items: list[Any] | None = None
    item_name: str = "items"
    refs: list[str] = field(default_factory=list)
    next: list[Next] = field(default_factory=list)


def next_call(tool: str, why: str, **args: Any) -> Next | None:
    """A :class:`Next`, or None when an argument is not a plain identifier (a name from a trace
    with spaces, quotes or newlines is not repeated in a suggestion)."""
    clean: dict[str, ArgValue] = {}
    for k, v in args.items():
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (str, int)):
            return None
        if isinstance(v, str) and not _SAFE_ARG.match(v):
            return None
        clean[k] = v
    return Next(tool, clean, why)


def safe_ref(ref: str) -> bool:
    """Whether ``ref`` may be offered as a reference (a plain trace-relative path)."""
    return bool(_SAFE_ARG.match(ref)) and ".." not in ref.split("#")[0].split("/")


def _inert(value: Any, limit: int | None, most: int | None = None,
           keys: int | None = None) -> Any:
    """``value`` with its strings made inert, those over ``limit`` characters cut, lists over
    ``most`` elements and objects over ``keys`` keys cut (each cut said where it is)."""
    if isinstance(value, str):
        text = inert(value)
        if limit is not None and len(text) > limit:
            return text[:limit] + CUT.format(n=len(text))
        return text
    if isinstance(value, dict):
        items = list(value.items())
        out = {str(inert(k, multiline=False)): _inert(v, limit, most, keys)
               for k, v in items[:keys]}
        if keys is not None and len(items) > keys:
            out[MORE_KEY] = MORE.format(n=len(items) - keys)
        return out
    if isinstance(value, (list, tuple)):
        if most is not None and len(value) > most:
            return [_inert(v, limit, most, keys) for v in value[:most]] + [
                MORE.format(n=len(value) - most)]
        return [_inert(v, limit, most, keys) for v in value]
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return _inert(str(value), limit)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str,
                      allow_nan=False)


def render(a: Answer, *, cursor: int = 0, cap: int = DEFAULT_CAP) -> str:
    """``a`` as JSON text of at most ``cap`` characters, its items from ``cursor`` on (as many
    as fit; ``page.next_cursor`` continues). Cut in turn: long strings, lists and objects
    (``LIMITS``), then the largest parts of ``data`` (each replaced by what was cut)."""
    cap = max(cap, MIN_CAP)
    for limits in LIMITS:
        text = _attempt(a, a.data, limits, cursor, cap)
        if text is not None:
            return text
    data = dict(a.data)
    sizes = sorted(data, key=lambda k: -len(_dumps(_inert(data[k], *LIMITS[-1]))))
    for key in sizes:
        data[key] = CUT_PART.format(n=len(_dumps(a.data[key])))
        text = _attempt(a, data, LIMITS[-1], cursor, cap)
        if text is not None:
            return text
    # nothing fits even cut short: say so, within the cap (MIN_CAP holds this sentence)
    return _dumps({"tool": a.tool, "answer": "the answer does not fit the size cap even cut "
                   "short; raise --max-chars or ask a smaller question"})


def _attempt(a: Answer, data: dict[str, Any], limits: tuple[int | None, ...], cursor: int,
             cap: int) -> str | None:
    """``a`` with ``data``, cut to ``limits``, as text within ``cap``; None if it is over."""
    items = list(a.items or [])
    start = min(max(cursor, 0), len(items))
    head: dict[str, Any] = {"tool": a.tool, "answer": a.answer}
    if a.trace is not None:
        head["trace"] = a.trace
    body = {"data": _inert(data, *limits)} if data else {}
    tail = {"refs": [r for r in a.refs if safe_ref(r)][:50],
            "next": [n.to_json() for n in a.next][:8]}
    if a.items is None:
        text = _dumps({**head, **body, **tail})
        return text if len(text) <= cap else None
    shown: list[Any] = []
    used = len(_dumps({**head, **body, **tail})) + 200 + len(a.item_name)  # and the page
    for it in items[start:]:
        piece = _dumps(_inert(it, *limits))
        if used + len(piece) + 1 > cap:
            break
        shown.append(json.loads(piece))
        used += len(piece) + 1
    if not shown and start < len(items):
        return None  # one item alone is over the cap: cut shorter
    end = start + len(shown)
    page = {"cursor": start, "shown": len(shown), "total": len(items),
            "next_cursor": end if end < len(items) else None}
    text = _dumps({**head, **body, a.item_name: shown, "page": page, **tail})
    return text if len(text) <= cap else None
