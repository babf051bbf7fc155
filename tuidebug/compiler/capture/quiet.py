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
runs of tests/fixtures/same_job.py on a loaded 2-core machine). One stand-in per stream and
thread is kept for the process's life and used again.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any, Iterator


class _ThreadQuiet:
    """A stream that drops what one thread writes while ``on``; the rest goes to ``stream``."""

    def __init__(self, stream: Any, thread: int) -> None:
        self._stream = stream
        self._thread = thread
        self.on = True

    def _mine(self) -> bool:
        return self.on and threading.get_ident() == self._thread

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


_KEPT: dict[tuple[int, int], _ThreadQuiet] = {}  # (id of the stream, thread): never freed
_KEPT_LOCK = threading.Lock()


def _stand_in(stream: Any, thread: int) -> _ThreadQuiet:
    """The kept stand-in for ``stream`` and ``thread`` (made once; it holds the stream, so
    the id is not reused while it is kept)."""
    with _KEPT_LOCK:
        q = _KEPT.get((id(stream), thread))
        if q is None or q._stream is not stream:
            q = _KEPT[(id(stream), thread)] = _ThreadQuiet(stream, thread)
        return q


@contextlib.contextmanager
def quiet_thread() -> Iterator[None]:
    """Drop what the calling thread writes to ``sys.stdout``/``sys.stderr`` inside the block."""
    me = threading.get_ident()
    saved = [(name, getattr(sys, name)) for name in ("stdout", "stderr")]
    stand_ins = []
    for name, stream in saved:
        if stream is None:  # pythonw, a closed stream: nothing to quiet
            continue
        q = _stand_in(stream, me)
        q.on = True
        stand_ins.append((name, q))
        setattr(sys, name, q)
    try:
        yield
    finally:
        for name, q in stand_ins:
            q.on = False
            if getattr(sys, name) is q:
                setattr(sys, name, q._stream)
