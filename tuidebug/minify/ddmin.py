"""Delta debugging (Zeller's ddmin), with candidates tested a batch at a time.

``first_failing(subsets)`` tests a list of candidate subsets — in parallel, by the caller's
choice — and returns the index of the first one (in list order) that still fails, or None. The
order matters: earlier subsets are preferred, so a serial and a parallel run agree.
"""

from __future__ import annotations

from typing import Callable, Sequence, TypeVar

T = TypeVar("T")
FirstFailing = Callable[[Sequence[Sequence[T]]], "int | None"]


def split(items: Sequence[T], n: int) -> list[list[T]]:
    """``items`` in ``n`` contiguous chunks of nearly equal size."""
    out, start = [], 0
    for i in range(n):
        end = start + (len(items) - start) // (n - i)
        out.append(list(items[start:end]))
        start = end
    return [c for c in out if c]


def ddmin(items: Sequence[T], first_failing: FirstFailing[T]) -> list[T]:
    """A 1-minimal failing subset of ``items`` (which must fail as a whole)."""
    current = list(items)
    n = 2
    while len(current) >= 2:
        chunks = split(current, min(n, len(current)))
        candidates: list[list[T]] = list(chunks)
        if len(chunks) > 2:
            candidates += [[x for x in current if x not in set(c)] for c in chunks]
        i = first_failing(candidates)
        if i is not None:
            if i < len(chunks):
                current, n = candidates[i], 2
            else:
                current, n = candidates[i], max(n - 1, 2)
            continue
        if n >= len(current):
            break
        n = min(2 * n, len(current))
    return current


def minimal_needed(items: Sequence[T], first_failing: FirstFailing[T]) -> list[T]:
    """The fewest of ``items`` that must be kept: tries none first, then ddmin."""
    if not items:
        return []
    if first_failing([[]]) == 0:
        return []
    if len(items) == 1:
        return list(items)
    return ddmin(items, first_failing)
