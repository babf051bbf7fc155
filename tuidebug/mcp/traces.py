"""The traces an MCP session has opened, by handle (``t1``, ``t2``…).

Whatever a tool is given as ``trace`` — a handle from ``open_trace``, or anything the CLI
accepts (a trace folder, a ``tuidebug pack`` archive, a TORCH_TRACE log or folder, a
torch_compile_debug folder, a distributed job's folder) — is opened once through the one door
(``tuidebug.trace.open``) and kept under its handle. Opening never writes to stdout (the MCP
stdio channel): what the door did on the way (unpacked, imported) is kept as notes.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tuidebug.errors import TraceError
from tuidebug.trace.open import Opened, open_input
from tuidebug.trace.format.reader import Trace

_HANDLE = re.compile(r"^t\d+$")


@dataclass
class Opened1:
    """One opened input: its ``handle``, what the door made of it, the ``Trace`` read (the
    job's chosen rank for a job) and the door's ``notes``."""

    handle: str
    opened: Opened
    trace: Trace | None
    notes: list[str] = field(default_factory=list)
    ranks: dict[int, Trace] = field(default_factory=dict)

    @property
    def job(self) -> Path | None:
        return self.opened.job

    def rank_trace(self, rank: int | None) -> Trace:
        """The trace of ``rank`` of this job (None: the one opened); ``TraceError`` if none."""
        if rank is None or rank == self.opened.rank:
            if self.trace is None:
                raise TraceError(f"{self.handle} is a distributed job without a trace of any "
                                 "rank")
            return self.trace
        if self.job is None:
            raise TraceError(f"{self.handle} is one trace, not a distributed job: it has no "
                             f"rank {rank}")
        if rank not in self.ranks:
            self.ranks[rank] = Trace(open_input(self.job, rank).one_trace())
        return self.ranks[rank]


class Traces:
    """The session's opened traces (``handle → Opened1``), and each input opened once."""

    def __init__(self) -> None:
        self.by_handle: dict[str, Opened1] = {}
        self._by_input: dict[tuple[str, int | None], str] = {}

    def open(self, named: str, rank: int | None = None) -> Opened1:
        """``named`` (a handle, or anything the CLI accepts) opened, once per input."""
        if _HANDLE.match(named) and (named in self.by_handle or not Path(named).exists()):
            if named not in self.by_handle:
                raise TraceError(f"no trace is open as {named}: open one with open_trace(path)")
            return self.by_handle[named]  # (a folder named like a handle: ./t1 opens it)
        key = (str(Path(named).expanduser().resolve()), rank)
        if key in self._by_input:
            return self.by_handle[self._by_input[key]]
        notes: list[str] = []

        def note(text: str) -> None:
            notes.append(text)
            print(f"[tuidebug mcp] {text}", file=sys.stderr)

        opened = open_input(named, rank, on_note=note)
        trace = Trace(opened.trace) if opened.trace is not None else None
        handle = f"t{len(self.by_handle) + 1}"
        self.by_handle[handle] = Opened1(handle, opened, trace, notes)
        self._by_input[key] = handle
        return self.by_handle[handle]

    def trace(self, named: str, rank: int | None = None) -> tuple[Opened1, Trace]:
        """The opened input and the trace to read (a job's ``rank``, or the one opened)."""
        o = self.open(named)
        return o, o.rank_trace(rank)
