"""Where compiling went on after a graph break: the compile of Dynamo's resume function for the
code after the break, and the compiles made while the code at the break ran eagerly (the frames
it called: an LR scheduler's skipped ``step`` calls the optimizer's, which Dynamo compiles as
frames of their own). Read from the order the compiles were made in; no torch."""

from __future__ import annotations

import re
from typing import Any

from tuidebug.trace.queries.attempts import first_attempt

_RESUME = re.compile(r"^torch_dynamo_resume_in_(?P<fn>.+)_at_(?P<line>\d+)$")


def resume_point(fn: str | None) -> tuple[str, int] | None:
    """Where a resume function resumes (``torch_dynamo_resume_in_step_at_11``: ``("step",
    11)``, the line of the graph break it resumes after); None for any other function."""
    m = _RESUME.match(fn or "")
    return (m["fn"], int(m["line"])) if m else None


def base_fn(fn: str | None) -> str | None:
    """``step`` for ``step`` and for its resume functions (``torch_dynamo_resume_in_step_at_11``)."""
    if not fn:
        return None
    m = _RESUME.match(fn)
    return base_fn(m["fn"]) if m else fn


def frame_number(cid: str) -> int:
    """The frame of a compile id (``3`` of ``3/1``, of ``!0/3/1`` and of ``3/0_1``)."""
    m = re.match(r"!?(?:\d+/)?(\d+)/", cid)
    return int(m.group(1)) if m else -1


def resumed_in(places: dict[str, dict[str, Any]], cid: str, file: str, line: int,
               base: str | None) -> str | None:
    """The compile of the resume function Dynamo made for the code after ``file:line`` (the
    line of ``cid``'s frame that broke): of that function's frame (the first frame after
    ``cid``'s that resumes there), the compile made right after ``cid`` (before its frame
    compiles again: ``0/1``'s break resumes in ``1/1``, not ``1/0``), else, its guards holding,
    the latest one before (Dynamo tries its newest compile first). ``places`` (every compile's
    ``{function, file, line}``) is in compile order."""
    if base is None:
        return None
    number = frame_number(cid)
    resumes = [other for other, p in places.items()
               if (m := _RESUME.match(str(p.get("function") or ""))) is not None
               and int(m["line"]) == line and base_fn(m["fn"]) == base
               and str(p.get("file") or "") == file and frame_number(other) > number]
    if not resumes:
        return None
    first = min(frame_number(o) for o in resumes)
    mine = [o for o in resumes if frame_number(o) == first]
    order = list(places)
    pos = {c: i for i, c in enumerate(order)}
    at = pos.get(cid, -1)
    attempt = first_attempt(cid)
    end = next((pos[o] for o in order[at + 1:] if frame_number(o) == number
                and first_attempt(o) != attempt), len(order))  # its frame again
    after = [o for o in mine if at < pos[o] < end]
    before = [o for o in mine if pos[o] < at]
    return after[0] if after else (before[-1] if before else mine[0])


def entered_at_break(places: dict[str, dict[str, Any]], cid: str,
                     resumed: str | None) -> tuple[str, ...]:
    """The compiles made while the code at ``cid``'s break ran eagerly: after ``cid`` (and its
    restarts) and before ``resumed``, the compile the break resumed in — frames the call at
    the break entered. None when the break resumed in no compile made after it (it could not
    resume, the trace ended there, or the resume function was compiled already): what
    compiled later may be of any code."""
    order = list(places)
    if cid not in places or resumed not in places or order.index(resumed) < order.index(cid):
        return ()
    number, theirs = frame_number(cid), frame_number(resumed)
    return tuple(c for c in order[order.index(cid) + 1:order.index(resumed)]
                 if frame_number(c) not in (number, theirs))
