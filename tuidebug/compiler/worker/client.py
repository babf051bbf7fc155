"""The client of the warm recompile worker (torch-free: the TUI uses it).

It starts the server (``python -m tuidebug.compiler.worker --serve``) as a
:class:`tuidebug.proc.JsonChild`, sends it jobs, follows their events on a reader thread,
restarts a server that dies (re-sending the jobs still queued), and kills jobs that a hung
server does not time out (a watchdog thread).
"""

from __future__ import annotations

import itertools
import os
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Mapping

from tuidebug import proc
from tuidebug.compiler.recompile_spec import RecompileSpec
from tuidebug.compiler.worker.job import DEFAULT_TIMEOUT, RecompileJob, WorkerError
from tuidebug.compiler.worker.job_result import JobResult

__all__ = ["RecompileWorker"]


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
        self._server: proc.JsonChild | None = None
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
            if self.alive:
                return self
            self._spawn()
            if self._watchdog is None:
                self._watchdog = threading.Thread(target=self._watch, name="tuidebug-worker-watchdog",
                                                  daemon=True)
                self._watchdog.start()
        return self

    def _spawn(self) -> None:
        env = proc.child_env({**self.extra_env, "TUIDEBUG_WORKER_PARALLEL": str(self.max_parallel)})
        if self._log is None:
            fd, name = tempfile.mkstemp(prefix="tuidebug-worker-", suffix=".log")
            self._log = os.fdopen(fd, "wb")
            self.log_path = Path(name)
        cmd = [self.python, "-m", "tuidebug.compiler.worker", "--serve"]
        if not self.warmup:
            cmd.append("--no-warmup")
        self._ready.clear()
        self._server = proc.JsonChild(cmd, env=env, log=self._log)
        self._reader = threading.Thread(target=self._read, args=(self._server,),
                                        name="tuidebug-worker-reader", daemon=True)
        self._reader.start()
        # jobs queued or sent to a server that died are (re)sent to this one
        for job in sorted(self._jobs.values(), key=lambda j: j.id):
            if job.state == "queued":
                self._send({"op": "job", "id": job.id, "spec": job.spec.to_json()})

    @property
    def alive(self) -> bool:
        return self._server is not None and self._server.alive

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    @property
    def pid(self) -> int | None:
        return self._server.pid if self._server else None

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until the server has imported torch and warmed up."""
        return self._ready.wait(timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Stop the server; running jobs are killed and reported as cancelled."""
        with self._lock:
            self._closed = True
            server = self._server
            for job in self._jobs.values():
                if not job.done:
                    self._kill_job_process(job)
                    self._finish(job, JobResult("cancelled", error="the worker was closed"))
        if server is not None:
            server.close(timeout)  # asks it to exit, then kills its process group
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
               on_done: Callable[[RecompileJob], None] | None = None,
               allowed: Mapping[str, Any] | Iterable[str] = ()) -> RecompileJob:
        """Recompile ``trace_path`` with ``sets`` (``["NAME=VALUE", ...]`` or ``{name: value}``)
        into ``out`` (default ``<trace>-<flag>=<value>`` beside it). ``env``: variables set in
        the job's process (e.g. ``TORCHINDUCTOR_CACHE_DIR``); ``allowed``: the trace's risky
        flags the user confirmed by name (``trace_config.check``).

        Raises ``UnknownFlag`` / ``FlagValueError`` / ``RecompileError`` at once for bad input.
        """
        from tuidebug.compiler import recompile

        parsed = recompile.parse_sets(sets)
        spec = recompile.recompile_spec(trace_path, parsed, out, env=env, allowed=allowed,
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

    def submit_spec(self, spec: RecompileSpec, *, timeout: float | None = None,
                    on_progress: Callable[[RecompileJob, str], None] | None = None,
                    on_done: Callable[[RecompileJob], None] | None = None) -> RecompileJob:
        """Run ``spec`` — the very spec the user was shown and confirmed — in the worker;
        ``timeout`` (else the spec's, else the worker's) in seconds."""
        with self._lock:
            if self._closed:
                raise WorkerError("the worker was closed")
            t = float(timeout if timeout is not None else spec.timeout or self.timeout)
            spec = spec.with_timeout(t)
            job = RecompileJob(id=next(self._ids), spec=spec, timeout=t,
                               on_progress=on_progress or self.on_progress,
                               on_done=on_done or self.on_done)
            self._jobs[job.id] = job
            if not self.alive:
                self.start()  # sends every queued job, this one included
            else:
                self._send({"op": "job", "id": job.id, "spec": spec.to_json()})
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
                self._finish(job, JobResult("cancelled", error="cancelled"))

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
        server = self._server
        if server is not None and server.alive:
            server.send(msg)  # if it fails, the reader sees the server die and restarts it

    def _read(self, server: proc.JsonChild) -> None:
        for msg in server.messages():
            try:
                self._handle(msg)
            except Exception:  # a broken callback must not kill the reader
                pass
        server.kill()  # reaped (what is left of its group killed), its pipes closed
        self._server_died(server)

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
            self._finish(job, JobResult.from_json(msg.get("result")))

    def _notify(self, job: RecompileJob, message: str) -> None:
        job.messages.append(message)
        if job.on_progress:
            job.on_progress(job, message)

    def _finish(self, job: RecompileJob, result: JobResult) -> None:
        with self._lock:
            if job.done:
                return
            job.state = result.state
            job.finished_at = time.time()
            if job.started_at is None:
                job.started_at = job.finished_at
            tail = result.output_tail
            if tail is None and job.output:
                tail = "\n".join(list(job.output)[-40:])
            job.result = replace(result, out=job.spec.out, elapsed_s=job.elapsed_s,
                                 output_tail=tail)
        job._event.set()
        if job.on_done:
            try:
                job.on_done(job)
            except Exception:
                pass

    def _kill_job_process(self, job: RecompileJob) -> None:
        proc.kill_group(job.pid)

    def _server_died(self, server: proc.JsonChild) -> None:
        with self._lock:
            if server is not self._server:
                return
            code = server.proc.returncode
            if self._closed:
                return
            why = f"the worker process died (exit code {code})"
            for job in self._jobs.values():
                if job.state == "running":
                    self._kill_job_process(job)
                    self._finish(job, JobResult("crashed", error=why + " while running this job",
                                                worker_log=self.log_tail()))
            if not self._ready.is_set():
                self._deaths_before_ready += 1
            self.restarts += 1
            pending = [j for j in self._jobs.values() if j.state == "queued"]
            if self._deaths_before_ready >= self.max_restarts:
                for job in pending:
                    self._finish(job, JobResult("error", error=why + "; it could not be restarted",
                                                worker_log=self.log_tail()))
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
                        self._finish(job, JobResult(
                            "timeout", error=f"timed out after {job.timeout:.0f}s (the worker "
                                             "did not stop it; restarted the worker)"))
                        if self.alive:
                            proc.kill_group(self.pid)  # the reader restarts it
