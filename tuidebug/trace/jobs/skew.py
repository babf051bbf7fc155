"""Is a rank slow to compile? Judged over every compile the ranks share, never on one sample.

Each rank records one compile time per compile id: a single sample, on machines whose load
varies (other ranks compile beside it; a cache may be warm for one rank only). A rank is called
slower only when it was slower than the fastest rank in every compile the ranks share, each time
by more than what noise explains (``NOISE_RATIO`` and ``NOISE_S``). With one shared compile the
verdict shows the times and says it is one sample: it never calls a rank slower (one number per
rank measures no noise). Pure data: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tuidebug.trace.queries.verdict import format_duration as _s

NOISE_RATIO = 1.25     # slower than the fastest rank by more than 25%, in every shared compile
NOISE_S = 0.5          # and by more than half a second


@dataclass
class CompileSkew:
    """The ranks' compile times judged: ``samples`` (compile ids seen on two ranks or more),
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
    """``times``: per rank, per compile id, its compile seconds. The compiles seen on two ranks
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
        return (f"one sample (compile {cid}): rank {hi} {_s(t[hi])} vs rank {lo} {_s(t[lo])} — "
                "one compile time per rank cannot tell a slow rank from noise")
    n = len(shared)
    if slow:
        return "; ".join(f"rank {r} slower in all {n} compiles the ranks share "
                         f"({ratios[r][0]:.2f}×–{ratios[r][1]:.2f}× the fastest rank)"
                         for r in slow)
    spread = {cid: max(t.values()) - min(t.values()) for cid, t in shared.items()}
    worst = max(spread, key=lambda c: spread[c])
    return (f"no rank slower in all {n} compiles the ranks share, beyond noise (largest "
            f"spread {_s(spread[worst])} on {worst})")
