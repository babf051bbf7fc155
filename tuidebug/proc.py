"""Child processes: their environment, one JSON-lines protocol, and process-group start and kill.

Everything in tuidebug that runs torch outside the calling process goes through here: the
capture child of ``tuidebug trace``, the warm recompile worker (``compiler/worker``), the
minifier's pool of candidate workers and its repro checks, bisection runs, and the TUI's
bisect. This module never imports torch.

**Environment** (:func:`child_env`): tuidebug importable (its root first on ``PYTHONPATH``),
unbuffered output; optionally without the environment variables that would turn on PyTorch's
own repro/bisect machinery in the child, and with Inductor's compile-process pool off.

**Protocol**: one JSON object per line (UTF-8). The parent sends requests ``{"op": NAME, ...}``;
the child sends messages ``{"event": NAME, ...}``. A server announces ``{"event": "ready", ...}``
once it takes requests, and stops on ``{"op": "exit"}`` or at the end of its stdin. A child
keeps the protocol on a private copy of its stdout (:func:`protocol_stream`), so that whatever
torch, a compiler or user code prints cannot corrupt it.

**Processes**: a child started with :func:`spawn` leads its own process group (it, and the
compilers it starts), and :func:`kill_group` kills that whole group; nothing else kills. A child
that itself starts process groups (a bisection's runs, a pool's workers) is stopped with
:func:`terminate_group`, so that it can end them first.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Mapping, NoReturn, Sequence

__all__ = ["ROOT", "child_env", "encode", "decode", "LineBuffer", "LineReader", "write_message",
           "write_message_fd", "protocol_stream", "spawn", "lead_own_group", "kill_group", "terminate_group",
           "exit_on_sigterm", "stop",
           "wait", "exit_description", "signal_name", "JsonChild", "ProtocolError",
           "ReceiveTimeout"]

ROOT = Path(__file__).resolve().parent.parent
# Environment variables that make PyTorch's own minifier / bisector act inside a child.
REPRO_VARIABLES = ("TORCHDYNAMO_REPRO_AFTER", "TORCHDYNAMO_REPRO_LEVEL", "TORCH_BISECT_BACKEND",
                   "TORCH_BISECT_SUBSYSTEM", "TORCH_BISECT_MAX", "TUIDEBUG_REPRO_RESULT")


# -- environment ----------------------------------------------------------------------------------

def child_env(extra: Mapping[str, str] | None = None, *, scrub_repro: bool = False,
              fast_compile: bool = False) -> dict[str, str]:
    """The environment for a tuidebug child process: this one's, with tuidebug's root first on
    ``PYTHONPATH`` and ``PYTHONUNBUFFERED`` (unless set), then ``extra``.

    ``scrub_repro`` drops :data:`REPRO_VARIABLES` (a candidate or a bisection run must not
    start PyTorch's own minifier, nor inherit a bisection's state). ``fast_compile`` keeps
    Inductor from starting its own pool of compile processes (one per worker would oversubscribe
    the machine; a candidate has only a few kernels).
    """
    env = dict(os.environ)
    if scrub_repro:
        for k in REPRO_VARIABLES:
            env.pop(k, None)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    if fast_compile:
        env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    env.update({str(k): str(v) for k, v in (extra or {}).items()})
    return env


# -- protocol -------------------------------------------------------------------------------------

class ProtocolError(Exception):
    """A line that is not a JSON object."""


class ReceiveTimeout(Exception):
    """No message within the time given."""


def encode(msg: Mapping[str, Any]) -> bytes:
    """One message as one line (values JSON cannot hold are sent as their ``str``)."""
    return (json.dumps(msg, default=str) + "\n").encode("utf-8")


def decode(line: bytes | str) -> dict[str, Any]:
    """The message on one line; ProtocolError if it is not a JSON object."""
    if isinstance(line, bytes):
        line = line.decode("utf-8", "replace")
    try:
        msg = json.loads(line)
    except ValueError:
        raise ProtocolError(f"not a JSON line: {line[:200]!r}") from None
    if not isinstance(msg, dict):
        raise ProtocolError(f"not a JSON object: {line[:200]!r}")
    return msg


def write_message(stream: IO[Any], msg: Mapping[str, Any]) -> bool:
    """Write one message to a text or binary stream and flush; False when the reader is gone."""
    data = encode(msg)
    try:
        stream.write(data if "b" in getattr(stream, "mode", "b") else data.decode("utf-8"))
        stream.flush()
    except (BrokenPipeError, OSError, ValueError):
        return False
    return True


def write_message_fd(fd: int, msg: Mapping[str, Any]) -> bool:
    """Write one message to a file descriptor (a pipe); False when the reader is gone."""
    try:
        os.write(fd, encode(msg))
    except OSError:
        return False
    return True


class LineBuffer:
    """Splits bytes as they arrive into lines (without their ``\\n``)."""

    def __init__(self) -> None:
        self.buf = b""

    def feed(self, data: bytes) -> list[bytes]:
        *lines, self.buf = (self.buf + data).split(b"\n")
        return lines

    def rest(self) -> bytes:
        """What is left after the last newline (at end of stream), and forget it."""
        out, self.buf = self.buf, b""
        return out


class LineReader:
    """Reads lines from a file descriptor (a pipe), optionally with a timeout."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = b""

    def readline(self, timeout: float | None = None) -> bytes | None:
        """A line with its ``\\n`` (at end of stream: what is left, b"" when nothing), or None
        when ``timeout`` seconds pass first (``None``: wait as long as it takes)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buf:
            wait_s = 0.5
            if deadline is not None:
                wait_s = min(deadline - time.monotonic(), wait_s)
                if wait_s <= 0:
                    return None
            try:
                ready, _, _ = select.select([self.fd], [], [], wait_s)
                chunk = os.read(self.fd, 1 << 16) if ready else None
            except (OSError, ValueError):  # closed under us: the end
                chunk = b""
            if chunk is None:
                continue
            if not chunk:
                out, self.buf = self.buf, b""
                return out
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line + b"\n"


def protocol_stream() -> tuple[IO[str], int]:
    """In a child: a private copy of stdout for the protocol, and its file descriptor; fd 1 then
    points at stderr, so that what torch, compilers or user code print cannot corrupt it."""
    fd = os.dup(1)
    stream = os.fdopen(fd, "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    return stream, fd


# -- processes ------------------------------------------------------------------------------------

def spawn(cmd: Sequence[str], *, env: Mapping[str, str] | None = None, own_group: bool = True,
          **popen: Any) -> subprocess.Popen[Any]:
    """Start ``cmd``; with ``own_group`` (the default) in a new session, so that it and what it
    starts form one process group that :func:`kill_group` ends. ``own_group=False`` keeps the
    terminal's group (Ctrl-C reaches it; it can read the terminal), for ``tuidebug trace``."""
    return subprocess.Popen(list(cmd), env=dict(env) if env is not None else None,
                            start_new_session=own_group, **popen)


def exited(pid: int) -> bool:
    """Whether child ``pid`` has ended (waiting to be reaped, or reaped already), asked without
    reaping it (``WNOWAIT``: its ``Popen`` still gets its exit code) and without the ``Popen``'s
    lock (safe in a signal handler while the main thread waits on it)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # reaped already
        return True
    except (OSError, AttributeError):  # no waitid here: not known, as if it ran
        return False


def lead_own_group() -> None:
    """In a child made with ``os.fork()``: lead a new process group, as :func:`spawn` does."""
    os.setpgid(0, 0)


def kill_group(pid: int | None) -> None:
    """SIGKILL the process group led by ``pid`` (falls back to the process alone)."""
    if not pid:
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass


def terminate_group(proc: subprocess.Popen[Any], grace: float = 5.0) -> None:
    """Ask ``proc``'s process group to stop (SIGTERM: a child that starts process groups of its
    own ends them on the way out, see :func:`exit_on_sigterm`); SIGKILL the group if ``proc``
    still runs ``grace`` seconds later. Returns at once."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except OSError:
        pass

    def hard() -> None:
        if proc.poll() is None:
            kill_group(proc.pid)

    timer = threading.Timer(grace, hard)
    timer.daemon = True
    timer.start()


def exit_on_sigterm() -> None:
    """In a child: turn SIGTERM into ``SystemExit(143)``, so that ``finally`` blocks (which kill
    the process groups it started, e.g. :func:`wait`'s) run before it exits."""
    def handler(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def stop(proc: subprocess.Popen[Any], timeout: float = 10.0) -> int | None:
    """Kill ``proc``'s group if it still runs, reap it, close its pipes; its return code."""
    if proc.poll() is None:
        kill_group(proc.pid)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    for f in (proc.stdin, proc.stdout, proc.stderr):
        try:
            if f:
                f.close()
        except OSError:
            pass
    return proc.returncode


def wait(proc: subprocess.Popen[Any], timeout: float | None,
         tick: Callable[[], None] | None = None, every: float = 0.5) -> int | None:
    """Wait for ``proc``; its return code, or None when ``timeout`` passed first. ``tick`` runs
    every ``every`` seconds meanwhile (progress; raising from it interrupts the wait). When the
    wait ends with the process still running (the timeout, an exception), its group is killed."""
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            step = every if tick else None
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                step = left if step is None else min(step, left)
            try:
                return proc.wait(timeout=step)
            except subprocess.TimeoutExpired:
                if tick:
                    tick()
    finally:
        if proc.poll() is None:
            kill_group(proc.pid)
            proc.wait()


def die_of(sig: int) -> NoReturn:
    """End this process by signal ``sig`` (its default action), as a child that died of it did:
    whoever waits for this one (torchrun) sees the same end. Falls back to exit 128 + ``sig``."""
    try:
        signal.signal(sig, signal.SIG_DFL)
    except (OSError, ValueError):  # SIGKILL and SIGSTOP take no handler: theirs is the default
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        # RuntimeError: a signal handler interrupted a write blocked on this stream (a full
        # pipe): flushing it again is a "reentrant call"; what it holds is lost either way
        except (OSError, ValueError, RuntimeError, AttributeError):
            pass
    try:
        os.kill(os.getpid(), sig)
        time.sleep(1)  # delivered at once; a signal whose default is to go on, is not
    except (OSError, ValueError):
        pass
    os._exit(128 + sig)


def exit_description(returncode: int) -> str:
    """``killed by SIGSEGV`` for a negative return code (a signal), else ``exit status N``."""
    if returncode < 0:
        return f"killed by {signal_name(-returncode)}"
    return f"exit status {returncode}"


def signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return str(sig)


# -- a child that speaks the protocol -------------------------------------------------------------

class JsonChild:
    """A child process speaking the protocol on its stdin (with ``requests``) and stdout, its
    stderr appended to ``log``, in its own process group."""

    def __init__(self, cmd: Sequence[str], *, env: Mapping[str, str] | None = None,
                 log: IO[bytes] | None = None, cwd: str | os.PathLike[str] | None = None,
                 requests: bool = True) -> None:
        self.proc = spawn(cmd, env=env, cwd=None if cwd is None else str(cwd),
                          stdin=subprocess.PIPE if requests else subprocess.DEVNULL,
                          stdout=subprocess.PIPE,
                          stderr=log if log is not None else subprocess.DEVNULL)
        assert self.proc.stdout is not None
        self._reader = LineReader(self.proc.stdout.fileno())

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, msg: Mapping[str, Any]) -> bool:
        """Send one request; False when the child is gone (or takes none)."""
        if self.proc.stdin is None:
            return False
        return write_message(self.proc.stdin, msg)

    def receive(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next message; None at the end of the stream (the child exited or closed it).
        Raises ReceiveTimeout when ``timeout`` seconds pass first, ProtocolError for a line that
        is not a JSON object."""
        line = self._reader.readline(timeout)
        if line is None:
            raise ReceiveTimeout(f"no message within {timeout:.0f}s")
        if not line:
            return None
        return decode(line)

    def messages(self) -> Iterator[dict[str, Any]]:
        """Every message until the end of the stream; lines that are not messages are skipped."""
        while True:
            try:
                msg = self.receive()
            except ProtocolError:
                continue
            if msg is None:
                return
            yield msg

    def close(self, timeout: float = 5.0) -> int | None:
        """Ask the child to exit (``{"op": "exit"}``), wait ``timeout`` seconds, then kill its
        group; its return code."""
        if self.alive and self.send({"op": "exit"}):
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        return stop(self.proc, timeout)

    def kill(self, timeout: float = 10.0) -> int | None:
        """Kill the child's process group (it and what it started) and reap it."""
        return stop(self.proc, timeout)

    def returncode(self) -> int:
        """Wait for the child to exit; its return code."""
        return self.proc.wait()


if __name__ == "__main__":  # pragma: no cover
    sys.exit("tuidebug.proc is a library")
