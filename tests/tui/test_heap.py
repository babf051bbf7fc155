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


def test_memory_held_just_under_the_bar_is_not_collected_at_every_read() -> None:
    """Memory that stays just under ``FREEZE_AT`` once the garbage is collected (comparing
    with one trace after another: each replaces the last, a few thousand objects of garbage
    with it) is not collected again at the next read that crosses the bar by a little — only
    once ``AGAIN_AT`` more blocks are in use; then, still that much, it is frozen. Before,
    every such read paid a full collection."""
    import sys

    from tuidebug.tui.heap import AGAIN_AT, grown

    keep_read()  # start from a freeze (or from nothing to freeze)
    gc.collect()
    collections: list[int] = []

    def counted(phase: str, info: dict) -> None:
        if phase == "stop" and info["generation"] == 2:
            collections.append(1)
    held: list[object] = []
    while grown() < FREEZE_AT - 5_000:  # kept: just under the bar
        held.append([len(held)])
    gc.callbacks.append(counted)
    try:
        rounds = 0
        for _ in range(3):  # a read: garbage in cycles over the bar, then freed
            cycles = []
            for i in range(4_000):
                a: list[object] = [i]
                a.append(a)
                cycles.append(a)
            del cycles
            assert grown() >= FREEZE_AT
            assert not keep_read(), "garbage frozen"
            rounds += 1
        assert rounds == 3 and len(collections) == 1, collections
        start = sys.getallocatedblocks()
        while sys.getallocatedblocks() - start < AGAIN_AT:  # much more, kept
            held.append([len(held)])
        assert keep_read(), "what is kept is frozen once AGAIN_AT more blocks are in use"
        assert len(collections) == 2, collections
    finally:
        gc.callbacks.remove(counted)
    assert held
