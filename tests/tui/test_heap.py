"""heap.reading / keep_read: what a worker reads is frozen out of full collections, garbage
first collected, and only when the memory grew (a read, not churn)."""

from __future__ import annotations

import gc

from tuidebug.tui.heap import FREEZE_AT, keep_read, reading


def test_a_read_is_not_walked_while_it_is_made_then_frozen() -> None:
    kept: list[list[int]] = []
    assert gc.isenabled()
    with reading():
        assert not gc.isenabled(), "no automatic collection walks the read as it grows"
        with reading():  # a second worker reading at the same time
            pass
        assert not gc.isenabled(), "still off while the first read goes on"
        kept.extend([i] for i in range(FREEZE_AT))  # a read: many objects that stay
        before = gc.get_freeze_count()
    assert gc.isenabled()
    assert gc.get_freeze_count() >= before + FREEZE_AT // 2, "what the read made is frozen"


def test_churn_and_garbage_are_not_frozen() -> None:
    keep_read()  # start from a freeze (or from nothing to freeze)
    before = gc.get_freeze_count()
    for _ in range(5):
        cycles = []
        for i in range(FREEZE_AT // 4):
            a: list[object] = [i]
            a.append(a)  # garbage in cycles: only a collection frees it
            cycles.append(a)
        del cycles
        assert not keep_read() or gc.get_freeze_count() - before < FREEZE_AT // 10
    assert gc.get_freeze_count() - before < FREEZE_AT // 10, "garbage was frozen"
