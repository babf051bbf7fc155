"""One thread's Python-level output dropped for a while, every other thread's left as it was.

``--profile`` calls the user's compiled callable and its eager original hundreds of times from
the thread that made the first call: a ``print`` in the user's forward would print each time.
While ``quiet_thread()`` runs, ``sys.stdout`` and ``sys.stderr`` are stand-ins that drop what
that thread writes (its prints, the warnings shown to it) and hand every other thread's writes,
and every other attribute, to the stream they stand in for. Nothing is redirected at the file
descriptor level, and nothing another thread writes is held back or reordered. Once the block
ends, the streams are put back (unless the script replaced one meanwhile: then its own stays,
and a stand-in still held anywhere passes everything through).

A stand-in is never freed: CPython's ``print`` holds ``sys.stdout`` as a borrowed reference
while it writes and flushes, so putting the stream back while another thread is inside a
``print`` to the stand-in freed it under that thread (SIGSEGV in ``flush``, 5 of 29 traced
runs of tests/fixtures/same_job.py on a loaded 2-core machine). One stand-in per stream is kept
for the process's life and used again by every thread: it drops the writes of the threads now
inside a block (a count per thread: blocks nest, and overlap in several threads). Kept per
stream and thread, a job that starts many threads (a DataLoader's workers, a pool per step)
kept one more per thread that ran a block, without bound.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any, Iterator


class _ThreadQuiet:
    """A stream that drops what the threads inside a block write; the rest goes to
    ``stream``."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        # thread -> its open blocks; replaced whole under _KEPT_LOCK, never changed in place:
        # a write in any thread reads it without the lock
        self._quiet: dict[int, int] = {}

    def _mine(self) -> bool:
        return threading.get_ident() in self._quiet

    def _hush(self, thread: int, by: int) -> int:
        """``thread``'s open blocks moved by ``by`` (under ``_KEPT_LOCK``): how many threads
        are quiet now."""
        quiet = dict(self._quiet)
        n = quiet.get(thread, 0) + by
        if n > 0:
            quiet[thread] = n
        else:
            quiet.pop(thread, None)
        self._quiet = quiet
        return len(quiet)

    def write(self, text: str) -> int:
        if self._mine():
            return len(text)
        return self._stream.write(text)

    def writelines(self, lines: Any) -> None:
        if not self._mine():
            self._stream.writelines(lines)

    def flush(self) -> None:
        if not self._mine():
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


_KEPT: dict[int, _ThreadQuiet] = {}  # id of the stream -> its stand-in: never freed
_KEPT_LOCK = threading.Lock()


def _stand_in(stream: Any) -> _ThreadQuiet:
    """The kept stand-in for ``stream`` (made once; it holds the stream, so the id is not
    reused while it is kept); ``stream`` itself where it is one (another thread's block is
    open). Under ``_KEPT_LOCK``."""
    if isinstance(stream, _ThreadQuiet):
        return stream
    q = _KEPT.get(id(stream))
    if q is None or q._stream is not stream:
        q = _KEPT[id(stream)] = _ThreadQuiet(stream)
    return q


@contextlib.contextmanager
def quiet_thread() -> Iterator[None]:
    """Drop what the calling thread writes to ``sys.stdout``/``sys.stderr`` inside the block."""
    me = threading.get_ident()
    stand_ins = []
    with _KEPT_LOCK:
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if stream is None:  # pythonw, a closed stream: nothing to quiet
                continue
            q = _stand_in(stream)
            q._hush(me, 1)
            stand_ins.append((name, q))
            setattr(sys, name, q)
    try:
        yield
    finally:
        with _KEPT_LOCK:
            for name, q in stand_ins:
                if q._hush(me, -1) == 0 and getattr(sys, name) is q:
                    setattr(sys, name, q._stream)  # the last block open on it has ended
