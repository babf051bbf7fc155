"""Is one of two callables faster, or is the difference noise? Times measured side by side
(interleaved, one round = one call of each) become a verdict with its interval.

``spread``: median, p10 and p90 of one side's times. ``ratio_interval``: the median of the
paired per-round ratios (A's time / B's time) and its 95% confidence interval (distribution-free:
order statistics of the binomial, as for any median). ``judge``: "faster" / "slower" only when
the interval excludes 1 and the difference is larger than ``band`` (a difference smaller than
the band reads as none); else "no measurable difference". Pure: no torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tuidebug.trace.format.safefile import number

SAME, FASTER, SLOWER = "same", "faster", "slower"
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Spread:
    """One side's times (seconds): median, p10, p90, fastest, how many."""

    median_s: float
    p10_s: float
    p90_s: float
    min_s: float
    n: int

    def as_json(self) -> dict[str, Any]:
        return {"median_s": self.median_s, "p10_s": self.p10_s, "p90_s": self.p90_s,
                "min_s": self.min_s, "n": self.n}

    @classmethod
    def from_json(cls, d: Any) -> "Spread | None":
        if not isinstance(d, dict):
            return None
        vals = [number(d.get(k), minimum=0) for k in ("median_s", "p10_s", "p90_s", "min_s")]
        if any(v is None for v in vals):
            return None
        n = d.get("n")
        return cls(*vals, n=n if isinstance(n, int) else 0)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Ratio:
    """``value``: the median per-round ratio; ``low``..``high``: its 95% interval."""

    value: float
    low: float
    high: float
    n: int


@dataclass(frozen=True)
class Verdict:
    """How A (compiled, or trace B) compares with the baseline: ``ratio`` is baseline time over
    A's time (above 1: A is faster); ``outcome`` is ``faster``, ``slower`` or ``same``."""

    outcome: str
    ratio: float
    ratio_low: float
    ratio_high: float
    n: int

    @property
    def factor(self) -> float:
        """How many times faster (or slower): at least 1."""
        return self.ratio if self.ratio >= 1 else (1 / self.ratio if self.ratio > 0 else math.inf)


def format_duration(s: Any) -> str:
    """A duration in seconds as the one form every view shows: three significant digits in the
    largest unit below it, ``12.3 µs``, ``4.56 ms``, ``530 ms``, ``1.23 s``, ``184 s``; ``—`` when
    unknown (not a number)."""
    if not isinstance(s, (int, float)) or isinstance(s, bool) or not math.isfinite(s):
        return "—"
    r = float(f"{s:.3g}")  # rounded first: 0.9996 s is 1.00 s, not 1000 ms
    unit, scale = next(((u, k) for u, k in (("s", 1.0), ("ms", 1e3), ("µs", 1e6))
                        if abs(r) * k >= 1), ("ns", 1e9))
    v = abs(r) * scale
    digits = 0 if v >= 100 or v == 0 else (1 if v >= 10 else 2)
    return f"{r * scale:.{digits}f} {unit}" if r else "0 s"


def quantile(xs: list[float], q: float) -> float:
    """The ``q`` quantile of ``xs`` (linear between the order statistics)."""
    s = sorted(xs)
    if not s:
        raise ValueError("no values")
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def spread(times: list[float]) -> Spread:
    if not times:
        raise ValueError("no times")
    import statistics  # with fractions and decimal: only for a trace with timed calls

    return Spread(statistics.median(times), quantile(times, 0.1), quantile(times, 0.9),
                  min(times), len(times))


def median_interval(xs: list[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The distribution-free confidence interval of the median of ``xs``: the order statistics
    ``x(j)``, ``x(n-1-j)`` with the largest ``j`` such that P(Binomial(n, ½) < j+1) stays within
    (1 - confidence) / 2. With fewer than 6 values: their whole range."""
    s = sorted(xs)
    n = len(s)
    if n == 0:
        raise ValueError("no values")
    alpha = (1 - confidence) / 2
    j, cdf = -1, 0.0
    for k in range(n):
        cdf += math.comb(n, k) / 2 ** n
        if cdf > alpha:
            break
        j = k
    j = max(j, 0)
    return s[j], s[n - 1 - j]


def ratio_interval(base: list[float], other: list[float]) -> Ratio:
    """Per round ``base[i] / other[i]``: their median and its interval (pairs with a zero time
    are left out)."""
    ratios = [b / o for b, o in zip(base, other) if o > 0 and b > 0]
    if not ratios:
        raise ValueError("no rounds")
    low, high = median_interval(ratios)
    import statistics

    return Ratio(statistics.median(ratios), low, high, len(ratios))


def judge(r: Ratio, band: float = 0.0) -> Verdict:
    """``faster`` when the whole interval is above 1 (and above ``1 + band``), ``slower`` when
    it is below 1 (and below ``1 / (1 + band)``), else ``same``."""
    if r.low > 1.0 and r.low > 1.0 + band:
        outcome = FASTER
    elif r.high < 1.0 and r.high < 1.0 / (1.0 + band):
        outcome = SLOWER
    else:
        outcome = SAME
    return Verdict(outcome, r.value, r.low, r.high, r.n)


def compare(base: list[float], other: list[float], band: float = 0.0) -> Verdict:
    """The verdict on ``other`` against ``base``, measured in rounds side by side."""
    return judge(ratio_interval(base, other), band)


def overlap(a: Spread, b: Spread) -> bool:
    """Whether two spreads measured apart (not side by side) overlap: their p10–p90 ranges
    meet. Then no difference can be told."""
    return a.p10_s <= b.p90_s and b.p10_s <= a.p90_s
