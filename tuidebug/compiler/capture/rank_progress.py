"""A rank's progress as it happens: every collective it issues, before it blocks in it.

Installed by the capture child of a rank of a distributed job (``run_script --progress``).
Each call of a torch.distributed collective (the classic API and the c10d functional ones,
hook points named in ``compat``) appends ``{"event": "collective", "op", "seq", "group",
"line"}`` to the rank's progress log (``tuidebug.trace.jobs.progress``) before it calls the
collective, and ``{"event": "done", …}`` once it returned: a rank killed while it waits (a hang
ended by ``--timeout``) leaves the collective it waits in, numbered per process group as every
rank numbers it (the group as the call names it, by keyword or by position: a ProcessGroup,
its name, a list of ranks, a DeviceMesh; send/recv per pair of ranks). Calls made while Dynamo
traces are not recorded (they become part of a graph; the wrapper hands Dynamo the original
function, so the graph is the one without capture), nor calls made inside another recorded
collective.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import torch

from tuidebug.compiler import compat
from tuidebug.trace.jobs.progress import ProgressLog

_SKIP_DIRS = tuple(os.path.dirname(os.path.dirname(m.__file__ or "")) + os.sep
                   for m in (sys.modules["torch"],) if getattr(m, "__file__", None))
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


_USER_FILE: dict[str, str | None] = {}  # a frame's file -> its base name, None: not the user's


def _user_file(name: str) -> str | None:
    if name not in _USER_FILE:
        theirs = name.startswith(_OWN_DIR) or name.startswith("<") or any(
            name.startswith(d + "torch" + os.sep) for d in _SKIP_DIRS)
        _USER_FILE[name] = None if theirs else os.path.basename(name)
    return _USER_FILE[name]


def _user_line() -> str | None:
    """FILE:LINE of the innermost frame that is neither torch's nor tuidebug's."""
    f = sys._getframe(2)
    while f is not None:
        base = _user_file(f.f_code.co_filename)
        if base is not None:
            return f"{base}:{f.f_lineno}"
        f = f.f_back
    return None


class RankProgress:
    """Records this rank's collectives into its progress log while installed."""

    def __init__(self, path: Path, warn: Callable[[str], None]) -> None:
        self.log = ProgressLog(path)
        self.patcher = compat.Patcher(warn)
        self.seq: dict[str, int] = {}
        self.tls = threading.local()
        self.lock = threading.RLock()  # a signal handler's collective must not deadlock
        self.undo: list[Callable[[], None]] = []
        # the constant part of each event, JSON-encoded once: per (op, group) and per group
        self._heads: dict[tuple[str, str], str] = {}
        self._done: dict[str, str] = {}
        self._lines: dict[str | None, str] = {}

    def install(self) -> "RankProgress":
        """Wrap every collective; on a failure, everything wrapped so far is put back."""
        self.log.append({"event": "start", "t": time.time(), "pid": os.getpid()})
        try:
            for dotted, op in compat.collective_hook_points():
                self.patcher.wrap(dotted, lambda orig, op=op: self._wrap(orig, op))
        except BaseException:
            self.uninstall()
            raise
        return self

    def uninstall(self) -> None:
        for undo in self.undo:
            undo()
        self.patcher.restore()
        self.log.append({"event": "end", "t": time.time()})
        self.log.close()

    def collective_event(self, op: str, group: str, members: Any, seq: int, asyn: bool) -> str:
        """``{"event": "collective", "op", "group", "members", "seq", "line", "async", "t"}``,
        encoded from parts encoded once (a collective costs a few microseconds here)."""
        head = self._heads.get((op, group))
        if head is None:
            head = self._heads[(op, group)] = json.dumps(
                {"event": "collective", "op": op, "group": group, "members": members},
                default=str)[:-1]
        line = _user_line()
        where = self._lines.get(line)
        if where is None:
            where = json.dumps(line)
            if len(self._lines) < 10_000:  # the lines that issue collectives: a few, usually
                self._lines[line] = where
        return (f'{head}, "seq": {seq:d}, "line": {where}, '
                f'"async": {"true" if asyn else "false"}, "t": {time.time()!r}}}')

    def done_event(self, group: str, seq: int) -> str:
        """``{"event": "done", "group", "seq", "t"}``."""
        head = self._done.get(group)
        if head is None:
            head = self._done[group] = json.dumps({"event": "done", "group": group})[:-1]
        return f'{head}, "seq": {seq:d}, "t": {time.time()!r}}}'

    def record(self, event: Callable[[], str]) -> None:
        """Append ``event()``; a failure to make it is the log's loss, never the user's call's
        (nor does it hide the collective's own exception)."""
        try:
            line = event()
        except Exception:  # noqa: BLE001
            return
        self.log.append_line(line)

    def _wrap(self, orig: Callable[..., Any], op: str) -> Callable[..., Any]:
        rp = self
        names = compat.call_arguments(orig)
        # returns before the collective completes: async_op=True; a functional collective
        # (waited for when its result is used); batch_isend_irecv
        at = names.index("async_op") if "async_op" in names else None
        always_async = op.startswith("functional.") or op == "batch_isend_irecv"

        def collective(*args: Any, **kwargs: Any) -> Any:
            if torch.compiler.is_compiling() or getattr(rp.tls, "depth", 0):
                return orig(*args, **kwargs)
            try:
                group, members = compat.collective_group(op, names, args, kwargs)
                asyn = always_async or bool(kwargs.get(
                    "async_op", args[at] if at is not None and len(args) > at else False))
            except Exception:  # noqa: BLE001 - recording never breaks the user's collective
                group, members, asyn = "?", None, always_async
            with rp.lock:
                seq = rp.seq[group] = rp.seq.get(group, 0) + 1
            rp.record(lambda: rp.collective_event(op, group, members, seq, asyn))
            rp.tls.depth = 1
            try:
                return orig(*args, **kwargs)
            finally:
                rp.tls.depth = 0
                rp.record(lambda: rp.done_event(group, seq))

        collective.__wrapped__ = orig  # type: ignore[attr-defined]
        collective.__name__ = getattr(orig, "__name__", op)
        collective.__doc__ = getattr(orig, "__doc__", None)
        self.undo.append(compat.same_under_dynamo(collective, orig))
        return collective
