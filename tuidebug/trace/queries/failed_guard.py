"""A failed guard as Dynamo words it, read: a compile's recompile reasons (``0/1: tensor 'x'
size mismatch at index 0. expected 4, actual 16``), the guard alone without the comment and user
stack Dynamo appends, the user line it names, and the patterns of the guards ``recompiles``
explains and ``recompile_suggestion`` advises on. Plain text matching: nothing from the trace
is evaluated (a guard is parsed, never run)."""

from __future__ import annotations

import ast
import re
from typing import Any

from tuidebug.trace.format import safefile

PREFIX = re.compile(r"^\s*(?P<cid>!?\d+/\d+(?:_\d+)?(?:/\d+)?): (?P<text>.*)$", re.S)
# a tensor's name may hold quotes itself: tensor 'kwargs['input_ids']' (passed by keyword)
TENSOR = re.compile(r"tensor '(?P<name>.+?)' (?P<what>size|stride) mismatch at index "
                    r"(?P<index>\d+)\. expected (?P<expected>\S+), actual (?P<actual>\S+)")
TENSOR_OTHER = re.compile(r"tensor '(?P<name>.+?)' (?P<what>dtype|device|requires_grad|"
                          r"dispatch key set|rank|ndim)[^.]*mismatch")
# an argument that was a tensor and is not now (``mask=None`` after a mask)
NOT_TENSOR = re.compile(r"expected type of '(?P<name>.+?)' to be a tensor type, '? but found "
                        r"<class '(?P<found>[\w.]+)'>")
_NAME_HEAD = re.compile(r"^(?P<head>[A-Za-z_]\w*)(?P<rest>.*)$", re.S)
# a size or stride by its source: ``L['x'].size()[0]`` (older logs), ``kwargs['input_ids']
# .size()[1]`` (torch 2.13 names the local)
SIZE_SOURCE = re.compile(r"(?P<name>(?:L\['[^'\]]+'\]|\b[A-Za-z_]\w*)(?:\.\w+|\[[^\]\n]*\])*?)"
                         r"\.(?P<what>size|stride)\(\)\[(?P<index>\d+)\]")
# the number of keyword arguments a compile was made for: ``len(kwargs) == 6``
KWARGS_COUNT = re.compile(r"len\((?:L\['kwargs'\]|kwargs)\) == (?P<n>\d+)")
# the range a dynamic compile holds for a size: ``2 <= kwargs['input_ids'].size()[1] <= 64``
RANGE = re.compile(r"(?:(?P<lo>-?\d+) <= )?(?P<src>.+?\.(?:size|stride)\(\)\[\d+\])"
                   r"(?: <= (?P<hi>-?\d+))?")
# a failed guard's own words end where Dynamo's comment (``  # h = h * scale  # x.py:13 in f``)
# and the user stack it appends (``User stack trace:`` then ``File "…", line N, in fn`` and the
# line's code) begin
_COMMENT = "  #"
_MAX_PARSED = 4000  # characters of a guard parsed to find its comment
_STACK_HEAD = re.compile(r"\n\s*(?:-\s*)?User stack trace:")
_STACK_FRAME = re.compile(r'File "(?P<file>[^"\n]+)", line (?P<line>\d+), in (?P<fn>[^\n]+)\n'
                          r"(?:\s*-)?\s*(?P<code>[^\n]*)")


def reasons_of(detail: dict[str, Any]) -> list[str]:
    """A compile's recompile reasons as a flat list of strings (a log may store the list of a
    frame's failed compiles as one JSON text)."""
    out: list[str] = []
    for r in detail.get("recompile_reasons") or []:
        if isinstance(r, str) and r.lstrip().startswith("["):
            try:
                r = safefile.loads(r)
            except ValueError:
                pass
        out.extend(str(x) for x in (r if isinstance(r, list) else [r]))
    return out


def local_source(name: str) -> str:
    """Dynamo's source of a frame-local input named as its guard failure names it: ``x`` ->
    ``L['x']``, ``kwargs['input_ids']`` -> ``L['kwargs']['input_ids']``; a name that is a
    source already (``L['x']``, as older logs write it) is kept."""
    if re.match(r"^[LG]\['", name):
        return name
    m = _NAME_HEAD.match(name)
    return f"L['{m['head']}']{m['rest']}" if m else f"L['{name}']"


def _comment_at(guard: str) -> int:
    """Where Dynamo's comment begins in a guard's text (-1: none). Dynamo writes the guard's
    code (a Python expression) then ``  # `` and the user's line; a string constant of the
    guard may hold ``  #`` itself (``L['sep'] == '  # '``): the comment begins at the first
    ``  #`` whose text before it parses as an expression (parsed, never evaluated); where none
    does (a tensor guard's message, not code), at the first."""
    first = guard.find(_COMMENT)
    at = first
    while 0 <= at <= _MAX_PARSED:
        try:
            ast.parse(guard[:at].strip(), mode="eval")
            return at
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            at = guard.find(_COMMENT, at + 1)
    return first


def below_range_from_two(guard: str | None) -> bool:
    """Whether the failed guard ``guard`` (``guard_of``'s) is the whole range a dynamic compile
    holds a size in from 2 (``2 <= x.size()[1]``, ``2 <= … <= 64``): sizes 0 and 1, left out
    of it, are what ``backed_size_oblivious`` changes; no other size guard (``3 < s``,
    ``s % 8 == 0``) is."""
    m = RANGE.fullmatch(guard or "")
    return bool(m and m["lo"] == "2" and SIZE_SOURCE.fullmatch(m["src"]))


def guard_of(text: str) -> tuple[str, dict[str, Any] | None]:
    """A failed guard as Dynamo reports it, split into the guard itself (``scale == 2.0``) and
    the user line it names (``{file, line, fn, code}``: the innermost frame of the stack it
    appends; None when it appends none)."""
    head = _STACK_HEAD.search(text)
    guard = text[:head.start()] if head else text
    cut = _comment_at(guard)
    guard = (guard[:cut] if cut >= 0 else guard).strip()
    frames = list(_STACK_FRAME.finditer(text[head.end():])) if head else []
    if not frames:
        return guard, None
    f = frames[-1]
    return guard, {"file": f["file"], "line": int(f["line"]), "fn": f["fn"].strip(),
                   "code": f["code"].strip()}
