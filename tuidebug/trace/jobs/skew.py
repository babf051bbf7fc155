"""Is a rank slow to compile? Judged over every compile the ranks share, never on one sample.

Each rank records one compile time per compile: a single sample, on machines whose load
varies (other ranks compile beside it; a cache may be warm for one rank only). A rank is called
slower only when it was slower than the fastest rank in every compile the ranks share, each time
by more than what noise explains (``NOISE_RATIO`` and ``NOISE_S``). With one shared compile the
verdict shows the times and says it is one sample: it never calls a rank slower (one number per
rank measures no noise).

Compiles are matched across ranks by the function compiled and which of its compiles it is
(``rank_reasons.compile_keys``), never by compile id: each process numbers its own frames.

With three ranks or more, the other ranks' spread is a measure of noise: a rank whose compile
time (over the compiles every rank made alike) or run (from its first collective's return —
before it, a rank waits for the others to start — to its record's end) lies above every
other's by more than their spread, ``NOISE_S`` and ``NOISE_RATIO`` is named (``slow_ranks``),
with what the trace records beside it: the compiles that took longest beyond the others, each
split into Inductor's part and what came before it; for a run, its compiles beside the
others' (no share of the run is claimed: when they ran is not recorded). Pure data: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tuidebug.trace.queries.verdict import format_duration as _s

NOISE_RATIO = 1.25     # slower than the fastest rank by more than 25%, in every shared compile
NOISE_S = 0.5          # and by more than half a second


@dataclass
class CompileSkew:
    """The ranks' compile times judged: ``samples`` (compiles seen on two ranks or more),
    ``slow`` (the ranks called slower: slower than the fastest rank in every sample, beyond
    noise; [] when none), ``ratios`` (per slow rank, its smallest and largest time as a multiple
    of the fastest rank's), ``text`` (one line, for ``info``)."""

    samples: int
    slow: list[int] = field(default_factory=list)
    ratios: dict[int, tuple[float, float]] = field(default_factory=dict)
    text: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"samples": self.samples, "slow": self.slow,
                "ratios": {str(r): [round(lo, 3), round(hi, 3)]
                           for r, (lo, hi) in self.ratios.items()}, "text": self.text}


def judge_skew(times: dict[int, dict[str, float]]) -> CompileSkew:
    """``times``: per rank, per compile key (``rank_reasons.compile_keys``), its compile
    seconds. The compiles seen on two ranks
    or more are the samples; per rank that appears in every sample, its time over the fastest
    rank's in each."""
    per: dict[str, dict[int, float]] = {}
    for rank, compiles in times.items():
        for cid, sec in compiles.items():
            per.setdefault(cid, {})[rank] = sec
    # a time of 0 is no measurement (a compile the summary timed as nothing)
    shared = {cid: ranks for cid, ranks in per.items()
              if len(ranks) >= 2 and min(ranks.values()) > 0}
    if not shared:
        return CompileSkew(0, text="")
    ranks = sorted(set.intersection(*(set(r) for r in shared.values())))
    one = len(shared) == 1
    slow: list[int] = []
    ratios: dict[int, tuple[float, float]] = {}
    for rank in ranks if not one else []:
        rs, excess = [], []
        for t in shared.values():
            fastest = min(t.values())
            rs.append(t[rank] / fastest if fastest > 0 else float("inf"))
            excess.append(t[rank] - fastest)
        if all(r > NOISE_RATIO for r in rs) and all(e > NOISE_S for e in excess):
            slow.append(rank)
            ratios[rank] = (min(rs), max(rs))
    return CompileSkew(len(shared), slow, ratios, _text(shared, slow, ratios, one))


def _text(shared: dict[str, dict[int, float]], slow: list[int],
          ratios: dict[int, tuple[float, float]], one: bool) -> str:
    if one:
        ((cid, t),) = shared.items()
        hi, lo = max(t, key=lambda r: t[r]), min(t, key=lambda r: t[r])
        return (f"one sample (the compile of {cid}): rank {hi} {_s(t[hi])} vs rank {lo} {_s(t[lo])} — "
                "one compile time per rank cannot tell a slow rank from noise")
    n = len(shared)
    if slow:
        return "; ".join(f"rank {r} slower in all {n} compiles the ranks share "
                         f"({ratios[r][0]:.2f}×–{ratios[r][1]:.2f}× the fastest rank)"
                         for r in slow)
    spread = {cid: max(t.values()) - min(t.values()) for cid, t in shared.items()}
    worst = max(spread, key=lambda c: spread[c])
    return (f"no rank slower in all {n} compiles the ranks share, beyond noise (largest "
            f"spread {_s(spread[worst])}, on the compile of {worst})")


@dataclass
class SlowRank:
    """One rank that took far longer than every other, outside their spread: ``what``
    (``compile``: its compile time over the compiles every rank made alike; ``run``: its run,
    from its first collective's return to its record's end), its ``seconds``, the others' ``lo`` and ``hi``
    (over ``others`` ranks), ``where`` (what the trace records of where the time went) and
    ``text`` (one line)."""

    rank: int
    what: str
    seconds: float
    lo: float
    hi: float
    others: int
    where: list[str] = field(default_factory=list)
    text: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "what": self.what, "seconds": round(self.seconds, 6),
                "others": [round(self.lo, 6), round(self.hi, 6)], "other_ranks": self.others,
                "where": self.where, "text": self.text}


def _outlier(values: dict[int, float]) -> tuple[int, float, float] | None:
    """The one rank whose value lies above every other's by more than noise: more than the
    others' own spread and ``NOISE_S``, and more than ``NOISE_RATIO`` times their largest.
    Needs three ranks or more (two others give a spread); None when there is none."""
    if len(values) < 3:
        return None
    top = max(values, key=lambda r: values[r])
    rest = [v for r, v in values.items() if r != top]
    lo, hi = min(rest), max(rest)
    v = values[top]
    if v - hi > max(NOISE_S, hi - lo) and v > NOISE_RATIO * hi:
        return top, lo, hi
    return None


def span(lo: float, hi: float) -> str:
    """``10.1 s–10.6 s``; one duration where both read the same."""
    return _s(lo) if _s(lo) == _s(hi) else f"{_s(lo)}–{_s(hi)}"


def slow_ranks(times: dict[int, dict[str, float]], inductor: dict[int, dict[str, float]],
               runs: dict[int, float]) -> list[SlowRank]:
    """A rank far slower than every other rank: in compiling (``times``: per rank, per compile
    key — the function and which of its compiles, never the id —, its seconds; judged over the
    compiles every rank made, with what of each compile was Inductor's from ``inductor``), or
    in its run (``runs``: per rank that finished, its seconds from its first collective's
    return to its end). Judged against the other ranks' spread (``_outlier``): with
    two ranks there is none, and nothing is said."""
    out: list[SlowRank] = []
    shared = set.intersection(*(set(c) for c in times.values())) if times else set()
    shared = {cid for cid in shared if all(times[r][cid] > 0 for r in times)}
    totals = {r: sum(times[r][cid] for cid in shared) for r in times} if shared else {}
    found = _outlier(totals)
    if found:
        r, lo, hi = found
        where = []
        def excess(cid: str) -> float:
            return times[r][cid] - max(times[o][cid] for o in times if o != r)

        for cid in sorted(shared, key=excess, reverse=True)[:3]:
            if excess(cid) <= NOISE_S:
                break
            others = [times[o][cid] for o in times if o != r]
            line = f"compile of {cid}: {_s(times[r][cid])} vs {span(min(others), max(others))}"
            ind = [x for o in times if o != r if (x := inductor.get(o, {}).get(cid)) is not None]
            mine = inductor.get(r, {}).get(cid)
            if mine is not None and len(ind) == len(others):
                before = [t - i for t, i in zip(others, ind)]
                line += (f" — Inductor {_s(mine)} vs {span(min(ind), max(ind))}, before it "
                         f"(Dynamo, AOTAutograd) {_s(times[r][cid] - mine)} vs "
                         f"{span(min(before), max(before))}")
            where.append(line)
        out.append(SlowRank(r, "compile", totals[r], lo, hi, len(totals) - 1, where,
                            f"rank {r} compiled for {_s(totals[r])}, outside the other "
                            f"{len(totals) - 1} ranks' {span(lo, hi)} (over the {len(shared)} "
                            "compiles every rank made alike)"))
    found = _outlier(runs)
    if found:
        r, lo, hi = found
        excess = runs[r] - hi
        rest = [v for o, v in totals.items() if o != r]
        more = totals[r] - max(rest) if r in totals and rest else None
        # what the trace times: its compiles beside the others' (where they ran, before or
        # after its first collective, is not recorded: no share of the run is claimed)
        where = (["the trace times no compile of every rank to set beside it"] if more is None
                 else [f"its compiles took {_s(totals[r])}, the others' "
                       f"{span(min(rest), max(rest))}; the trace times its run no finer"])
        out.append(SlowRank(r, "run", runs[r], lo, hi, len(runs) - 1, where,
                            f"rank {r} ran for {_s(runs[r])} from its first collective's return "
                            f"to its end, outside the other {len(runs) - 1} ranks' "
                            f"{span(lo, hi)}"))
    return out
