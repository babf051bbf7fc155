"""``quiet_thread`` (what --profile's timed calls print is dropped, other threads' output kept)
never frees a stand-in stream: CPython's ``print`` holds ``sys.stdout`` borrowed while it
writes and flushes, and a stand-in freed when the block put the stream back crashed another
thread inside a ``print`` (SIGSEGV in ``flush``, tests/fixtures/same_job.py under load)."""

from __future__ import annotations

import gc
import sys
import weakref

from tuidebug.compiler.capture.quiet import quiet_thread


def test_a_stand_in_outlives_its_block() -> None:
    with quiet_thread():
        ref = weakref.ref(sys.stdout)
        print("dropped")
    assert sys.stdout is not ref()  # put back
    gc.collect()
    assert ref() is not None
    with quiet_thread():  # the kept one is used again: nothing grows per block
        assert sys.stdout is ref()
