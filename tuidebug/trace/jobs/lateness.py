"""Which rank the others wait for at their collectives, step after step. No torch.

Each rank's progress log stamps every collective it issues with the time it issued it, and its
``done`` with the time it returned (a DDP bucket's: when it completed). When one rank is slow in
the work between collectives (its steps), every other rank reaches each collective first and
waits in it; the slow rank reaches it last. Only collectives the others really waited in are
judged: their ``done`` on every other rank came after the late rank issued it. What a rank
issued before its first collective returned (its first ``done``, as ``first_return`` times a
run from) is not judged: the ranks reach it after their start-up (the process, imports, the
first compiles, which the compile-time comparison judges), not after a step of their own work:
a rank that compiled longer would be last there, and a rank slow at every step then never
named. That is more than the first collective where DDP runs: its start-up collectives are its
C++ side's (not logged), and the first logged ones are the buckets of the first backward, all
issued (asynchronously) before any returns, each carrying the start-up's lag. A collective
that returns without blocking (NCCL's, which only enqueue work on a stream; ``async_op=True``;
a functional collective) says nothing of waiting, and is not judged — with too few judged, no
verdict. A rank is named only when it was last at every collective judged (three or more),
each time later than the rank before it by more than the other ranks' own spread and
``NOISE_S`` — noise is no finding.

How much later it was at each is the others' wait there; how much time its own work cost is
counted once: at each collective, the lag it gained since its previous event (the collective
before returned, or it issued one), over the others' — so DDP's buckets, issued one after
another in one backward, count one step's lag once, not once per bucket. Times are compared
only between ranks of one host (one clock); a job on several hosts gets no verdict. Where the
time went: the collectives before which it gained most, with the user's line that issued each
(the work before that line is where its time went).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuidebug.trace.jobs.progress import events, progress_path
from tuidebug.trace.jobs.skew import NOISE_S, span
from tuidebug.trace.queries.verdict import format_duration as _s

MAX_RANKS = 256  # a larger job: not judged (every rank's log read)
MIN_SAMPLES = 3


@dataclass
class LateRank:
    """The rank every other waited for: ``rank``, the ``collectives`` judged (the others waited
    in each), how much later than the rank before it it was at each (``lo``, ``hi``: the
    others' wait), ``total`` (the lag its own work gained, counted once), ``where`` (where it
    gained most, each with the line that issued the collective) and ``text``."""

    rank: int
    collectives: int
    lo: float
    hi: float
    total: float
    where: list[str] = field(default_factory=list)
    text: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "collectives": self.collectives,
                "delays": [round(self.lo, 6), round(self.hi, 6)], "total_s": round(self.total, 6),
                "where": self.where, "text": self.text}


@dataclass
class _Arrival:
    """One collective on one rank: when it issued it (``t``), when it returned (``done``;
    None: no ``done`` logged), the time of the rank's event before it (``prev``), op, line;
    ``first``: issued before any collective of the rank's (since it started) returned."""

    t: float
    done: float | None
    prev: float | None
    op: str
    line: str | None
    first: bool = False


def _time(ev: dict[str, Any]) -> float | None:
    t = ev.get("t")
    return float(t) if type(t) in (int, float) and math.isfinite(t) else None


def _arrivals(root: Path, rank: int) -> dict[tuple[str, int], _Arrival]:
    """Per (group, number), the rank's last attempt at that collective; ``first``: issued
    before any collective of that attempt returned (``first_return``)."""
    out: dict[tuple[str, int], _Arrival] = {}
    prev: float | None = None
    returned = False
    for ev in events(progress_path(root, rank)):
        kind, t = ev.get("event"), _time(ev)
        key = (str(ev.get("group") or "default")[:200], ev.get("seq"))
        if kind == "start":
            out, returned = {}, False
        elif kind == "collective" and type(key[1]) is int and t is not None:
            line = ev.get("line") if isinstance(ev.get("line"), str) else None
            out[key] = _Arrival(t, None, prev, str(ev.get("op") or "?")[:100],
                                line and line[:300], first=not returned)
        elif kind == "done" and key in out and t is not None and out[key].done is None:
            out[key].done = t
        if kind == "done":
            returned = True
        prev = t if t is not None else prev
    return out


def first_return(root: Path, rank: int) -> float | None:
    """When the rank's first collective returned (its last attempt's first ``done``): where
    its run is timed from — before it, a rank waits for the others to start (its process
    group's set-up, a first barrier); None when its log records none."""
    first: float | None = None
    for ev in events(progress_path(root, rank)):
        if ev.get("event") == "start":
            first = None
        elif ev.get("event") == "done" and first is None:
            first = _time(ev)
    return first


def late_rank(root: Path, ranks: list[dict[str, Any]]) -> LateRank | None:
    """The rank the others waited for at every collective they all issued and waited in
    (``ranks``: ``analyze_job``'s rows), or None."""
    # one clock: one host and one launcher's node (a host name may repeat across containers)
    if not 2 <= len(ranks) <= MAX_RANKS or len({(r.get("hostname"), r.get("node_rank"))
                                                for r in ranks}) != 1:
        return None
    per = {int(r["rank"]): _arrivals(root, int(r["rank"])) for r in ranks}
    shared = set.intersection(*(set(a) for a in per.values()))
    lasts: set[int] = set()
    delays: dict[tuple[str, int], float] = {}
    gained: dict[tuple[str, int], float] = {}
    for key in shared:
        if any(per[r][key].first for r in per):
            continue  # reached after start-up, not after a step's work
        times = sorted((per[r][key].t, r) for r in per)
        (t_last, last), t_before = times[-1], times[-2][0]
        others = [per[r][key] for r in per if r != last]
        # judged only where every other rank returned after the last one issued it: they
        # waited in it (a collective that returns at once tells nothing of waiting)
        if not all(a.done is not None and a.done >= t_last for a in others):
            continue
        spread = t_before - times[0][0]  # the other ranks' own spread at it
        if t_last - t_before <= max(NOISE_S, spread):
            return None
        lasts.add(last)
        delays[key] = t_last - t_before
        mine = per[last][key]
        # the lag its own work gained since its previous event, over the others' work
        work = [a.t - a.prev for a in (mine, *others) if a.prev is not None]
        if len(work) == len(others) + 1:
            gained[key] = max(0.0, work[0] - max(work[1:]))
    if len(delays) < MIN_SAMPLES or len(lasts) != 1 or len(gained) != len(delays):
        return None
    (rank,) = lasts
    ds = list(delays.values())
    total = sum(gained.values())
    where = []
    for key in sorted(gained, key=lambda k: gained[k], reverse=True)[:3]:
        if gained[key] <= NOISE_S:
            break
        a = per[rank][key]
        where.append(f"{a.op} #{key[1]} of group {key[0]}" + (f" ({a.line})" if a.line else "")
                     + f": {_s(delays[key])} after the others, {_s(gained[key])} of it gained "
                     "in its own work since its previous collective")
    return LateRank(rank, len(ds), min(ds), max(ds), total, where,
                    f"the other ranks waited for rank {rank} at all {len(ds)} collectives they "
                    "all issued and waited in after their first returned, "
                    f"{span(min(ds), max(ds))} each; its own work "
                    f"between collectives took {_s(total)} longer than theirs in all")
