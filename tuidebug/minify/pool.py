"""A pool of warm worker processes that test candidate scripts in isolation.

Importing torch and Inductor costs seconds, so each worker (``tuidebug.minify.worker``) imports
them once and then tests many candidates. A worker that crashes (a segfault in generated code
or in a C++ compiler) or hangs past the candidate's timeout is killed — its whole process group,
which holds only what it started — and replaced; the candidate is reported as ``crashed`` or
``timeout``, and the minifier carries on. This module does not import torch.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
_SCRUB = ("TORCHDYNAMO_REPRO_AFTER", "TORCHDYNAMO_REPRO_LEVEL", "TORCH_BISECT_BACKEND",
          "TORCH_BISECT_SUBSYSTEM", "TORCH_BISECT_MAX", "TUIDEBUG_REPRO_RESULT")


def child_env(extra: dict[str, str] | None = None, *, fast_compile: bool = False) -> dict[str, str]:
    """Environment for a child that runs candidates: tuidebug importable, no repro/bisect knobs.

    ``fast_compile`` keeps Inductor from starting its own pool of compile processes (one per
    worker would oversubscribe the machine; a candidate has only a few kernels anyway).
    """
    env = dict(os.environ)
    for k in _SCRUB:
        env.pop(k, None)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    if fast_compile:
        env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    env.update(extra or {})
    return env


class _LineReader:
    """Reads lines from a pipe with a timeout."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = b""

    def readline(self, timeout: float) -> bytes | None:
        """A line (b"" at end of file), or None when ``timeout`` seconds pass first."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self.fd], [], [], min(remaining, 0.5))
            if ready:
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    out, self.buf = self.buf, b""
                    return out
                self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line + b"\n"


class _Worker:
    """One worker process and its pipes."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tuidebug.minify.worker"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.log, env=env, cwd=str(log_path.parent),
            start_new_session=True)
        assert self.proc.stdout is not None
        self.reader = _LineReader(self.proc.stdout.fileno())
        self.ready = False

    def wait_ready(self, timeout: float) -> str | None:
        """None when ready, else why not."""
        line = self.reader.readline(timeout)
        if line is None:
            return f"the worker did not start within {timeout:.0f}s"
        if not line:
            return f"the worker exited while starting (status {self.proc.wait()})"
        try:
            self.ready = bool(json.loads(line).get("ready"))
        except json.JSONDecodeError:
            return f"unexpected worker output: {line[:200]!r}"
        return None

    def request(self, obj: dict[str, Any], timeout: float) -> dict[str, Any] | None | bytes:
        """The reply; None on timeout; b"" when the worker died."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(obj) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return b""
        line = self.reader.readline(timeout)
        if line is None or not line:
            return line
        return dict(json.loads(line))

    def kill(self) -> None:
        """Kill the worker's process group (the worker and the compilers it started)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                if f:
                    f.close()
            except OSError:
                pass
        self.log.close()

    def died(self) -> dict[str, Any]:
        rc = self.proc.wait()
        try:
            how = f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}"
        except ValueError:
            how = f"status {rc}"
        return {"outcome": "crashed", "returncode": rc,
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
        if w is None or w.proc.poll() is not None:
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
        reply = w.request({**request, "id": next(self._ids)}, timeout)
        if isinstance(reply, dict):
            return reply
        result = ({"outcome": "timeout", "message": f"no result within {timeout:.0f}s"}
                  if reply is None else w.died())
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
