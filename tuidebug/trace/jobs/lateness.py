"""Which rank the others wait for at their collectives, step after step. No torch.

Each rank's progress log stamps every collective it issues with the time it issued it. When
one rank is slow in the work between collectives (its steps), every other rank reaches each
collective first and waits in it; the slow rank reaches it last. A rank is named only when it
was last at every collective all the ranks issued (three or more), each time later than the
rank before it by more than the other ranks' own spread and ``NOISE_S`` — noise is no
finding. Times are compared only between ranks of one host (one clock); a job on several hosts
gets no verdict. Where the time went: the collectives it reached latest, with the user's line
that issued each (the work before that line is where its time went).
"""

from __future__ import annotations

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
    """The rank every other waited for: ``rank``, the ``collectives`` judged, its delay after
    the rank before it at each (``lo``, ``hi``, ``total``), ``where`` (its latest arrivals, each
    with the line that issued it) and ``text``."""

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


def _arrivals(root: Path, rank: int) -> dict[tuple[str, int], tuple[float, str, str | None]]:
    """Per (group, number), when the rank issued that collective (its last attempt), its op and
    line."""
    out: dict[tuple[str, int], tuple[float, str, str | None]] = {}
    for ev in events(progress_path(root, rank)):
        if ev.get("event") == "start":
            out = {}
        elif ev.get("event") == "collective" and type(ev.get("seq")) is int \
                and type(ev.get("t")) in (int, float):
            line = ev.get("line") if isinstance(ev.get("line"), str) else None
            out[(str(ev.get("group") or "default")[:200], ev["seq"])] = (
                float(ev["t"]), str(ev.get("op") or "?")[:100], line and line[:300])
    return out


def late_rank(root: Path, ranks: list[dict[str, Any]]) -> LateRank | None:
    """The rank the others waited for at every collective they all issued (``ranks``:
    ``analyze_job``'s rows), or None."""
    # one clock: one host and one launcher's node (a host name may repeat across containers)
    if not 2 <= len(ranks) <= MAX_RANKS or len({(r.get("hostname"), r.get("node_rank"))
                                                for r in ranks}) != 1:
        return None
    per = {int(r["rank"]): _arrivals(root, int(r["rank"])) for r in ranks}
    shared = set.intersection(*(set(a) for a in per.values()))
    if len(shared) < MIN_SAMPLES:
        return None
    lasts: set[int] = set()
    delays: dict[tuple[str, int], float] = {}
    for key in shared:
        times = sorted((per[r][key][0], r) for r in per)
        (t_last, last), t_before = times[-1], times[-2][0]
        spread = t_before - times[0][0]  # the other ranks' own spread at it
        if t_last - t_before <= max(NOISE_S, spread):
            return None
        lasts.add(last)
        delays[key] = t_last - t_before
    if len(lasts) != 1:
        return None
    (rank,) = lasts
    ds = list(delays.values())
    where = []
    for key in sorted(delays, key=lambda k: delays[k], reverse=True)[:3]:
        _, op, line = per[rank][key]
        where.append(f"{op} #{key[1]} of group {key[0]}" + (f" ({line})" if line else "")
                     + f": {_s(delays[key])} after the others")
    return LateRank(rank, len(ds), min(ds), max(ds), sum(ds), where,
                    f"the other ranks waited for rank {rank} at all {len(ds)} collectives they "
                    f"all issued, {span(min(ds), max(ds))} each ({_s(sum(ds))} in all): its "
                    "time went into its own work before each")
