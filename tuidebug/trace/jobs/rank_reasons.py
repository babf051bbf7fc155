"""Why a compile happened on some ranks only (the ``compile_only_on_some_ranks`` divergence of
``ranks.py``): its recompile reasons, the graph breaks only that rank took, the user's line
whose call recompiled, and, for the code Dynamo resumes after a graph break, the break it
resumes after and whether the other ranks resumed there too (on another path: a branch on data
that differs per rank). No torch."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.attempts import first_attempt, restarts as restarted_attempts
from tuidebug.trace.queries.graph_breaks import in_data_parallel
from tuidebug.trace.queries.resumes import resume_point
from tuidebug.trace.queries.failed_guard import reasons_of

_WHERE_RE = re.compile(r"Graph break in user code at (.+?):(\d+)")


def short_reason(text: str) -> dict[str, Any]:
    """A recorded break/restart reason: its first lines (without Dynamo's tracebacks) and the
    user line it names (``Graph break in user code at FILE:LINE``)."""
    head = text.split("User code traceback:")[0].split("Traceback (most recent call last)")[0]
    lines = [ln.rstrip() for ln in head.strip().splitlines() if ln.strip()]
    m = _WHERE_RE.search(text)
    # Dynamo's "Graph Break Reason: <type>" names the type, unless it names the instruction
    # traced ("Encountered graph break when attempting to trace CALL: …"): the type follows
    said = [x for x in (ln.strip().removeprefix("Graph Break Reason:").strip() for ln in lines
                        if not ln.startswith("Graph break in user code"))
            if x and not x.startswith("Encountered graph break")]
    return {"text": "\n".join(lines[:6]), "summary": (said or lines or [""])[0][:300],
            "where": f"{m.group(1)}:{m.group(2)}" if m else None}


def _breaks(t: Trace) -> dict[str, list[dict[str, Any]]]:
    return {cid: [short_reason(str(x)) for x in c.get("dynamo_graph_break_reason") or []]
            for cid, c in t.compiles.items()}


def _key(reason: dict[str, Any]) -> tuple[str | None, str]:
    """A graph break as two compiles compare it: its line and what Dynamo said."""
    return reason.get("where"), reason.get("summary") or ""


def why_only_here(t: Trace, cid: str, other: Trace) -> dict[str, Any]:
    """Why compile ``cid`` happened on rank trace ``t`` and not on ``other``: its recompile
    reasons, its restart reasons, the graph breaks of earlier compiles that ``other`` did not
    take (a break ends one graph and starts another compile; compared by line and words, in
    any of ``other``'s compiles) and its own graph breaks but
    those ``other`` took too (a recompile that breaks where the first compile did not; DDP's
    logger call, which every compile of its forward breaks at, is no reason); ``called_at``: the
    user's line whose call recompiled; ``resumed_after``: for a resume function, the break it
    resumes after (``other_path``: ``other`` resumed after it too, in other code); where the
    function is."""
    compiles = t.compiles
    c = compiles.get(cid) or {}
    ids = list(compiles)
    attempts = restarted_attempts(compiles, cid)
    # a restarted compile: its last attempt holds the metrics
    m = c.get("metrics") or next(((compiles[p].get("metrics") or {}) for p in reversed(attempts)
                                  if compiles[p].get("metrics")), {})
    before = ids[:ids.index(cid)] if cid in ids else []
    mine, theirs = _breaks(t), _breaks(other)
    # breaks the other rank took too: by line and words (the whole text names objects by
    # their address, another in each process), in whichever of its compiles (frame ids are
    # per process)
    taken = {_key(b) for bs in theirs.values() for b in bs}
    # nor one in DDP's or FSDP's own code: DDP's forward breaks at its logger in every compile
    # that syncs gradients (a rank-only recompile in a syncing step, where the other rank's
    # only compile was under no_sync, is no reason either)
    breaks = [b for p in dict.fromkeys([*before, cid, *attempts]) for b in mine.get(p, [])
              if _key(b) not in taken and not in_data_parallel(str(b.get("where") or ""))]
    said_anywhere = {said for _, said in taken}
    # a restart reason the other rank's breaks share is no reason: the same line and words
    # where its line is known, the words alone only where it is not
    restarts = [s for s in map(short_reason, map(str, m.get("restart_reasons") or []))
                if (_key(s) not in taken if s["where"] else s["summary"] not in said_anywhere)]
    shapes = t.compile_shapes_brief(cid).get("recompile") or {}
    called = shapes.get("called_at") if isinstance(shapes, dict) else None
    recompiled = reasons_of(c)
    return {"recompile_reasons": recompiled,
            "graph_break_reasons": breaks, "restart_reasons": restarts,
            "function": m.get("co_name"), "file": m.get("co_filename"),
            "line": m.get("co_firstlineno"),
            "called_at": called if isinstance(called, dict) and called.get("line") else None,
            "resumed_after": _resumed_after(m, [p for p in before if p in mine], mine, t, other,
                                            None if recompiled else _new_frame(cid))}


def _new_frame(cid: str) -> str | None:
    """The frame id of compile ``cid`` when it is a frame's first compile (``13/0``, ``13/0_1``:
    a code object Dynamo had not compiled); None for a recompile (``5/1``)."""
    frame, _, count = first_attempt(cid).rpartition("/")
    return frame if frame and count == "0" else None


def code_key(m: dict[str, Any]) -> tuple[str, str, int | None]:
    """A compiled function as two ranks compare it: its file, name and first line (Dynamo's
    frame ids are per process, numbered in the order each rank first compiled a code object:
    never compared across ranks); the first line None where the trace does not record it."""
    line = m.get("co_firstlineno")
    return (str(m.get("co_filename") or ""), str(m.get("co_name") or ""),
            line if type(line) is int else None)


def compile_keys(compiles: list[dict[str, Any]]) -> dict[str, str]:
    """Per compile id of one rank (its manifest's ``compiles``, in order), the compile as
    ranks compare it: its function (``code_key``: file, name, first line) and which of that
    function's compiles on this rank it is — ``f (/job/train.py:3)``, ``… 2nd compile`` —
    never its id (each process numbers its frames). A compile whose summary does not name
    its function has no key: it is compared with no other rank's."""
    out: dict[str, str] = {}
    seen: dict[tuple[str, str, int | None], int] = {}
    for c in compiles:
        s = c.get("summary") if isinstance(c, dict) else None
        if not isinstance(s, dict) or not isinstance(c.get("id"), str):
            continue
        file, name, line = code_key(s)
        if not file or not name or line is None:
            continue
        n = seen[(file, name, line)] = seen.get((file, name, line), 0) + 1
        out[c["id"]] = f"{name} ({file}:{line})" + (f", {_nth(n)} compile" if n > 1 else "")
    return out


def _nth(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _frames_of(t: Trace, name: Any, file: str) -> dict[tuple[str, str, int | None], set[str]]:
    """Per code (file, name, first line), the frame ids of trace ``t`` under which a function
    named ``name`` in ``file`` was compiled: within one process a frame id is one code object."""
    out: dict[tuple[str, str, int | None], set[str]] = {}
    for cid, c in t.compiles.items():
        m = c.get("metrics") or {}
        if m.get("co_name") == name and m.get("co_filename") == file:
            out.setdefault(code_key(m), set()).add(first_attempt(cid).rpartition("/")[0])
    return out


def _resumed_after(m: dict[str, Any], before: list[str], mine: dict[str, list[dict[str, Any]]],
                   t: Trace, other: Trace, frame: str | None) -> dict[str, Any] | None:
    """For a resume function's compile (metrics ``m``, in rank trace ``t``): the last graph
    break before it at the line it resumes from; ``other_resumed``: the other rank compiled a
    resume function of that name and file; ``other_path``: this one is code the other rank
    never compiled (another branch taken, or another call path) — said only of a frame's first compile (``frame``,
    None for a recompile: the same code recompiled, its reasons say why), and only on what
    each trace shows of itself: the other rank's functions of that name have another first
    line (``other_lines``), or this rank compiled more code objects of that name and first
    line than the other did (``code_objects``: [this rank's, the other's]; Dynamo makes a
    resume function per way out of the break — both arms of an ``if`` on data — and per
    call path to it, all of one name and first line). Frame ids are never compared across
    ranks (each process numbers its own). A trace without first lines compares file and name
    only, and claims no other code on a first line."""
    point = resume_point(str(m.get("co_name") or ""))
    file = str(m.get("co_filename") or "")
    if point is None or not file:
        return None
    at = f"{file}:{point[1]}"
    found = next((b for p in reversed(before) for b in mine[p] if b.get("where") == at), None)
    if found is None:
        return None
    theirs, ours = _frames_of(other, m.get("co_name"), file), _frames_of(t, m.get("co_name"), file)
    code = code_key(m)
    lines_known = code[2] is not None and all(k[2] is not None for k in theirs)
    other_lines = sorted({k[2] for k in theirs if k[2] is not None}) \
        if lines_known and theirs and code not in theirs else []
    # compared by file and name where a trace lacks first lines: never "other code" by a line
    key = code if lines_known else code[:2]
    n_ours = len({f for k, fs in ours.items() if (k if lines_known else k[:2]) == key for f in fs})
    n_theirs = len({f for k, fs in theirs.items() if (k if lines_known else k[:2]) == key
                    for f in fs})
    more = n_ours > n_theirs > 0
    return {**found, "where": f"{Path(file).name}:{point[1]}", "other_resumed": bool(theirs),
            "other_path": frame is not None and bool(theirs) and (bool(other_lines) or more),
            "other_lines": other_lines, "code_objects": [n_ours, n_theirs] if more else None}
