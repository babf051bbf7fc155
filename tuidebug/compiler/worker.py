"""The warm recompile worker.

A long-lived server process (``python -m tuidebug.compiler.worker``) imports torch and Inductor
once, warms them up with a small throw-away compile (lazy imports, pattern-matcher tables, the
CPU ISA probe, the C++ compiler's first run), resets Dynamo, and then runs every job in a fresh
child made with ``os.fork()``: each job starts with clean Dynamo state and pays no import or
warm-up cost. A job that crashes (segfault, ``os.abort()``), hangs past its timeout or fails to
compile is reported; the server goes on serving the next job.

The client, :class:`RecompileWorker`, never imports torch (the TUI uses it)::

    w = RecompileWorker(timeout=300).start()
    job = w.submit("traces/mlp", ["max_fusion_size=1"])       # validated against the registry
    job.wait()
    print(job.state, job.out, job.result)                       # "ok", Path(...), {...}
    w.close()

Callbacks (``on_progress(job, message)``, ``on_done(job)``) run on the client's reader thread; a
Textual app should hand them to its own thread (``App.call_from_thread``).

Protocol: JSON lines. Client → server ``{"op": "job", "id", "spec"}``, ``{"op": "cancel", "id"}``,
``{"op": "ping"}``, ``{"op": "exit"}``. Server → client ``{"event": "hello"}``, ``{"event":
"ready", "torch", "cuda", "import_s", "warmup_s"}``, ``{"event": "started", "id", "pid"}``,
``{"event": "progress", "id", "message"}``, ``{"event": "phase", "id", "phase", "graph"}``,
``{"event": "output", "id", "line"}``, ``{"event": "done", "id", "result"}``, ``{"event": "pong"}``,
``{"event": "log", "message"}``.
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Mapping

from tuidebug.errors import WorkerError

__all__ = ["RecompileWorker", "RecompileJob", "WorkerError", "JOB_STATES"]

ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_TIMEOUT = 900.0
OUTPUT_TAIL = 200  # lines of a job's stdout/stderr kept for its report
JOB_STATES = ("queued", "running", "ok", "failed", "crashed", "timeout", "cancelled", "error")
_FINAL = {"ok", "failed", "crashed", "timeout", "cancelled", "error"}


# =================================================================================================
# client side (torch-free)
# =================================================================================================

@dataclass
class RecompileJob:
    """One recompile (or trace) job. Its fields are updated by the worker's reader thread.

    ``state``: queued → running → ok | failed | crashed | timeout | cancelled | error.
    ``ok``: the new trace was written and compiled fine. ``failed``: the job ran, the trace records
    a failure (compile error, eager mismatch, the script raised). ``crashed``: the job's process
    died (signal, abort) or the worker died under it; the trace shows how far it got.
    ``timeout``: killed after ``timeout`` seconds. ``error``: could not be run at all.
    """

    id: int
    spec: dict[str, Any]
    timeout: float
    state: str = "queued"
    phase: str | None = None
    messages: list[str] = field(default_factory=list)
    output: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=OUTPUT_TAIL))
    pid: int | None = None
    submitted_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    result: dict[str, Any] | None = None
    on_progress: Callable[["RecompileJob", str], None] | None = None
    on_done: Callable[["RecompileJob"], None] | None = None
    _event: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def out(self) -> Path:
        return Path(self.spec["out"])

    @property
    def source(self) -> Path | None:
        s = self.spec.get("source_trace")
        return Path(s) if s else None

    @property
    def sets(self) -> dict[str, Any]:
        return dict(self.spec.get("sets") or {})

    @property
    def done(self) -> bool:
        return self.state in _FINAL

    @property
    def ok(self) -> bool:
        return self.state == "ok"

    @property
    def elapsed_s(self) -> float | None:
        if self.started_at is None:
            return None
        return (self.finished_at or time.time()) - self.started_at

    @property
    def error(self) -> str | None:
        return (self.result or {}).get("error")

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the job is finished; False if ``timeout`` passed first."""
        return self._event.wait(timeout)

    def summary(self) -> str:
        """One line for a status bar."""
        from tuidebug.compiler.recompile import format_sets

        what = format_sets(self.sets) or "no flag change"
        t = f" in {self.elapsed_s:.1f}s" if self.elapsed_s is not None else ""
        if self.state == "running":
            return f"recompiling ({what}): {self.phase or 'starting'}{t}"
        if self.state == "queued":
            return f"queued: {what}"
        tail = f": {self.error}" if self.error and self.state != "ok" else ""
        return f"{self.state} ({what}){t}{tail}"


class RecompileWorker:
    """Client of the warm worker process. Thread-safe; never imports torch.

    ``timeout``: seconds a job may run before it is killed and reported (per job overridable).
    ``use_cache``: let a job's ``--set fx_graph_cache=…`` decide the graph-level caches (they are
    off otherwise; the kernel code cache is always on: see ``recompile.py``).
    ``warmup``: warm the server up with a small compile before the first job (on by default;
    the CLI's one-shot ``recompile`` turns it off). ``max_parallel``: jobs run at once.
    ``on_progress`` / ``on_done``: defaults for jobs that do not pass their own.
    """

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT, use_cache: bool = True,
                 warmup: bool = True, max_parallel: int = 1, python: str | None = None,
                 env: Mapping[str, str] | None = None,
                 on_progress: Callable[[RecompileJob, str], None] | None = None,
                 on_done: Callable[[RecompileJob], None] | None = None,
                 max_restarts: int = 3) -> None:
        self.timeout = float(timeout)
        self.use_cache = use_cache
        self.warmup = warmup
        self.max_parallel = max(1, int(max_parallel))
        self.python = python or sys.executable
        self.extra_env = dict(env or {})
        self.on_progress = on_progress
        self.on_done = on_done
        self.max_restarts = max_restarts
        self.info: dict[str, Any] = {}  # from the server's "ready": torch, cuda, import_s, warmup_s
        self.restarts = 0
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._jobs: dict[int, RecompileJob] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._watchdog: threading.Thread | None = None
        self._ready = threading.Event()
        self._closed = False
        self._deaths_before_ready = 0
        self._log: IO[bytes] | None = None
        self.log_path: Path | None = None

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> "RecompileWorker":
        with self._lock:
            if self._closed:
                raise WorkerError("the worker was closed")
            if self._proc is not None and self._proc.poll() is None:
                return self
            self._spawn()
            if self._watchdog is None:
                self._watchdog = threading.Thread(target=self._watch, name="tuidebug-worker-watchdog",
                                                  daemon=True)
                self._watchdog.start()
        return self

    def _spawn(self) -> None:
        env = dict(os.environ)
        env.update(self.extra_env)
        env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env.setdefault("PYTHONUNBUFFERED", "1")
        env["TUIDEBUG_WORKER_PARALLEL"] = str(self.max_parallel)
        if self._log is None:
            fd, name = tempfile.mkstemp(prefix="tuidebug-worker-", suffix=".log")
            self._log = os.fdopen(fd, "wb")
            self.log_path = Path(name)
        cmd = [self.python, "-m", "tuidebug.compiler.worker", "--serve"]
        if not self.warmup:
            cmd.append("--no-warmup")
        self._ready.clear()
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._log, env=env, start_new_session=True)
        self._reader = threading.Thread(target=self._read, args=(self._proc,),
                                        name="tuidebug-worker-reader", daemon=True)
        self._reader.start()
        # jobs queued or sent to a server that died are (re)sent to this one
        for job in sorted(self._jobs.values(), key=lambda j: j.id):
            if job.state == "queued":
                self._send({"op": "job", "id": job.id, "spec": job.spec})

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until the server has imported torch and warmed up."""
        return self._ready.wait(timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Stop the server; running jobs are killed and reported as cancelled."""
        with self._lock:
            self._closed = True
            proc = self._proc
            for job in self._jobs.values():
                if not job.done:
                    self._kill_job_process(job)
                    self._finish(job, "cancelled", {"error": "the worker was closed"})
        if proc is not None and proc.poll() is None:
            try:
                self._send({"op": "exit"})
                proc.wait(timeout)
            except Exception:
                pass
            if proc.poll() is None:
                _killpg(proc.pid)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    pass
        for stream in (proc.stdin, proc.stdout) if proc else ():
            try:
                stream.close()  # type: ignore[union-attr]
            except Exception:
                pass
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.log_path is not None:
            try:
                self.log_path.unlink()
            except OSError:
                pass

    def __enter__(self) -> "RecompileWorker":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- jobs -------------------------------------------------------------------------------------
    def submit(self, trace_path: str | os.PathLike[str],
               sets: Iterable[str] | Mapping[str, Any] | None,
               out: str | os.PathLike[str] | None = None, *, timeout: float | None = None,
               use_cache: bool | None = None, env: Mapping[str, str] | None = None,
               on_progress: Callable[[RecompileJob, str], None] | None = None,
               on_done: Callable[[RecompileJob], None] | None = None) -> RecompileJob:
        """Recompile ``trace_path`` with ``sets`` (``["NAME=VALUE", ...]`` or ``{name: value}``)
        into ``out`` (default ``<trace>-<flag>=<value>`` beside it). ``env``: variables set in
        the job's process (e.g. ``TORCHINDUCTOR_CACHE_DIR``).

        Raises ``UnknownFlag`` / ``FlagValueError`` / ``RecompileError`` at once for bad input.
        """
        from tuidebug.compiler import recompile

        parsed = recompile.parse_sets(sets)
        spec = recompile.recompile_spec(trace_path, parsed, out, env=env,
                                        use_cache=self.use_cache if use_cache is None else use_cache)
        return self.submit_spec(spec, timeout=timeout, on_progress=on_progress, on_done=on_done)

    def submit_script(self, script: str | os.PathLike[str], args: Iterable[str] = (),
                      sets: Iterable[str] | Mapping[str, Any] | None = None,
                      out: str | os.PathLike[str] = "", *, cwd: str | None = None,
                      check: bool = True, timeout: float | None = None,
                      use_cache: bool | None = None, env: Mapping[str, str] | None = None,
                      on_progress: Callable[[RecompileJob, str], None] | None = None,
                      on_done: Callable[[RecompileJob], None] | None = None) -> RecompileJob:
        """Trace ``script`` (as ``tuidebug trace`` does) with ``sets``, in the warm worker."""
        from tuidebug.compiler import recompile

        parsed = recompile.parse_sets(sets)
        spec = recompile.script_spec(script, args, parsed, out, cwd=cwd, check=check, env=env,
                                     use_cache=self.use_cache if use_cache is None else use_cache)
        return self.submit_spec(spec, timeout=timeout, on_progress=on_progress, on_done=on_done)

    def submit_spec(self, spec: dict[str, Any], *, timeout: float | None = None,
                    on_progress: Callable[[RecompileJob, str], None] | None = None,
                    on_done: Callable[[RecompileJob], None] | None = None) -> RecompileJob:
        with self._lock:
            if self._closed:
                raise WorkerError("the worker was closed")
            t = float(timeout if timeout is not None else spec.get("timeout") or self.timeout)
            spec = {**spec, "timeout": t}
            job = RecompileJob(id=next(self._ids), spec=spec, timeout=t,
                               on_progress=on_progress or self.on_progress,
                               on_done=on_done or self.on_done)
            self._jobs[job.id] = job
            if not self.alive:
                self.start()  # sends every queued job, this one included
            else:
                self._send({"op": "job", "id": job.id, "spec": spec})
        return job

    def prime(self, trace_path: str | os.PathLike[str], *, timeout: float | None = None,
              on_done: Callable[[RecompileJob], None] | None = None) -> RecompileJob:
        """Recompile ``trace_path`` unchanged into a temporary directory (removed when done).

        With caches on, this fills Inductor's kernel cache with the trace's kernels, so that a
        later flag change compiles only the kernels it changes. Meant to run in the background
        when a trace is opened; ``tuidebug diff`` of its output against the trace is empty.
        """
        out = Path(tempfile.mkdtemp(prefix="tuidebug-prime-"))

        def done(job: RecompileJob) -> None:
            import shutil

            shutil.rmtree(out, ignore_errors=True)
            if on_done:
                on_done(job)

        return self.submit(trace_path, {}, out, timeout=timeout, on_done=done)

    def cancel(self, job: RecompileJob) -> None:
        with self._lock:
            if job.done:
                return
            self._send({"op": "cancel", "id": job.id})
            if job.state == "queued":
                self._finish(job, "cancelled", {"error": "cancelled"})

    @property
    def jobs(self) -> list[RecompileJob]:
        return list(self._jobs.values())

    def log_tail(self, n: int = 40) -> str:
        """The last lines the server wrote on its stderr (for error reports)."""
        if not self.log_path:
            return ""
        try:
            if self._log:
                self._log.flush()
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    # -- internals --------------------------------------------------------------------------------
    def _send(self, msg: dict[str, Any]) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.poll() is not None:
            return
        try:
            proc.stdin.write((json.dumps(msg) + "\n").encode())
            proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass  # the reader sees the server die and restarts it

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            try:
                msg = json.loads(raw.decode("utf-8", "replace"))
            except ValueError:
                continue
            if isinstance(msg, dict):
                try:
                    self._handle(msg)
                except Exception:  # a broken callback must not kill the reader
                    pass
        proc.wait()
        self._server_died(proc)

    def _handle(self, msg: dict[str, Any]) -> None:
        ev = msg.get("event")
        if ev == "ready":
            self.info = {k: v for k, v in msg.items() if k != "event"}
            self._deaths_before_ready = 0
            self._ready.set()
            return
        job = self._jobs.get(msg.get("id"))  # type: ignore[arg-type]
        if job is None or job.done:
            return
        if ev == "started":
            job.state, job.pid, job.started_at = "running", msg.get("pid"), time.time()
            self._notify(job, "started")
        elif ev == "progress":
            self._notify(job, str(msg.get("message")))
        elif ev == "phase":
            job.phase = msg.get("phase")
            graph = f" ({msg['graph']})" if msg.get("graph") else ""
            self._notify(job, f"phase {job.phase}{graph}")
        elif ev == "output":
            job.output.append(str(msg.get("line")))
        elif ev == "done":
            result = msg.get("result") or {}
            self._finish(job, str(result.get("state", "crashed")), result)

    def _notify(self, job: RecompileJob, message: str) -> None:
        job.messages.append(message)
        if job.on_progress:
            job.on_progress(job, message)

    def _finish(self, job: RecompileJob, state: str, result: dict[str, Any]) -> None:
        with self._lock:
            if job.done:
                return
            job.state = state
            job.finished_at = time.time()
            if job.started_at is None:
                job.started_at = job.finished_at
            job.result = {**result, "state": state, "out": job.spec["out"],
                          "elapsed_s": job.elapsed_s}
            if job.output and "output_tail" not in job.result:
                job.result["output_tail"] = "\n".join(list(job.output)[-40:])
        job._event.set()
        if job.on_done:
            try:
                job.on_done(job)
            except Exception:
                pass

    def _kill_job_process(self, job: RecompileJob) -> None:
        if job.pid:
            _killpg(job.pid)

    def _server_died(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            if proc is not self._proc:
                return
            code = proc.returncode
            if self._closed:
                return
            why = f"the worker process died (exit code {code})"
            for job in self._jobs.values():
                if job.state == "running":
                    self._kill_job_process(job)
                    self._finish(job, "crashed", {"error": why + " while running this job",
                                                  "worker_log": self.log_tail()})
            if not self._ready.is_set():
                self._deaths_before_ready += 1
            self.restarts += 1
            pending = [j for j in self._jobs.values() if j.state == "queued"]
            if self._deaths_before_ready >= self.max_restarts:
                for job in pending:
                    self._finish(job, "error", {"error": why + "; it could not be restarted",
                                                "worker_log": self.log_tail()})
                return
            self._spawn()  # a new server picks up the queued jobs

    def _watch(self) -> None:
        """Kill jobs the server did not time out (a hung server), and restart it."""
        while not self._closed:
            time.sleep(0.5)
            with self._lock:
                now = time.time()
                for job in list(self._jobs.values()):
                    if job.state == "running" and job.started_at and \
                            now - job.started_at > job.timeout + 15:
                        self._kill_job_process(job)
                        self._finish(job, "timeout", {
                            "error": f"timed out after {job.timeout:.0f}s (the worker did not "
                                     "stop it; restarted the worker)"})
                        if self._proc is not None and self._proc.poll() is None:
                            _killpg(self._proc.pid)  # the reader restarts it


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass


# =================================================================================================
# server side (imports torch)
# =================================================================================================

class _Server:
    def __init__(self, proto: IO[str], warmup: bool) -> None:
        self.proto = proto
        self.do_warmup = warmup
        self.queue: collections.deque[tuple[int, dict[str, Any]]] = collections.deque()
        self.running: dict[int, _Child] = {}
        self.max_parallel = int(os.environ.get("TUIDEBUG_WORKER_PARALLEL", "1") or 1)
        self.stdin_buf = b""
        self.exiting = False
        # "fork" (warm: the default) or "spawn" (a fresh interpreter per job)
        self.start_method = os.environ.get("TUIDEBUG_WORKER_START", "fork")

    def send(self, msg: dict[str, Any]) -> None:
        try:
            self.proto.write(json.dumps(msg, default=str) + "\n")
            self.proto.flush()
        except (BrokenPipeError, OSError, ValueError):
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
                _warmup()
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
        self.stdin_buf += data
        while b"\n" in self.stdin_buf:
            line, self.stdin_buf = self.stdin_buf.split(b"\n", 1)
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            self._command(msg)

    def _command(self, msg: dict[str, Any]) -> None:
        op = msg.get("op")
        if op == "job":
            self.queue.append((int(msg["id"]), dict(msg["spec"])))
        elif op == "cancel":
            jid = msg.get("id")
            for item in list(self.queue):
                if item[0] == jid:
                    self.queue.remove(item)
                    self.send({"event": "done", "id": jid,
                               "result": {"state": "cancelled", "error": "cancelled"}})
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
                child = (_Child.fork if self.start_method == "fork" else _Child.spawn)(jid, spec)
            except Exception as e:
                self.send({"event": "done", "id": jid, "result": {
                    "state": "error", "error": f"could not start the job: {type(e).__name__}: {e}"}})
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
            self.send({"event": "done", "id": jid, "result": child.result(status)})


class _Child:
    """One job: a forked child with its stdout+stderr and its message pipe."""

    def __init__(self, jid: int, spec: dict[str, Any], pid: int, out_fd: int, msg_fd: int) -> None:
        self.jid, self.spec, self.pid = jid, spec, pid
        self.out_fd, self.msg_fd = out_fd, msg_fd
        self.bufs: dict[int, bytes] = {out_fd: b"", msg_fd: b""}
        self.started = time.monotonic()
        self.timeout = float(spec.get("timeout") or 0)
        self.timed_out = False
        self.cancelled = False
        self.tail: collections.deque[str] = collections.deque(maxlen=60)
        self.proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def fork(cls, jid: int, spec: dict[str, Any]) -> "_Child":
        out_r, out_w = os.pipe()
        msg_r, msg_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the job
            code = 70
            try:
                os.setpgid(0, 0)
                os.close(out_r)
                os.close(msg_r)
                if _PROTO_FD is not None:
                    os.close(_PROTO_FD)  # only the server speaks the protocol
                _child_main(spec, out_w, msg_w)
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
            except BaseException:
                import traceback

                try:
                    traceback.print_exc()
                except Exception:
                    pass
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                except Exception:
                    pass
                os._exit(code)
        os.close(out_w)
        os.close(msg_w)
        os.set_blocking(out_r, False)
        os.set_blocking(msg_r, False)
        return cls(jid, spec, pid, out_r, msg_r)

    @classmethod
    def spawn(cls, jid: int, spec: dict[str, Any]) -> "_Child":
        """The job in a fresh interpreter (when forking is not safe, e.g. CUDA is initialised)."""
        out_r, out_w = os.pipe()
        msg_r, msg_w = os.pipe()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tuidebug.compiler.worker", "--job", json.dumps(spec),
                 "--msg-fd", str(msg_w)],
                stdin=subprocess.DEVNULL, stdout=out_w, stderr=out_w, pass_fds=(msg_w,),
                start_new_session=True, close_fds=True)
        finally:
            os.close(out_w)
            os.close(msg_w)
        os.set_blocking(out_r, False)
        os.set_blocking(msg_r, False)
        child = cls(jid, spec, proc.pid, out_r, msg_r)
        child.proc = proc
        return child

    def kill(self) -> None:
        _killpg(self.pid)

    def read(self, fd: int, server: _Server) -> None:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # EOF: stop watching it (the child may live on with its stdio closed)
            try:
                server.sel.unregister(fd)
            except (KeyError, ValueError):
                pass
            return
        self._lines(fd, data, server)

    def drain(self, fd: int, server: _Server) -> None:
        while True:
            try:
                data = os.read(fd, 65536)
            except (BlockingIOError, OSError):
                break
            if not data:
                break
            self._lines(fd, data, server)
        rest = self.bufs.get(fd, b"")
        if rest:
            self.bufs[fd] = b""
            self._line(fd, rest, server)

    def _lines(self, fd: int, data: bytes, server: _Server) -> None:
        buf = self.bufs[fd] + data
        *lines, buf = buf.split(b"\n")
        self.bufs[fd] = buf
        for line in lines:
            self._line(fd, line, server)

    def _line(self, fd: int, raw: bytes, server: _Server) -> None:
        text = raw.decode("utf-8", "replace").rstrip("\r")
        if fd == self.out_fd:
            self.tail.append(text)
            server.send({"event": "output", "id": self.jid, "line": text})
            return
        try:
            msg = json.loads(text)
        except ValueError:
            return
        if msg.get("type") == "phase":
            server.send({"event": "phase", "id": self.jid, "phase": msg.get("phase"),
                         "graph": msg.get("graph")})
        elif msg.get("type") == "progress":
            server.send({"event": "progress", "id": self.jid, "message": msg.get("message")})
        elif msg.get("type") == "exit":
            self.exit_code = msg.get("code")

    def result(self, status: int) -> dict[str, Any]:
        from tuidebug.compiler import run_script as rs

        elapsed = time.monotonic() - self.started
        out: dict[str, Any] = {"elapsed_s": round(elapsed, 3),
                               "output_tail": "\n".join(self.tail)}
        manifest = _read_manifest(Path(self.spec["out"]))
        if manifest:
            out["trace_status"] = manifest.get("status")
            out["trace_phase"] = manifest.get("phase")
            err = manifest.get("error")
            if isinstance(err, dict):
                out["trace_error"] = {k: err.get(k) for k in ("phase", "type", "message", "graph")}
                if isinstance(out["trace_error"].get("message"), str):
                    out["trace_error"]["message"] = out["trace_error"]["message"][:2000]
            out["graphs"] = len(manifest.get("graphs") or [])
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = str(sig)
            out["signal"] = name
            if self.timed_out:
                out.update(state="timeout", error=f"timed out after {self.timeout:.0f}s; killed "
                                                  f"during phase {out.get('trace_phase')!r}")
            elif self.cancelled:
                out.update(state="cancelled", error="cancelled")
            else:
                out.update(state="crashed", error=f"the job's process died ({name}) during phase "
                                                  f"{out.get('trace_phase')!r}")
            return out
        code = os.WEXITSTATUS(status)
        out["exit_code"] = code
        if self.timed_out:
            out.update(state="timeout", error=f"timed out after {self.timeout:.0f}s")
        elif code == rs.EXIT_OK and out.get("trace_status") == "ok":
            out["state"] = "ok"
        elif code in (rs.EXIT_OK, rs.EXIT_RAISED_LATE) and out.get("trace_status") == "ok":
            out.update(state="ok", note="the script raised after compiling; the trace is complete")
        elif code == rs.EXIT_COMPILE_FAILED or out.get("trace_status") == "failed":
            te = out.get("trace_error") or {}
            out.update(state="failed", error=f"{te.get('type', 'failure')} during phase "
                                             f"{te.get('phase')!r}: {str(te.get('message'))[:300]}")
        elif code == rs.EXIT_NO_COMPILE:
            out.update(state="failed", error="the script never compiled anything")
        elif code == rs.EXIT_RAISED_EARLY:
            se = (manifest or {}).get("script_error") or {}
            why = f": {se.get('type')}: {str(se.get('message'))[:300]}" if se else ""
            out.update(state="failed", error="the script raised before compiling anything" + why)
        elif code == 70 and not manifest:
            out.update(state="error", error="the job could not start (see its output)")
        else:
            out.update(state="crashed" if out.get("trace_status") == "running" else "failed",
                       error=f"the job exited with code {code}")
        return out


_PROTO_FD: int | None = None


def _read_manifest(out: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _child_main(spec: dict[str, Any], out_w: int, msg_w: int) -> None:
    """In the forked job: wire up stdio, run the job, exit with its code."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(out_w, 1)
    os.dup2(out_w, 2)
    os.close(out_w)
    sys.stdin = open(0, "r", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)

    def emit(msg: dict[str, Any]) -> None:
        data = (json.dumps(msg, default=str) + "\n").encode()
        try:
            os.write(msg_w, data)
        except OSError:
            pass

    from tuidebug.compiler.recompile import run_job

    code = run_job(spec, emit)
    sys.stdout.flush()
    sys.stderr.flush()
    raise SystemExit(code)


# -- warm-up --------------------------------------------------------------------------------------

_WARMUP_SCRIPT = '''
import torch

def f(x, w, b):
    h = torch.nn.functional.layer_norm(x @ w + b, (16,))
    return torch.softmax(h, -1).relu().sum(-1)

x = torch.randn(8, 16)
w = torch.randn(16, 16, requires_grad=True)
b = torch.randn(16, requires_grad=True)
torch.compile(f)(x, w, b).sum().backward()
'''


def _warmup() -> None:
    """Compile a small model (training and inference) under capture, then forget it.

    Runs single-threaded (``compile_threads=1``, ``torch.set_num_threads(1)``) so that no thread
    pool exists when jobs are forked, and without capture's autotune hook (registering it makes
    Inductor build its autotune cache, whose key calls ``torch.cuda.current_device()``: CUDA must
    stay uninitialised in the server, or forked jobs cannot use it). Restores the RNG state,
    Dynamo's state, module counters and Inductor's lowering table (an implicit fallback
    registered here must not leak into a job).
    """
    import random
    import runpy
    import shutil

    import torch

    from tuidebug.compiler import compat
    from tuidebug.compiler.capture import capture

    def no_feedback(fn: Any) -> Any:
        raise compat.NotAvailable("autotune feedback (not installed during the warm-up)")

    orig_feedback = compat.add_autotune_feedback
    compat.add_autotune_feedback = no_feedback  # type: ignore[assignment]
    rng = torch.get_rng_state()
    py_rng = random.getstate()
    restore_lowerings = compat.lowering_checkpoint()
    threads = torch.get_num_threads()
    counters_before = _module_counters()
    tmp = Path(tempfile.mkdtemp(prefix="tuidebug-warmup-"))
    try:
        script = tmp / "warmup_model.py"
        script.write_text(_WARMUP_SCRIPT)
        torch.set_num_threads(1)
        with compat.inductor_config_patch({"compile_threads": 1}):
            with capture(tmp / "trace", use_cache=True, command=["warmup"]):
                runpy.run_path(str(script), run_name="__main__")
    finally:
        compat.add_autotune_feedback = orig_feedback  # type: ignore[assignment]
        torch.set_num_threads(threads)
        compat.reset_dynamo()
        restore_lowerings()
        torch.set_rng_state(rng)
        random.setstate(py_rng)
        _restore_module_counters(counters_before)
        shutil.rmtree(tmp, ignore_errors=True)


def _module_counters() -> dict[tuple[str, str], int]:
    """Module-level ``itertools.count`` values in torch (AOT ids, graph counters...)."""
    import itertools

    out = {}
    for name, mod in list(sys.modules.items()):
        if not name.startswith("torch") or mod is None:
            continue
        for attr, value in list(getattr(mod, "__dict__", {}).items()):
            if isinstance(value, itertools.count):
                try:
                    out[(name, attr)] = int(repr(value)[6:-1])
                except ValueError:
                    pass
    return out


def _restore_module_counters(before: dict[tuple[str, str], int]) -> None:
    """Put counters the warm-up advanced back, so that a job numbers things (``# AOT ID``,
    graph counters) as a fresh process would; counters of modules it imported restart at 0."""
    import itertools

    for (name, attr), value in _module_counters().items():
        start = before.get((name, attr), 0)
        if value != start:
            setattr(sys.modules[name], attr, itertools.count(start))


def _job_main(spec: dict[str, Any], msg_fd: int | None) -> int:
    """A spawned job (stdio already wired by the server)."""
    def emit(msg: dict[str, Any]) -> None:
        if msg_fd is not None:
            try:
                os.write(msg_fd, (json.dumps(msg, default=str) + "\n").encode())
            except OSError:
                pass

    from tuidebug.compiler.recompile import run_job

    return run_job(spec, emit)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="tuidebug-worker")
    ap.add_argument("--serve", action="store_true", help="serve jobs on stdin/stdout (JSON lines)")
    ap.add_argument("--no-warmup", action="store_true")
    ap.add_argument("--job", help=argparse.SUPPRESS)  # a spawned job: its spec as JSON
    ap.add_argument("--msg-fd", type=int, help=argparse.SUPPRESS)
    ns = ap.parse_args(argv)
    if ns.job:
        return _job_main(json.loads(ns.job), ns.msg_fd)
    if not ns.serve:
        ap.print_help()
        return 2
    # The protocol gets its own copy of stdout; fd 1 then points at stderr so that anything the
    # server's libraries print cannot corrupt it.
    global _PROTO_FD
    # torch.cuda.is_available() through NVML: without this it initialises the CUDA driver in
    # the server, and a forked job could not use CUDA ("Cannot re-initialize CUDA in forked
    # subprocess").
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    _PROTO_FD = os.dup(1)
    proto = os.fdopen(_PROTO_FD, "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the client stops us with "exit" or EOF
    server = _Server(proto, warmup=not ns.no_warmup)
    server.send({"event": "hello", "pid": os.getpid()})
    server.boot()
    server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
