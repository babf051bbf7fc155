"""``quiet_thread`` (what --profile's timed calls print is dropped, other threads' output kept)
never frees a stand-in stream: CPython's ``print`` holds ``sys.stdout`` borrowed while it
writes and flushes, and a stand-in freed when the block put the stream back crashed another
thread inside a ``print`` (SIGSEGV in ``flush``, tests/fixtures/same_job.py under load); one
per stream, used by every thread, so many threads keep no more."""

from __future__ import annotations

import gc
import sys
import weakref

from tuidebug.compiler.capture.quiet import _ThreadQuiet, quiet_thread


def test_a_stand_in_outlives_its_block() -> None:
    with quiet_thread():
        ref = weakref.ref(sys.stdout)
        print("dropped")
    assert sys.stdout is not ref()  # put back
    gc.collect()
    assert ref() is not None
    with quiet_thread():  # the kept one is used again: nothing grows per block
        assert sys.stdout is ref()


def _stand_ins() -> int:
    gc.collect()
    return sum(type(o) is _ThreadQuiet for o in gc.get_objects())


def test_many_threads_keep_one_stand_in_per_stream(capsys) -> None:  # type: ignore[no-untyped-def]
    """A job that starts many threads (a DataLoader's workers, a pool per step), each running
    a quiet block while others print: what each drops is its own, what the rest print is
    all there, and the stand-ins kept do not grow with the threads (one per stream and thread
    were kept: 2 more per thread, never freed)."""
    import threading

    before = _stand_ins()
    start = threading.Barrier(8)

    def worker(i: int) -> None:
        if i < 8:
            start.wait()  # the first eight overlap: blocks open in several threads at once
        for j in range(3):
            with quiet_thread():
                print(f"dropped {i}.{j}")
                print(f"dropped {i}.{j}", file=sys.stderr)
            print(f"kept {i}.{j}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(200)]
    for group in (threads[:8], threads[8:]):
        for t in group:
            t.start()
        for t in group:
            t.join()
    out, err = capsys.readouterr()
    assert "dropped" not in out and "dropped" not in err
    kept = [line for line in out.splitlines() if line.startswith("kept ")]
    assert len(kept) == 600 and len(set(kept)) == 600
    assert _stand_ins() - before <= 2, _stand_ins() - before
    assert not isinstance(sys.stdout, _ThreadQuiet) and not isinstance(sys.stderr, _ThreadQuiet)
