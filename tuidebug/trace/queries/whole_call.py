"""Is compiled faster, and where does the time go? The answer for the user's whole call
(``profile.json``'s ``calls``, written by ``--profile``): the verdict on compiled against eager,
measured interleaved in one process, and the ledger of one compiled call — Dynamo before the
first graph, each graph, each eager island a graph break left (with the break's reason and
user line), CUDA graphs, and the rest — whose parts add up to the measured wall time.

``info``, ``info --json`` (``profile.verdict``, ``profile.ledger``), the TUI's profile screen
and the Perfetto export show this answer. Pure data: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tuidebug.trace.queries.attempts import first_attempt
from tuidebug.trace.queries.graph_breaks import GraphBreak, SourceLine, trace_breaks
from tuidebug.trace.queries.verdict import (FASTER, SAME, SLOWER, Ratio, Spread,
                                            format_duration as duration, judge, quantile)
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.safefile import number

PARTS = ("dynamo", "graph", "eager_island", "cudagraph", "other")
PART_NAMES = {"dynamo": "Dynamo (frame evaluation, guards)", "graph": "compiled graph",
              "eager_island": "eager island (graph break)", "cudagraph": "CUDA graph replay",
              "other": "other (the rest of the measured wall time)"}


@dataclass(frozen=True)
class Part:
    """One part of a call: ``part`` (one of ``PARTS``), its ``seconds`` per call; a graph's id,
    an island's break (``reason``, ``file``, ``line``); ``phase`` ``bwd`` for the backward."""

    part: str
    seconds: float
    graph: str | None = None
    reason: str | None = None
    file: str | None = None
    line: int | None = None
    phase: str = "fwd"

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"part": self.part, "seconds": self.seconds}
        for k in ("graph", "reason", "file", "line"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        if self.phase != "fwd":
            out["phase"] = self.phase
        return out


@dataclass(frozen=True)
class CallVerdict:
    """The whole call of one compiled callable: its verdict and ledger."""

    callable: str
    training: bool
    rounds: int
    compiled: Spread
    eager: Spread
    outcome: str  # verdict.FASTER, SLOWER or SAME
    ratio: float  # eager time / compiled time (median of the rounds); above 1: compiled faster
    ratio_low: float
    ratio_high: float
    text: str
    ledger: list[Part] = field(default_factory=list)
    machine: dict[str, Any] = field(default_factory=dict)
    device: str = ""
    # p10 and p90 of the rounds' own eager/compiled ratios (None without the rounds' times):
    # where a trace timed in another process must fall to differ from this one
    ratio_p10: float | None = None
    ratio_p90: float | None = None

    def verdict_json(self) -> dict[str, Any]:
        return {"callable": self.callable, "training": self.training, "rounds": self.rounds,
                "compiled_s": self.compiled.median_s, "eager_s": self.eager.median_s,
                "compiled": self.compiled.as_json(), "eager": self.eager.as_json(),
                "outcome": self.outcome, "ratio": self.ratio, "ratio_low": self.ratio_low,
                "ratio_high": self.ratio_high, "ratio_p10": self.ratio_p10,
                "ratio_p90": self.ratio_p90, "text": self.text, "device": self.device,
                "oversubscribed": bool(self.machine.get("oversubscribed")),
                "machine": self.machine}


def _break_of(breaks: dict[str, list[GraphBreak]], cid: Any) -> GraphBreak | None:
    """The graph break that ended compile ``cid``'s graph: its own, or that of the compile it
    restarted from (a frame's analysis that restarted at a break, ``0/0`` then ``0/0_1``,
    records the break on the first id)."""
    if not isinstance(cid, str):
        return None
    for c in dict.fromkeys([cid, first_attempt(cid)]):
        if breaks.get(c):
            return breaks[c][0]
    return None


def _ledger(entry: dict[str, Any], breaks: dict[str, list[GraphBreak]]) -> list[Part]:
    out = []
    for p in entry.get("ledger") or []:
        if not isinstance(p, dict) or p.get("part") not in PARTS:
            continue
        secs = number(p.get("seconds"))
        if secs is None:
            continue
        graph = p.get("graph") if isinstance(p.get("graph"), str) else None
        phase = "bwd" if p.get("phase") == "bwd" else "fwd"
        part, reason, line = p["part"], None, None
        if part == "eager_island":
            brk = _break_of(breaks, p.get("compile_id"))
            if brk is not None:
                reason, line = brk.cause, brk.user_line or brk.site
            elif phase == "bwd":  # the autograd engine and the eager backward outside graphs
                reason = BACKWARD_REST if not p.get("compile_id") else None
            else:  # the graph before it ended its frame: the gap is the next frame's
                part = "dynamo"  # guards and evaluation (and eager code between frames)
        elif part in ("graph", "cudagraph") and isinstance(p.get("reason"), str):
            reason = p["reason"]  # a graph not captured as a CUDA graph, and why
        out.append(Part(part, secs, graph, reason, line.file if line else None,
                        line.line if line else None, phase))
    return out


BACKWARD_REST = "the autograd engine; eager backward outside the compiled graphs"


def _cause(ledger: list[Part], compiled_s: float) -> str:
    """The eager islands, when they are what a slower compiled call spends its time on:
    ``3 eager islands from `.item()` at model.py:42 take 1.8 of 2.9 ms``."""
    islands = [p for p in ledger if p.part == "eager_island" and p.phase == "fwd"]
    if not islands:
        return ""
    took = sum(p.seconds for p in islands)
    graphs = [p for p in ledger if p.part in ("graph", "cudagraph") and p.phase == "fwd"]
    dyn = sum(p.seconds for p in ledger if p.part == "dynamo")
    places: dict[str, int] = {}
    for p in islands:
        key = (f"{_short_reason(p.reason)} at {SourceLine(p.file or '?', p.line or 0, '', '').where}"
               if p.reason else "a graph break")
        places[key] = places.get(key, 0) + 1
    named = ", ".join(f"{n} from {k}" if n > 1 else k for k, n in
                      sorted(places.items(), key=lambda kv: -kv[1])[:3])
    n = len(islands)
    return (f"{n} graph break{'s' if n > 1 else ''} ({named}) split the call into "
            f"{len(graphs)} compiled graph calls; the eager islands take {duration(took)} and "
            f"Dynamo's frames and guards {duration(dyn)} of {duration(compiled_s)}")


def _short_reason(reason: str | None) -> str:
    r = (reason or "").strip()
    if "Tensor.item()" in r or ".item()" in r:
        return "`.item()`"
    return r if len(r) <= 60 else r[:57] + "…"


def _text(outcome: str, r: Ratio, ledger: list[Part], compiled_s: float,
          training: bool) -> str:
    what = "compiled training step" if training else "compiled"
    if outcome == SAME:
        return (f"no measurable difference between {what} and eager (eager/compiled "
                f"{r.low:.2f}–{r.high:.2f})")
    if outcome == FASTER:
        return f"{what} {r.value:.2f}× faster than eager ({r.low:.2f}–{r.high:.2f})"
    cause = _cause(ledger, compiled_s)
    return (f"{what} {1 / r.value:.2f}× slower than eager ({1 / r.high:.2f}–"
            f"{1 / r.low:.2f})" + (f": {cause}" if cause else ""))


def _round_ratios(times: Any) -> tuple[float | None, float | None]:
    """p10 and p90 of the per-round eager/compiled ratios of ``profile.json``'s ``times``."""
    if not isinstance(times, dict):
        return None, None
    c, e = times.get("compiled_s"), times.get("eager_s")
    if not isinstance(c, list) or not isinstance(e, list):
        return None, None
    pairs = [(number(x), number(y)) for x, y in zip(e, c)]
    ratios = [x / y for x, y in pairs if x and y and x > 0 and y > 0]
    if not ratios:
        return None, None
    return quantile(ratios, 0.1), quantile(ratios, 0.9)


def call_verdicts(trace: Trace) -> list[CallVerdict]:
    """A verdict per measured whole call (``profile.json``'s ``calls``), in their order."""
    calls = trace.profile.get("calls") if isinstance(trace.profile, dict) else None
    if not isinstance(calls, list):
        return []
    breaks = trace_breaks(trace) if any(isinstance(c, dict) and c.get("ledger")
                                        for c in calls) else {}
    out = []
    for c in calls:
        if not isinstance(c, dict):
            continue
        comp, eager = Spread.from_json(c.get("compiled")), Spread.from_json(c.get("eager"))
        vals = [number(c.get(k)) for k in ("ratio", "ratio_low", "ratio_high")]
        if comp is None or eager is None or any(v is None or v <= 0 for v in vals):
            continue
        rounds = c.get("rounds") if isinstance(c.get("rounds"), int) else 0
        r = Ratio(vals[0], vals[1], vals[2], rounds)  # type: ignore[arg-type]
        v = judge(r)
        ledger = _ledger(c, breaks)
        training = c.get("training") is True
        machine = c.get("machine") if isinstance(c.get("machine"), dict) else {}
        p10, p90 = _round_ratios(c.get("times"))
        out.append(CallVerdict(str(c.get("callable") or "?"), training, rounds, comp, eager,
                               v.outcome, r.value, r.low, r.high,
                               _text(v.outcome, r, ledger, comp.median_s, training), ledger,
                               machine, str(c.get("device") or ""), p10, p90))
    return out


__all__ = ["PARTS", "Part", "CallVerdict", "call_verdicts", "FASTER",
           "SLOWER", "SAME"]
