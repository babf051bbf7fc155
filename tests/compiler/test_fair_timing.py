"""Interleaved timing (compiler/fair_timing.py) on real calls: a real gap is found, the same
work reads as no difference, each clocked call follows a call of its own callable, and the
threads never exceed the free cores."""

from __future__ import annotations

import sys
import time

import torch

from tuidebug.compiler import fair_timing

CPU = torch.device("cpu")
from tuidebug.trace.queries.verdict import FASTER, SAME, compare


def _sleep(s: float):
    def f() -> None:
        time.sleep(s)
    return f


def test_a_real_gap_is_faster_and_the_same_work_is_no_difference() -> None:
    order: list[str] = []
    slow, fast = _sleep(0.004), _sleep(0.001)
    a, b = fair_timing.interleaved(lambda: (order.append("a"), slow()),
                                   lambda: (order.append("b"), fast()), device=CPU,
                                   min_rounds=20, cap_s=3.0, warmup=1)
    assert len(a) == len(b) >= 5
    timed = order[2:]  # after the warm-up: a a b b, then b b a a, …: each clocked call primed
    assert timed[:8] == ["a", "a", "b", "b", "b", "b", "a", "a"]
    v = compare(a, b)
    assert v.outcome == FASTER and v.ratio > 1.5, v
    same_a, same_b = fair_timing.interleaved(_sleep(0.002), _sleep(0.002), device=CPU, min_rounds=30,
                                             cap_s=3.0, warmup=1)
    assert compare(same_a, same_b, band=0.05).outcome == SAME


class _Calls:
    """A callable that records, per call, its name and whether ``fair_timing`` clocked it (its
    caller is the clock)."""

    def __init__(self, log: list[tuple[str, bool]], name: str) -> None:
        self.log, self.name = log, name

    def __call__(self) -> None:
        clocked = sys._getframe(1).f_code is fair_timing._clocked.__code__
        self.log.append((self.name, clocked))
        time.sleep(0.0005)


def test_each_clocked_call_follows_a_call_of_its_own() -> None:
    """A call made right after the other callable's runs on caches the other left (item_per_layer:
    eager/compiled 0.42 in rounds where eager came second, 0.35 where compiled did): each
    clocked call comes right after an unclocked one of the same callable (or of its ``prime``),
    as in a loop of its own."""
    log: list[tuple[str, bool]] = []
    a, b = fair_timing.interleaved(_Calls(log, "a"), _Calls(log, "b"), device=CPU, min_rounds=12,
                                   max_rounds=12, warmup=1)
    assert len(a) == len(b) == 12
    clocked = [i for i, (_, c) in enumerate(log) if c]
    assert len(clocked) == 24
    for i in clocked:
        assert log[i - 1] == (log[i][0], False), (i, log[i - 1:i + 1])
    # the order still swaps every round: a first in even rounds, b in odd ones
    assert [log[i][0] for i in clocked[:4]] == ["a", "b", "b", "a"]
    log.clear()
    fair_timing.interleaved(_Calls(log, "a"), _Calls(log, "b"), device=CPU, min_rounds=4, max_rounds=4,
                            warmup=0, prime=(_Calls(log, "pa"), _Calls(log, "pb")))
    clocked = [i for i, (_, c) in enumerate(log) if c]
    assert len(clocked) == 8
    for i in clocked:
        assert log[i - 1] == ("p" + log[i][0], False), (i, log[i - 1:i + 1])


def test_what_puts_back_the_state_runs_before_every_call_unclocked() -> None:
    """``before`` (what puts back the state a call writes in place) runs before each call of
    either callable — warm-up, priming and clocked — and is never clocked: a clocked call
    still comes right after its own kind's call, with only ``before`` between them."""
    log: list[tuple[str, bool]] = []
    fair_timing.interleaved(_Calls(log, "a"), _Calls(log, "b"), device=CPU, min_rounds=4, max_rounds=4,
                            warmup=1, before=_Calls(log, "r"))
    calls = [i for i, (name, _) in enumerate(log) if name != "r"]
    assert len(calls) == 2 + 4 * 4  # warm-up a, b; per round a primed, a, b primed, b
    for i in calls:
        assert log[i - 1] == ("r", False), (i, log[i - 1:i + 1])
    assert not any(c for name, c in log if name == "r")
    clocked = [i for i, (_, c) in enumerate(log) if c]
    assert len(clocked) == 8
    for i in clocked:
        assert log[i - 2] == (log[i][0], False), (i, log[i - 2:i + 1])


def test_threads_are_within_the_free_cores() -> None:
    m = fair_timing.free_threads()
    assert 1 <= m.threads <= min(m.cores, m.user_threads)
    assert m.oversubscribed == (max(0.0, m.load1 - 1.0) + 1.0 > m.cores)
    have = torch.get_num_threads()
    with fair_timing.threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == have


def test_the_time_cap_is_charged_only_the_clocked_calls() -> None:
    """The unclocked priming calls are not charged to the cap: charged, they halved the rounds
    (wider intervals, more verdicts inconclusive). The rounds go on until the clocked calls
    alone have taken the cap, and stop at the round that reached it."""
    def call() -> None:
        time.sleep(0.01)

    def prime() -> None:  # far slower than the clocked calls: charged, 2 rounds would fill
        time.sleep(0.04)

    cap = 0.15
    ta, tb = fair_timing.interleaved(call, call, device=CPU, min_rounds=1, cap_s=cap, warmup=0,
                                     prime=(prime, prime))
    assert len(ta) == len(tb) >= 2
    clocked = sum(ta) + sum(tb)
    assert clocked >= cap > clocked - ta[-1] - tb[-1], (len(ta), clocked)
