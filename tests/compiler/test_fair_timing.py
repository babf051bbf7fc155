"""Interleaved timing (compiler/fair_timing.py) on real calls: a real gap is found, the same
work reads as no difference, and the threads never exceed the free cores."""

from __future__ import annotations

import time

import torch

from tuidebug.compiler import fair_timing
from tuidebug.trace.queries.verdict import FASTER, SAME, compare


def _sleep(s: float):
    def f() -> None:
        time.sleep(s)
    return f


def test_a_real_gap_is_faster_and_the_same_work_is_no_difference() -> None:
    order: list[str] = []
    slow, fast = _sleep(0.004), _sleep(0.001)
    a, b = fair_timing.interleaved(lambda: (order.append("a"), slow()),
                                   lambda: (order.append("b"), fast()),
                                   min_rounds=20, cap_s=3.0, warmup=1)
    assert len(a) == len(b) >= 5
    timed = order[2:]  # after the warm-up: a b, then b a, …: the order swaps every round
    assert timed[:4] == ["a", "b", "b", "a"]
    v = compare(a, b)
    assert v.outcome == FASTER and v.ratio > 1.5, v
    same_a, same_b = fair_timing.interleaved(_sleep(0.002), _sleep(0.002), min_rounds=30,
                                             cap_s=3.0, warmup=1)
    assert compare(same_a, same_b, band=0.05).outcome == SAME


def test_threads_are_within_the_free_cores() -> None:
    m = fair_timing.free_threads()
    assert 1 <= m.threads <= min(m.cores, m.user_threads)
    assert m.oversubscribed == (max(0.0, m.load1 - 1.0) + 1.0 > m.cores)
    have = torch.get_num_threads()
    with fair_timing.threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == have
