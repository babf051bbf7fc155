"""One recompile job in its own process: forked from the warm server (or spawned fresh), with
its stdout+stderr and its message pipe read by the server, and its result judged from its exit
status and the manifest it wrote."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuidebug import proc
from tuidebug.compiler.recompile_spec import RecompileSpec
from tuidebug.compiler.worker.job_result import JobResult
from tuidebug.trace.format.error_record import ErrorRecord
from tuidebug.trace.format.manifest import find_manifest

if TYPE_CHECKING:
    from tuidebug.compiler.worker.server import Server

__all__ = ["JobChild", "job_main"]


class JobChild:
    """One job: a forked child with its stdout+stderr and its message pipe."""

    def __init__(self, jid: int, spec: RecompileSpec, pid: int, out_fd: int, msg_fd: int) -> None:
        self.jid, self.spec, self.pid = jid, spec, pid
        self.out_fd, self.msg_fd = out_fd, msg_fd
        self.bufs = {out_fd: proc.LineBuffer(), msg_fd: proc.LineBuffer()}
        self.started = time.monotonic()
        self.timeout = float(spec.timeout or 0)
        self.timed_out = False
        self.cancelled = False
        self.tail: collections.deque[str] = collections.deque(maxlen=60)
        self.popen: subprocess.Popen[bytes] | None = None  # a spawned job (not forked)

    @classmethod
    def fork(cls, jid: int, spec: RecompileSpec, proto_fd: int | None = None) -> "JobChild":
        out_r, out_w = os.pipe()
        msg_r, msg_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the job
            code = 70
            try:
                proc.lead_own_group()
                os.close(out_r)
                os.close(msg_r)
                if proto_fd is not None:
                    os.close(proto_fd)  # only the server speaks the protocol
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
    def spawn(cls, jid: int, spec: RecompileSpec) -> "JobChild":
        """The job in a fresh interpreter (when forking is not safe, e.g. CUDA is initialised)."""
        out_r, out_w = os.pipe()
        msg_r, msg_w = os.pipe()
        try:
            popen = proc.spawn(
                [sys.executable, "-m", "tuidebug.compiler.worker",
                 "--job", json.dumps(spec.to_json()), "--msg-fd", str(msg_w)],
                stdin=subprocess.DEVNULL, stdout=out_w, stderr=out_w, pass_fds=(msg_w,),
                close_fds=True)
        finally:
            os.close(out_w)
            os.close(msg_w)
        os.set_blocking(out_r, False)
        os.set_blocking(msg_r, False)
        child = cls(jid, spec, popen.pid, out_r, msg_r)
        child.popen = popen
        return child

    def kill(self) -> None:
        proc.kill_group(self.pid)

    def read(self, fd: int, server: Server) -> None:
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

    def drain(self, fd: int, server: Server) -> None:
        while True:
            try:
                data = os.read(fd, 65536)
            except (BlockingIOError, OSError):
                break
            if not data:
                break
            self._lines(fd, data, server)
        rest = self.bufs[fd].rest()
        if rest:
            self._line(fd, rest, server)

    def _lines(self, fd: int, data: bytes, server: Server) -> None:
        for line in self.bufs[fd].feed(data):
            self._line(fd, line, server)

    def _line(self, fd: int, raw: bytes, server: Server) -> None:
        text = raw.decode("utf-8", "replace").rstrip("\r")
        if fd == self.out_fd:
            self.tail.append(text)
            server.send({"event": "output", "id": self.jid, "line": text})
            return
        try:
            msg = proc.decode(text)
        except proc.ProtocolError:
            return
        if msg.get("event") == "phase":
            server.send({"event": "phase", "id": self.jid, "phase": msg.get("phase"),
                         "graph": msg.get("graph")})
        elif msg.get("event") == "progress":
            server.send({"event": "progress", "id": self.jid, "message": msg.get("message")})

    def result(self, status: int) -> JobResult:
        """How the job ended, judged from its exit status and its trace's manifest."""
        from tuidebug.compiler import run_script as rs

        manifest = find_manifest(Path(self.spec.out))
        err = manifest.error if manifest else None
        if err is not None:  # in brief: phase, type, message (its first 2000 characters), graph
            brief = err.brief()
            if isinstance(brief["message"], str):
                brief["message"] = brief["message"][:2000]
            err = ErrorRecord.from_json(brief)
        r = JobResult("crashed", elapsed_s=round(time.monotonic() - self.started, 3),
                      output_tail="\n".join(self.tail),
                      trace_status=manifest.status if manifest else None,
                      trace_phase=manifest.phase if manifest else None, trace_error=err,
                      graphs=len(manifest.graphs or []) if manifest else None)
        phase = repr(r.trace_phase)
        if os.WIFSIGNALED(status):
            name = proc.signal_name(os.WTERMSIG(status))
            r = replace(r, signal=name)
            if self.timed_out:
                return replace(r, state="timeout", error=f"timed out after {self.timeout:.0f}s; "
                                                         f"killed during phase {phase}")
            if self.cancelled:
                return replace(r, state="cancelled", error="cancelled")
            return replace(r, state="crashed", error=f"the job's process died ({name}) during "
                                                     f"phase {phase}")
        code = os.WEXITSTATUS(status)
        r = replace(r, exit_code=code)
        if self.timed_out:
            return replace(r, state="timeout", error=f"timed out after {self.timeout:.0f}s")
        if code == rs.EXIT_OK and r.trace_status == "ok":
            return replace(r, state="ok")
        if code in (rs.EXIT_OK, rs.EXIT_RAISED_LATE) and r.trace_status == "ok":
            return replace(r, state="ok",
                           note="the script raised after compiling; the trace is complete")
        if code == rs.EXIT_COMPILE_FAILED or r.trace_status == "failed":
            te = err or ErrorRecord()
            return replace(r, state="failed", error=f"{te.type or 'failure'} during phase "
                                                    f"{te.phase!r}: {str(te.message)[:300]}")
        if code == rs.EXIT_NO_COMPILE:
            return replace(r, state="failed", error="the script never compiled anything")
        if code == rs.EXIT_RAISED_EARLY:
            se = manifest.script_error if manifest else None
            why = f": {se.type}: {str(se.message)[:300]}" if se else ""
            return replace(r, state="failed",
                           error="the script raised before compiling anything" + why)
        if code == 70 and not manifest:
            return replace(r, state="error", error="the job could not start (see its output)")
        return replace(r, state="crashed" if r.trace_status == "running" else "failed",
                       error=f"the job exited with code {code}")


def _child_main(spec: RecompileSpec, out_w: int, msg_w: int) -> None:
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
        proc.write_message_fd(msg_w, msg)

    from tuidebug.compiler.recompile import run_job

    code = run_job(spec, emit)
    sys.stdout.flush()
    sys.stderr.flush()
    raise SystemExit(code)


def job_main(spec: RecompileSpec, msg_fd: int | None) -> int:
    """A spawned job (stdio already wired by the server)."""
    def emit(msg: dict[str, Any]) -> None:
        if msg_fd is not None:
            proc.write_message_fd(msg_fd, msg)

    from tuidebug.compiler.recompile import run_job

    return run_job(spec, emit)
