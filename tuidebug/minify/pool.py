"""A pool of warm worker processes that test candidate scripts in isolation.

Importing torch and Inductor costs seconds, so each worker (``tuidebug.minify.worker``) imports
them once and then tests many candidates. A worker that crashes (a segfault in generated code
or in a C++ compiler) or hangs past the candidate's timeout is killed — its whole process group,
which holds only what it started — and replaced; the candidate is reported as ``crashed`` or
``timeout``, and the minifier carries on. This module does not import torch.
"""

from __future__ import annotations

import itertools
import queue
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from tuidebug import proc


def child_env(extra: dict[str, str] | None = None, *, fast_compile: bool = False) -> dict[str, str]:
    """Environment for a child that runs candidates or repros: tuidebug importable, no
    repro/bisect knobs (:func:`tuidebug.proc.child_env`)."""
    return proc.child_env(extra, scrub_repro=True, fast_compile=fast_compile)


class _Worker:
    """One worker process (``tuidebug.minify.worker``) and its log."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.log = open(log_path, "ab")
        self.child = proc.JsonChild([sys.executable, "-m", "tuidebug.minify.worker"],
                                    env=env, log=self.log, cwd=log_path.parent)
        self.ready = False

    @property
    def alive(self) -> bool:
        return self.child.alive

    def wait_ready(self, timeout: float) -> str | None:
        """None when ready, else why not."""
        try:
            msg = self.child.receive(timeout)
        except proc.ReceiveTimeout:
            return f"the worker did not start within {timeout:.0f}s"
        except proc.ProtocolError as e:
            return f"unexpected worker output: {e}"
        if msg is None:
            return f"the worker exited while starting (status {self.child.returncode()})"
        self.ready = msg.get("event") == "ready"
        return None if self.ready else f"unexpected worker message: {str(msg)[:200]}"

    def request(self, msg: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        """The candidate's result; None when the worker died first. Raises ReceiveTimeout."""
        if not self.child.send(msg):
            return None
        reply = self.child.receive(timeout)
        if reply is None:
            return None
        return dict(reply.get("result") or {})

    def kill(self) -> None:
        """Kill the worker's process group (the worker and the compilers it started)."""
        self.child.kill()
        self.log.close()

    def died(self) -> dict[str, Any]:
        how = proc.exit_description(self.child.returncode())
        return {"outcome": "crashed", "returncode": self.child.returncode(),
                "message": f"the worker process died while testing the candidate ({how})"}


class WorkerPool:
    """``jobs`` warm workers; ``submit(path, timeout)`` returns a Future of the result dict."""

    def __init__(self, jobs: int = 2, log_dir: str | Path | None = None,
                 env: dict[str, str] | None = None, startup_timeout: float = 300.0) -> None:
        self.jobs = max(1, int(jobs))
        self.log_dir = Path(log_dir or ".")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.env = env or child_env(fast_compile=True)
        self.startup_timeout = startup_timeout
        self.launches = 0
        self.restarts = 0
        self._ids = itertools.count(1)
        self._queue: "queue.Queue[tuple[Future[dict[str, Any]], dict[str, Any], float] | None]" = \
            queue.Queue()
        self._lock = threading.Lock()
        self._workers: list[_Worker | None] = [None] * self.jobs
        self._closed = False
        for i in range(self.jobs):
            self._workers[i] = self._start(i)
        self._threads = [threading.Thread(target=self._loop, args=(i,), daemon=True,
                                          name=f"tuidebug-minify-{i}") for i in range(self.jobs)]
        for t in self._threads:
            t.start()

    def _start(self, i: int) -> _Worker:
        with self._lock:
            self.launches += 1
            n = self.launches
        return _Worker(self.env, self.log_dir / f"worker-{i}-{n}.log")

    def submit(self, path: str | Path, timeout: float,
               extra: dict[str, Any] | None = None) -> "Future[dict[str, Any]]":
        """Test the candidate script at ``path``; ``extra`` goes into the worker's request."""
        fut: Future[dict[str, Any]] = Future()
        self._queue.put((fut, {**(extra or {}), "path": str(path)}, float(timeout)))
        return fut

    def _loop(self, i: int) -> None:
        while True:
            item = self._queue.get()
            if item is None or self._closed:
                return
            fut, request, timeout = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(self._run(i, request, timeout))
            except BaseException as e:  # never leave a future unresolved
                fut.set_result({"outcome": "error", "message": f"{type(e).__name__}: {e}"})

    def _run(self, i: int, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        w = self._workers[i]
        if w is None or not w.alive:
            if w is not None:
                w.kill()
            w = self._workers[i] = self._start(i)
        if not w.ready:
            why = w.wait_ready(self.startup_timeout)
            if why:
                w.kill()
                self._workers[i] = None
                return {"outcome": "error", "message": why}
        t0 = time.perf_counter()
        try:
            reply = w.request({"op": "run", **request, "id": next(self._ids)}, timeout)
        except proc.ReceiveTimeout:
            result = {"outcome": "timeout", "message": f"no result within {timeout:.0f}s"}
        except proc.ProtocolError as e:
            result = {"outcome": "error", "message": f"unexpected worker output: {e}"}
        else:
            if reply is not None:
                return reply
            result = w.died()
        result["seconds"] = round(time.perf_counter() - t0, 3)
        w.kill()
        with self._lock:
            self.restarts += 1
        self._workers[i] = None if self._closed else self._start(i)  # warm up the replacement now
        return result

    def close(self) -> None:
        """Stop the workers (killing any that are still busy); cancel what has not started."""
        self._closed = True
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0].cancel()
        for _ in self._threads:
            self._queue.put(None)
        for w in self._workers:
            if w is not None:
                w.kill()
        self._workers = [None] * self.jobs

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
