"""Timing two callables fairly: in one process, after a warm-up, their calls alternating round
by round (the order swapped every round), each clocked call right after an unclocked call of
the same callable (``primed``), for an adaptive number of rounds under a time cap; on the CPU
with no more threads than the cores that are free (OpenMP threads waiting for a busy core stall
a whole call: a busy machine's tens-of-milliseconds outliers). What the machine was doing is
recorded beside the times.

Primed, because a call made right after the other callable's runs on what the other one left
in the caches (instruction and data caches, branch predictors) and is slower than the same
call in a loop of its own. Clocked straight after one another (a b, b a, …), each round pairs
one call that follows its own kind with one that follows the other's, and the per-round ratios
fall in two clusters whose median lands anywhere between them: eager/compiled of
examples/item_per_layer.py --layers 8 (8 graph breaks) read 0.42 in the rounds where eager
came second and 0.35 where compiled did, median 0.37–0.38, where blocks of each alone read
0.35–0.36 (CPU, bench/interleave_order.py); on an H100 the traced runs' rounds read 0.43 and
0.37, median 0.39 (2.55× slower), and their calls that followed their own kind 0.37 (2.7×),
near the untraced bench's 2.80× [2.72–2.95] that the median missed. Primed, both clocked calls
of a round follow their own kind, as in the user's loop: 0.36 on that CPU, as the blocks.

Used by ``--profile``'s whole call (compiled against eager) and by comparisons of two compiles
measured in one process. The verdict on the times is ``tuidebug.trace.queries.verdict``'s.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch

from tuidebug.compiler import compat
from tuidebug.machine import cores, load1
from tuidebug.trace.queries.verdict import ratio_interval

MIN_ROUNDS = 10
MAX_ROUNDS = 2000
CAP_S = 6.0       # stop adding rounds after this long (at least MIN_ROUNDS_AT_CAP rounds)
MIN_ROUNDS_AT_CAP = 5
STABLE = 0.02     # stop early once the ratio's interval is this narrow (relative)
WARMUP = 3


@dataclass(frozen=True)
class Machine:
    """The CPU as the timing found it: ``cores`` this process may use, the 1-minute load
    average, the threads torch had and the threads the timing used; ``oversubscribed`` when
    the load (beyond this process's own) exceeds the cores."""

    cores: int
    load1: float
    threads: int
    user_threads: int
    oversubscribed: bool

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)




def free_threads() -> Machine:
    """How many threads torch may use without waiting for cores: the cores less the load of
    others (this process counts one), at least 1, at most what torch has now."""
    n, load, have = cores(), load1(), torch.get_num_threads()
    others = max(0.0, load - 1.0)
    free = max(1, min(have, int(n - others + 0.5)))
    return Machine(n, round(load, 2), free, have, others + 1.0 > n)


@contextlib.contextmanager
def threads(n: int) -> Iterator[None]:
    """torch's intra-op threads set to ``n`` while open."""
    have = torch.get_num_threads()
    if n != have:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n != have:
            torch.set_num_threads(have)


def _clocked(fn: Callable[[], Any], device: compat.Devices) -> float:
    compat.synchronize(device)
    t0 = time.perf_counter()
    fn()
    compat.synchronize(device)
    return time.perf_counter() - t0


def interleaved(a: Callable[[], Any], b: Callable[[], Any], *, device: compat.Devices,
                min_rounds: int = MIN_ROUNDS,
                cap_s: float = CAP_S, max_rounds: int = MAX_ROUNDS, warmup: int = WARMUP,
                prime: tuple[Callable[[], Any], Callable[[], Any]] | None = None,
                before: Callable[[], Any] | None = None,
                ) -> tuple[list[float], list[float]]:
    """Seconds of ``a`` and of ``b``, one clocked call of each per round (``a`` first in even
    rounds, ``b`` first in odd ones), each right after an unclocked call of the same callable
    (``prime``: what to call instead, unclocked, before ``a``'s and ``b``'s clocked calls — the
    same call without what only the clocked one records), after ``warmup`` unclocked calls of
    each. Rounds go on past ``min_rounds`` until the ratio's interval is within ``STABLE`` of its
    median (checked every 10 rounds) or ``cap_s`` of clocked time has passed (the priming
    calls are not charged: the rounds are as many as unprimed ones would be, the wall time up
    to about twice the cap); never past ``max_rounds``. ``before``: called, unclocked, before
    every call of either (warm-up, priming and clocked): what puts back the state a call
    writes in place. Each clocked call waits for ``device`` (the device the calls run on:
    ``compat.call_device``; or each of the devices, ``compat.call_devices``) before and after
    it."""
    pa, pb = prime if prime is not None else (a, b)
    ready = before if before is not None else _nothing
    for _ in range(warmup):
        ready()
        a()
        ready()
        b()
    ta: list[float] = []
    tb: list[float] = []
    for i in range(max_rounds):
        for fn, primer, times in ((a, pa, ta), (b, pb, tb)) if i % 2 == 0 else (
                (b, pb, tb), (a, pa, ta)):
            ready()
            primer()
            ready()
            times.append(_clocked(fn, device))
        n = i + 1
        spent = sum(ta) + sum(tb)  # clocked time only
        if spent >= cap_s and n >= min(min_rounds, MIN_ROUNDS_AT_CAP):
            break
        if n >= min_rounds and n % 10 == 0 and _stable(ta, tb):
            break
    return ta, tb


def _nothing() -> None:
    pass


def _stable(ta: list[float], tb: list[float]) -> bool:
    try:
        r = ratio_interval(tb, ta)
    except ValueError:
        return False
    return r.value > 0 and (r.high - r.low) / r.value <= STABLE
