"""The worker's server (imports torch): reads jobs on stdin, runs each in a child (forked from
the warm server, or a fresh interpreter once CUDA is initialised), enforces timeouts, forwards
the children's progress and output, and reports each job's result.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from typing import IO, Any

from tuidebug import proc
from tuidebug.errors import RecompileError
from tuidebug.compiler.recompile_spec import RecompileSpec
from tuidebug.compiler.worker.child import JobChild
from tuidebug.compiler.worker.job_result import JobResult
from tuidebug.compiler.worker.warmup import warmup

__all__ = ["Server"]


class Server:
    """Reads requests on stdin, runs each job in a child, sends events on ``proto``."""

    def __init__(self, proto: IO[str], proto_fd: int, warmup: bool) -> None:
        self.proto = proto
        self.proto_fd = proto_fd  # closed in forked jobs: only the server speaks the protocol
        self.do_warmup = warmup
        self.queue: collections.deque[tuple[int, RecompileSpec]] = collections.deque()
        self.running: dict[int, JobChild] = {}
        self.max_parallel = int(os.environ.get("TUIDEBUG_WORKER_PARALLEL", "1") or 1)
        self.stdin_buf = proc.LineBuffer()
        self.exiting = False
        # "fork" (warm: the default) or "spawn" (a fresh interpreter per job)
        self.start_method = os.environ.get("TUIDEBUG_WORKER_START", "fork")

    def send(self, msg: dict[str, Any]) -> None:
        if not proc.write_message(self.proto, msg):
            self.exiting = True

    # -- start-up ---------------------------------------------------------------------------------
    def boot(self) -> None:
        t0 = time.perf_counter()
        import torch

        from tuidebug.compiler import compat

        compat.import_inductor()
        import_s = time.perf_counter() - t0
        warm_s = 0.0
        note = None
        if self.do_warmup and torch.cuda.is_available():
            # A compile initialises CUDA (Dynamo saves the CUDA RNG state around tracing), and
            # a forked job could then not use it: with a GPU, jobs fork from the imported but
            # not warmed-up server.
            note = "compile warm-up skipped: a CUDA device is visible"
        elif self.do_warmup:
            t1 = time.perf_counter()
            try:
                warmup()
            except Exception as e:  # a failed warm-up only costs speed
                note = f"warm-up failed: {type(e).__name__}: {e}"
            warm_s = time.perf_counter() - t1
        threads = threading.active_count()
        cuda = bool(torch.cuda.is_available())
        if torch.cuda.is_initialized():
            # a forked child could not use CUDA: run each job in a fresh interpreter instead
            self.start_method = "spawn"
            note = (note + "; " if note else "") + ("CUDA was initialised in the worker: jobs "
                                                    "run in fresh processes (no warm start)")
        self.send({"event": "ready", "pid": os.getpid(), "torch": torch.__version__,
                   "cuda": cuda, "start_method": self.start_method, "import_s": round(import_s, 3),
                   "warmup_s": round(warm_s, 3), "threads": threads,
                   **({"note": note} if note else {})})

    # -- main loop --------------------------------------------------------------------------------
    def serve(self) -> None:
        import selectors

        self.sel = selectors.DefaultSelector()
        os.set_blocking(0, False)
        self.sel.register(0, selectors.EVENT_READ, ("stdin", None))
        while not (self.exiting and not self.running):
            for key, _ in self.sel.select(timeout=0.2):
                kind, child = key.data
                if kind == "stdin":
                    self._read_stdin()
                else:
                    child.read(key.fd, self)
            self._reap()
            self._enforce_timeouts()
            self._start_queued()
        self.sel.close()

    def _read_stdin(self) -> None:
        try:
            data = os.read(0, 65536)
        except BlockingIOError:
            return
        if not data:  # the client is gone: stop everything
            self.sel.unregister(0)
            self.exiting = True
            self.queue.clear()
            for child in self.running.values():
                child.kill()
            return
        for line in self.stdin_buf.feed(data):
            try:
                msg = proc.decode(line)
            except proc.ProtocolError:
                continue
            self._command(msg)

    def _command(self, msg: dict[str, Any]) -> None:
        op = msg.get("op")
        if op == "job":
            try:  # the one place a job's spec is read back and validated
                self.queue.append((int(msg["id"]), RecompileSpec.from_json(msg.get("spec"))))
            except RecompileError as e:
                self.send({"event": "done", "id": msg.get("id"), "result": JobResult(
                    "error", error=f"a bad job spec: {e}").to_json()})
        elif op == "cancel":
            jid = msg.get("id")
            for item in list(self.queue):
                if item[0] == jid:
                    self.queue.remove(item)
                    self.send({"event": "done", "id": jid,
                               "result": JobResult("cancelled", error="cancelled").to_json()})
            child = self.running.get(jid)  # type: ignore[arg-type]
            if child is not None:
                child.cancelled = True
                child.kill()
        elif op == "ping":
            self.send({"event": "pong", "running": list(self.running), "queued": len(self.queue)})
        elif op == "exit":
            self.exiting = True
            self.queue.clear()
            for child in self.running.values():
                child.cancelled = True
                child.kill()

    def _start_queued(self) -> None:
        while self.queue and len(self.running) < self.max_parallel and not self.exiting:
            jid, spec = self.queue.popleft()
            try:
                child = (JobChild.fork(jid, spec, self.proto_fd) if self.start_method == "fork"
                         else JobChild.spawn(jid, spec))
            except Exception as e:
                self.send({"event": "done", "id": jid, "result": JobResult(
                    "error", error=f"could not start the job: {type(e).__name__}: {e}").to_json()})
                continue
            self.running[jid] = child
            import selectors

            for fd in (child.out_fd, child.msg_fd):
                self.sel.register(fd, selectors.EVENT_READ, ("child", child))
            self.send({"event": "started", "id": jid, "pid": child.pid})

    def _enforce_timeouts(self) -> None:
        now = time.monotonic()
        for child in self.running.values():
            if not child.timed_out and child.timeout and now - child.started > child.timeout:
                child.timed_out = True
                child.kill()

    def _reap(self) -> None:
        for jid, child in list(self.running.items()):
            try:
                pid, status = os.waitpid(child.pid, os.WNOHANG)
            except ChildProcessError:
                pid, status = child.pid, 0
            if pid == 0:
                continue
            child.kill()  # anything left in its process group (a C++ compiler)
            for fd in (child.out_fd, child.msg_fd):
                child.drain(fd, self)
                try:
                    self.sel.unregister(fd)
                except (KeyError, ValueError):
                    pass
                os.close(fd)
            del self.running[jid]
            self.send({"event": "done", "id": jid, "result": child.result(status).to_json()})
