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

Collectives issued by compiled code (Inductor's wrapper calling ``_c10d_functional`` /
``c10d`` op overloads; hook points in ``compat.compiled_collectives``) are logged too: each as
``{"event": "collective", …, "async": true, "compiled": {"graph", "index", "wrapper_line"}}``
(the graph whose wrapper issued it, the collective's index in its ``collectives.json``, the
wrapper's line; ``line`` the user's line from the graph's provenance) and ``done`` when the call
returned; its ``wait_tensor`` as ``{"event": "wait", "group", "seq"}`` before it blocks and
``{"event": "waited", …}`` after.

DistributedDataParallel's bucket all-reduces (its C++ reducer issues them from autograd hooks;
a logging comm hook, ``compat.ddp_reducer``) are ``{"event": "collective", "op": "all_reduce",
…, "async": true, "ddp": {"bucket", "last", "bytes"}}`` when issued and ``done`` when complete.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Callable

import torch

from tuidebug.compiler import compat
from tuidebug.trace.jobs.progress import ProgressLog

_SKIP_DIRS = tuple(os.path.dirname(os.path.dirname(m.__file__ or "")) + os.sep
                   for m in (sys.modules["torch"],) if getattr(m, "__file__", None))
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


# frames between compiled code's call of an op overload and its wrapper here
_NOT_CALLERS = (os.sep + "_ops.py", os.sep + "compiled_collectives.py")
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


class _InCollective(threading.local):
    """Per thread: inside a collective this module records (its own inner calls are not)."""

    def __init__(self) -> None:
        self.depth = 0


class RankProgress:
    """Records this rank's collectives into its progress log while installed."""

    def __init__(self, path: Path, warn: Callable[[str], None],
                 where: Callable[[str, int], dict[str, Any] | None] | None = None) -> None:
        self.log = ProgressLog(path)
        self.patcher = compat.Patcher(warn)
        self.seq: dict[str, int] = {}
        self.tls = _InCollective()
        self.lock = threading.RLock()  # a signal handler's collective must not deadlock
        self.undo: list[Callable[[], None]] = []
        # the constant part of each event, JSON-encoded once: per (op, group) and per group
        self._heads: dict[tuple[str, str], str] = {}
        self._done: dict[str, str] = {}
        self._lines: dict[str | None, str] = {}
        # a compiled collective, by (wrapper file, line): its graph, index and user line
        self.where = where
        self._where: dict[tuple[str, int], dict[str, Any]] = {}
        self._pending: dict[int, tuple[Any, str, int]] = {}  # id(result) -> (ref, group, seq)
        self.warn = warn

    def install(self) -> "RankProgress":
        """Wrap every collective; on a failure, everything wrapped so far is put back."""
        self.log.append({"event": "start", "t": time.time(), "pid": os.getpid()})
        # the log's bookkeeping, called by the wrappers from frames Dynamo may run eagerly
        # while compiling is on: never compiled as the user's frames (nor what it calls)
        for own in (RankProgress._issued, RankProgress.record):
            compat.own_frame_skipped(own, callees=True)
        try:
            for dotted, op in compat.collective_hook_points():
                self.patcher.wrap(dotted, lambda orig, op=op: self._wrap(orig, op))
        except BaseException:
            self.uninstall()
            raise
        try:
            for ns, name, overload in compat.collective_overloads():
                self.undo.append(compat.wrap_overload(
                    overload, lambda orig, ns=ns, name=name, o=overload:
                    self._wrap_compiled(orig, ns, name, o)))
        except compat.NotAvailable as e:
            self.warn(f"collectives issued by compiled code are not logged: {e}")
        self.undo.append(compat.log_ddp_buckets(self._ddp_issued, self._ddp_done, self.warn))
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

    def issued(self) -> int:
        """The collectives this process issued so far (every group's, of every kind: classic,
        compiled, DDP's buckets)."""
        with self.lock:
            return sum(self.seq.values())

    def record(self, event: Callable[[], str]) -> None:
        """Append ``event()``; a failure to make it is the log's loss, never the user's call's
        (nor does it hide the collective's own exception)."""
        try:
            line = event()
        except Exception:  # noqa: BLE001
            return
        self.log.append_line(line)

    def _issued(self, op: str, names: list[str], at: int | None, always_async: bool,
                args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, int]:
        """A collective the user's code is about to issue, logged: its group and number."""
        try:
            group, members = compat.collective_group(op, names, args, kwargs)
            asyn = always_async or bool(kwargs.get(
                "async_op", args[at] if at is not None and len(args) > at else False))
        except Exception:  # noqa: BLE001 - recording never breaks the user's collective
            group, members, asyn = "?", None, always_async
        with self.lock:
            seq = self.seq[group] = self.seq.get(group, 0) + 1
        self.record(lambda: self.collective_event(op, group, members, seq, asyn))
        return group, seq

    def _wrap(self, orig: Callable[..., Any], op: str) -> Callable[..., Any]:
        rp = self
        names = compat.call_arguments(orig)
        # returns before the collective completes: async_op=True; a functional collective
        # (waited for when its result is used); batch_isend_irecv
        at = names.index("async_op") if "async_op" in names else None
        always_async = op.startswith("functional.") or op == "batch_isend_irecv"

        def collective(*args: Any, **kwargs: Any) -> Any:
            if torch.compiler.is_compiling() or rp.tls.depth:
                return orig(*args, **kwargs)
            group, seq = rp._issued(op, names, at, always_async, args, kwargs)
            rp.tls.depth = 1
            try:
                result = orig(*args, **kwargs)
            finally:
                rp.tls.depth = 0
            # no done for a call that raised (Ctrl-C, a timeout): it never completed, and the
            # log keeps the rank in it
            rp.record(lambda: rp.done_event(group, seq))
            return result

        collective.__wrapped__ = orig  # type: ignore[attr-defined]
        collective.__name__ = getattr(orig, "__name__", op)
        collective.__doc__ = getattr(orig, "__doc__", None)
        self.undo.append(compat.same_under_dynamo(collective, orig))
        return collective

    # -- DDP's bucket all-reduces (its C++ reducer issues them) -----------------------------
    def _ddp_issued(self, bucket: int, last: bool, nbytes: int, pg: Any) -> tuple[str, int]:
        """A bucket all-reduce DDP's reducer is about to issue: logged as an asynchronous
        all_reduce of its group with ``"ddp": {"bucket", "last", "bytes"}``; what identifies
        its ``done`` (logged when it completes, from the thread that completes it)."""
        try:
            group, members = compat.collective_group("ddp", ["group"], (pg,), {})
        except Exception:  # noqa: BLE001
            group, members = "?", None
        with self.lock:
            seq = self.seq[group] = self.seq.get(group, 0) + 1
        line = _user_line()
        self.record(lambda: json.dumps(
            {"event": "collective", "op": "all_reduce", "group": group, "members": members,
             "seq": seq, "line": line, "async": True,
             "ddp": {"bucket": bucket, "last": last, "bytes": nbytes}, "t": time.time()},
            default=str))
        return group, seq

    def _ddp_done(self, token: tuple[str, int]) -> None:
        self.record(lambda: self.done_event(*token))

    # -- collectives issued by compiled code --------------------------------------------------
    def _compiled_where(self, frame: Any) -> dict[str, Any]:
        """Where compiled code issued a collective: the wrapper's frame (file, line) mapped to
        its graph, the collective's index and the user's line (``where``); cached per line."""
        key = (frame.f_code.co_filename, frame.f_lineno)
        got = self._where.get(key)
        if got is None:
            got = (self.where(*key) if self.where else None) or {}
            got = {"graph": got.get("graph"), "index": got.get("index"),
                   "wrapper_line": key[1], "line": got.get("line")}
            if got["graph"] is not None and got["index"] is not None:
                self._where[key] = got  # known for good once its graph is finished
        return got

    def _wrap_compiled(self, orig: Callable[..., Any], ns: str, name: str,
                       overload: Any) -> Callable[..., Any]:
        rp = self
        names = compat.call_arguments_of(overload)
        if (ns, name) == compat.WAIT_OP:
            return self._wrap_wait(orig)
        op = name.rstrip("_")

        def compiled_collective(*args: Any, **kwargs: Any) -> Any:
            if rp.tls.depth or not compat.real_tensors(args):
                return orig(*args, **kwargs)
            try:
                f = sys._getframe(1)
                while f is not None and f.f_code.co_filename.endswith(_NOT_CALLERS):
                    f = f.f_back  # OpOverload.__call__, the stand-in for its _op
                where = rp._compiled_where(f) if f is not None else {}
                group, members = compat.compiled_call_group(names, args, kwargs)
            except Exception:  # noqa: BLE001 - recording never breaks the collective
                where, group, members = {}, "?", None
            with rp.lock:
                seq = rp.seq[group] = rp.seq.get(group, 0) + 1
            rp.record(lambda: json.dumps(
                {"event": "collective", "op": op, "group": group, "members": members,
                 "seq": seq, "line": where.get("line"), "async": True,
                 "compiled": {k: where.get(k) for k in ("graph", "index", "wrapper_line")},
                 "t": time.time()}, default=str))
            rp.tls.depth = 1
            try:
                result = orig(*args, **kwargs)
            finally:
                rp.tls.depth = 0
            rp.record(lambda: rp.done_event(group, seq))  # not for a call that raised
            try:
                for r in (result if isinstance(result, (list, tuple)) else [result]):
                    rp._pending[id(r)] = (weakref.ref(r), group, seq)
            except TypeError:
                pass
            return result
        return compiled_collective

    def _wrap_wait(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        rp = self

        def wait_tensor(*args: Any, **kwargs: Any) -> Any:
            t = args[0] if args else kwargs.get("input")
            got = rp._pending.pop(id(t), None) if not rp.tls.depth else None
            if got is None or got[0]() is not t:
                return orig(*args, **kwargs)
            _, group, seq = got
            rest = json.dumps({"group": group, "seq": seq})[1:-1]
            rp.record(lambda: f'{{"event": "wait", {rest}, "t": {time.time()!r}}}')
            try:
                return orig(*args, **kwargs)
            finally:
                rp.record(lambda: f'{{"event": "waited", {rest}, "t": {time.time()!r}}}')
        return wait_tensor
