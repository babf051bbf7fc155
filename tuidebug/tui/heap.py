"""What the app has read is kept out of Python's full garbage collections, without keeping
garbage: ``keep_read()`` collects, then freezes — only when much was allocated since the last
time.

A graph snapshot read is millions of small objects that live as long as the app (the reader
caches it); every full collection walked them again, and stopped every thread meanwhile
(measured on the 24-layer trace: a 266 ms stall while the wrapper was highlighted, 40 ms with
them frozen). But a frozen object is never collected: Textual's rendered lines (strips with
caches in cycles), alive when frozen and dropped later, stayed for the app's life — freezing
after every step of the pass stepper kept ~23k more objects per round through the stages of the
committed transformer trace, without end. So: freeze only when the memory in use grew by ``FREEZE_AT`` blocks since the last freeze,
and still has once the garbage is collected (a read of a new snapshot: hundreds of thousands; a
step shown from the cache: a few thousand, which the collector walks quickly anyway). The
collection walks only what was made since the last freeze (after a fresh 5.6k-node snapshot
17–41 ms, a sixth of reading it). What is frozen is then bounded by what was read, not by how
long the app runs. (Counting objects with ``gc.get_objects()`` is not safe beside other
threads: it holds a reference to a tuple another thread is still building, whose resize then
fails; counting collections counts Textual's churn of short-lived cycles as growth.)
"""

from __future__ import annotations

import gc
import sys
import threading
from contextlib import contextmanager
from typing import Iterator

FREEZE_AT = 50_000  # memory blocks more than at the last freeze: new data read, not churn
AGAIN_AT = FREEZE_AT // 2  # after a collection that froze nothing: more blocks before another

_at_freeze = [sys.getallocatedblocks()]
_collected_at = [0]  # memory blocks in use after the last collection that froze nothing


def grown() -> int:
    """Memory blocks in use more than at the last freeze, or than since then where less were
    (what was frozen freed: a trace compared and dropped; a read after that counts in full)."""
    now = sys.getallocatedblocks()
    if now < _at_freeze[0]:
        _at_freeze[0] = now
    return now - _at_freeze[0]


def keep_read() -> bool:
    """After a read (in the worker that read, or where a stage was shown): when the memory in
    use grew by ``FREEZE_AT`` blocks since the last freeze, collect the garbage, and if it is
    still that much, freeze what is alive; True if it froze. A collection that left less (it
    was garbage) is not made again before ``AGAIN_AT`` more blocks are in use: memory held
    just under the bar (comparing with one trace after another, each replacing the last)
    paid a full collection at every read that crossed it again, 5-11 ms, freeing a few
    thousand objects each time."""
    if grown() < FREEZE_AT or sys.getallocatedblocks() - _collected_at[0] < AGAIN_AT:
        return False
    gc.collect()
    if grown() < FREEZE_AT:
        _collected_at[0] = sys.getallocatedblocks()
        return False  # it was garbage
    gc.freeze()
    _at_freeze[0] = sys.getallocatedblocks()
    return True


_readers = [0]
_readers_lock = threading.Lock()


@contextmanager
def reading() -> Iterator[None]:
    """Python's automatic collections off while a worker reads (then ``keep_read``): parsing a
    snapshot of the 24-layer trace made hundreds of thousands of objects, and each automatic
    full collection meanwhile walked all of them, holding the interpreter 80–150 ms (measured
    in the keys pressed while the pass stepper read ahead: 140–300 ms of collections per key).
    One collection of what the read made follows, before it is frozen."""
    with _readers_lock:
        _readers[0] += 1
        if _readers[0] == 1:
            gc.disable()
    try:
        yield
    finally:
        with _readers_lock:
            _readers[0] -= 1
            if _readers[0] == 0:
                gc.enable()
    keep_read()
