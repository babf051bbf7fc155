"""The compiled graphs against the eager graphs, as ``--profile`` times them: apart, not side by
side (each compile's compiled graph for N runs, then its eager graph for N runs). Each side is
its median with the p10–p90 of its runs (``profile.json``'s ``wall_p10_s``, ``wall_p90_s``,
``wall_n``; summed over compiles, as the medians are); a verdict only where the two spreads do
not overlap (``verdict.overlap``), else the two are not told apart ("same": the difference, if
any, is inside the noise — never "no difference": summed over compiles the range is wider than
a whole call's would be). Fewer than ``MIN_RUNS`` runs on either side (``--profile 1``: a
p10–p90 of one point) gets no verdict (``too_few_runs``). A trace without the spreads (older
than them) gets no verdict (None): times only. Pure: no torch.

The fair verdict on the user's call is the whole call's (``whole_call``: interleaved rounds
and a confidence interval); this one is for a trace where the whole call was not measured."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuidebug.trace.format.safefile import number
from tuidebug.trace.queries.verdict import FASTER, SAME, SLOWER, Spread, overlap

MIN_RUNS = 5  # fewer runs per side: their p10–p90 tell nothing (one run: one point)
TOO_FEW = "too_few_runs"  # the verdict of spreads of fewer runs than that


def run_spread(run: Any) -> Spread | None:
    """The spread of one side's timed runs (``compiled`` or ``eager`` of ``profile.json``);
    None when its p10/p90 are not recorded (an older trace) or not numbers."""
    if not isinstance(run, dict):
        return None
    vals = [number(run.get(k), minimum=0)
            for k in ("wall_s", "wall_p10_s", "wall_p90_s", "wall_min_s")]
    n = run.get("wall_n")
    if any(v is None for v in vals) or not isinstance(n, int) or isinstance(n, bool) or n < 1:
        return None
    median, p10, p90, low = vals
    if not low <= p10 <= median <= p90:  # type: ignore[operator]
        return None
    return Spread(median, p10, p90, low, n)  # type: ignore[arg-type]


def summed(spreads: list[Spread | None]) -> Spread | None:
    """Several compiles' spreads as one call of each: medians, p10s and p90s added (the range
    of a sum is no narrower than that, and often much wider: apart, it is a difference; inside
    it, only "not told apart", never "no difference"); ``n``: the fewest runs. None when any is
    missing, or there are none."""
    if not spreads or any(s is None for s in spreads):
        return None
    got = [s for s in spreads if s is not None]
    return Spread(*(round(sum(getattr(s, f) for s in got), 9)
                    for f in ("median_s", "p10_s", "p90_s", "min_s")),
                  n=min(s.n for s in got))


@dataclass(frozen=True)
class GraphTimes:
    """Compiled and eager graph times per call, each with its spread (None: not recorded), and
    the verdict they allow: ``faster``, ``slower``, ``same`` (spreads overlap: not told
    apart), ``too_few_runs`` (fewer than ``MIN_RUNS`` on a side) or None (no spreads)."""

    compiled: Spread | None
    eager: Spread | None

    @property
    def outcome(self) -> str | None:
        c, e = self.compiled, self.eager
        if c is None or e is None or c.median_s <= 0 or e.median_s <= 0:
            return None
        if min(c.n, e.n) < MIN_RUNS:
            return TOO_FEW
        if overlap(c, e):
            return SAME
        return FASTER if c.median_s < e.median_s else SLOWER

    @property
    def runs(self) -> int | None:
        """The fewest runs either side's spread is of."""
        return min(self.compiled.n, self.eager.n) if self.compiled and self.eager else None

    def as_json(self) -> dict[str, Any]:
        """``totals``' fields: ``compiled_spread``, ``eager_spread`` and ``verdict``."""
        return {"compiled_spread": self.compiled.as_json() if self.compiled else None,
                "eager_spread": self.eager.as_json() if self.eager else None,
                "verdict": self.outcome}

    @classmethod
    def from_totals(cls, t: Any) -> "GraphTimes":
        """From ``totals`` (or its ``backward``) as ``info --json`` has them."""
        t = t if isinstance(t, dict) else {}
        return cls(Spread.from_json(t.get("compiled_spread")),
                   Spread.from_json(t.get("eager_spread")))


def changed(a: Any, b: Any) -> bool | None:
    """Whether one side's graph time changed between two traces (``a``, ``b``: that side's
    ``*_spread`` in each trace's totals, timed in two processes): True only where their p10–p90
    do not overlap; False where they do (not told apart); None where either has no spread or
    fewer than ``MIN_RUNS`` runs (:func:`too_few` says which)."""
    sa, sb = Spread.from_json(a), Spread.from_json(b)
    if sa is None or sb is None or min(sa.n, sb.n) < MIN_RUNS:
        return None
    return not overlap(sa, sb)


def too_few_text(runs: Any) -> str:
    """``too few runs to tell (3; at least 5 each)``: spreads of too few runs for a word."""
    return f"too few runs to tell ({runs}; at least {MIN_RUNS} each)"


def too_few(a: Any, b: Any) -> int | None:
    """The fewest runs of two traces' spreads of one side (as :func:`changed` takes them) where
    that is below ``MIN_RUNS`` (then :func:`changed` gives no word); else None."""
    sa, sb = Spread.from_json(a), Spread.from_json(b)
    if sa is None or sb is None:
        return None
    n = min(sa.n, sb.n)
    return n if n < MIN_RUNS else None
