"""The traces the app has open: its own and the ones it compared it with, each read once.

The compare screen reads the other trace's files in a worker (its fusion decisions, IR,
kernels, compile records: most of what a comparison costs); pressing ``o`` opens that trace in
the app, and 8 then compares it with the one before. Each of those traces is kept here, with
what its screens and comparisons read of it, while the trace on disk stays as it was: keyed by
its folder, and by its manifest's size and modification time (a trace written again, a
recompile into the same folder, rewrites its manifest last), so that going back and forth reads
nothing twice and a rewritten trace is read afresh.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from tuidebug.trace.format import schema
from tuidebug.trace.format.reader import Trace

KEEP = 2  # the app's trace and the one it is compared with


def _stamp(root: Path) -> tuple[int, int] | None:
    """The manifest's (size, modification time in ns); None where it cannot be seen."""
    try:
        st = os.stat(root / schema.MANIFEST)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


class OpenTraces:
    """Traces by folder, read once while their manifest stays as it was (thread-safe: the
    compare screen asks from a worker)."""

    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self._lock = threading.Lock()
        self._open: dict[Path, tuple[tuple[int, int] | None, Trace]] = {}

    def add(self, trace: Trace) -> None:
        """Keep ``trace`` (open already) for its folder."""
        self._put(Path(trace.root).resolve(), _stamp(Path(trace.root)), trace)

    def get(self, path: Path) -> Trace:
        """The trace at ``path``: the one kept for it while its manifest is unchanged, else
        read now (and kept). A folder that is no trace raises as ``Trace`` does."""
        key = Path(path).expanduser().resolve()
        stamp = _stamp(key)
        with self._lock:
            kept = self._open.get(key)
        if kept is not None and stamp is not None and kept[0] == stamp:
            self._put(key, stamp, kept[1])  # the most recent now
            return kept[1]
        trace = Trace(Path(path).expanduser())  # named as the user named it
        self._put(key, stamp, trace)
        return trace

    def _put(self, key: Path, stamp: tuple[int, int] | None, trace: Trace) -> None:
        with self._lock:
            self._open.pop(key, None)
            self._open[key] = (stamp, trace)
            while len(self._open) > self.keep:
                del self._open[next(iter(self._open))]
