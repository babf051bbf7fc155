"""tuidebug.proc with real child processes: the protocol round trip, timeouts, and a
process-group kill that leaves nothing running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tuidebug import proc

# A server that speaks the protocol: says ready, echoes each request, prints junk on its
# stdout (which protocol_stream sends to stderr), and on "spawn" starts a grandchild that
# sleeps (in its process group) and reports the grandchild's pid.
SERVER = r'''
import subprocess, sys
from tuidebug import proc

out, _ = proc.protocol_stream()
print("junk on stdout that must not reach the protocol", flush=True)
proc.write_message(out, {"event": "ready", "pid": __import__("os").getpid()})
for line in sys.stdin:
    req = proc.decode(line)
    if req["op"] == "exit":
        break
    if req["op"] == "echo":
        proc.write_message(out, {"event": "echo", "value": req["value"]})
    elif req["op"] == "spawn":
        g = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        proc.write_message(out, {"event": "spawned", "pid": g.pid})
    elif req["op"] == "garble":
        out.write("this is not json\n")
        out.flush()
        proc.write_message(out, {"event": "after"})
    elif req["op"] == "hang":
        import time
        time.sleep(600)
'''


def _gone(pid: int, within: float = 10.0) -> bool:
    """The process no longer runs (absent, or a zombie waiting for its parent)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def server(tmp_path: Path):
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    log = open(tmp_path / "server.log", "wb")
    child = proc.JsonChild([sys.executable, str(script)], env=proc.child_env(), log=log)
    yield child
    child.kill()
    log.close()


def test_round_trip_keeps_printed_junk_out_of_the_protocol(server: proc.JsonChild,
                                                          tmp_path: Path) -> None:
    ready = server.receive(60)
    assert ready == {"event": "ready", "pid": server.pid}
    value = {"text": "ünïcode\nnew line", "n": [1, 2.5, None]}
    assert server.send({"op": "echo", "value": value})
    assert server.receive(30) == {"event": "echo", "value": value}
    assert server.send({"op": "garble"})
    with pytest.raises(proc.ProtocolError):
        server.receive(30)
    assert server.receive(30) == {"event": "after"}
    assert server.close(timeout=30) == 0
    assert server.receive(5) is None  # end of stream
    assert not server.send({"op": "echo", "value": 1})  # the child is gone: False, no error
    assert "junk on stdout" in (tmp_path / "server.log").read_text()


def test_receive_times_out_when_the_child_says_nothing(server: proc.JsonChild) -> None:
    assert server.receive(60)["event"] == "ready"
    server.send({"op": "hang"})
    t0 = time.monotonic()
    with pytest.raises(proc.ReceiveTimeout):
        server.receive(0.7)
    assert 0.6 < time.monotonic() - t0 < 5
    assert server.alive


def test_kill_ends_the_child_and_what_it_started(server: proc.JsonChild) -> None:
    assert server.receive(60)["event"] == "ready"
    server.send({"op": "spawn"})
    grandchild = server.receive(30)["pid"]
    assert not _gone(grandchild, within=0.2)
    assert os.getpgid(grandchild) == server.pid  # it is in the child's group
    rc = server.kill()
    assert rc is not None and rc < 0  # SIGKILL
    assert _gone(server.pid) and _gone(grandchild)
    assert server.receive(5) is None


def test_wait_kills_the_group_on_timeout_and_returns_an_exit_status(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    hang = [sys.executable, "-c", "import subprocess, sys, time; "
            "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
            f"open({str(pidfile)!r}, 'w').write(str(g.pid)); time.sleep(600)"]
    child = proc.spawn(hang, env=proc.child_env())
    ticks: list[float] = []
    while not pidfile.exists() or not pidfile.read_text():
        time.sleep(0.05)
    assert proc.wait(child, 1.0, tick=lambda: ticks.append(time.monotonic()), every=0.2) is None
    assert child.returncode is not None and child.returncode < 0
    assert _gone(int(pidfile.read_text()))
    assert len(ticks) >= 2  # progress while it waited
    quick = proc.spawn([sys.executable, "-c", "raise SystemExit(3)"])
    assert proc.wait(quick, 60) == 3
    assert proc.exit_description(3) == "exit status 3"
    assert proc.exit_description(-9) == "killed by SIGKILL"


def test_an_exception_from_tick_kills_the_child() -> None:
    child = proc.spawn([sys.executable, "-c", "import time; time.sleep(600)"])

    def cancel() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        proc.wait(child, None, tick=cancel, every=0.1)
    assert child.returncode is not None and child.returncode < 0


def test_child_env_puts_tuidebug_first_and_scrubs_repro_knobs(monkeypatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    monkeypatch.setenv("TORCHDYNAMO_REPRO_AFTER", "aot")
    env = proc.child_env({"X": "1"})
    assert env["PYTHONPATH"] == f"{proc.ROOT}{os.pathsep}/elsewhere"
    assert env["TORCHDYNAMO_REPRO_AFTER"] == "aot" and env["X"] == "1"
    env = proc.child_env(scrub_repro=True, fast_compile=True)
    assert "TORCHDYNAMO_REPRO_AFTER" not in env
    assert env["TORCHINDUCTOR_COMPILE_THREADS"] == "1"
    # the child really imports this checkout's tuidebug
    out = subprocess.run([sys.executable, "-c", "import tuidebug; print(tuidebug.__file__)"],
                         env=env, capture_output=True, text=True, cwd="/", timeout=60)
    assert out.stdout.strip() == str(proc.ROOT / "tuidebug" / "__init__.py")


def test_line_buffer_splits_lines_across_chunks() -> None:
    buf = proc.LineBuffer()
    assert buf.feed(b'{"a": 1}\n{"b"') == [b'{"a": 1}']
    assert buf.feed(b': 2}\n\n') == [b'{"b": 2}', b""]
    assert buf.feed(b"tail") == [] and buf.rest() == b"tail" and buf.rest() == b""
    assert proc.decode(proc.encode({"p": Path("/x")})) == {"p": "/x"}
    with pytest.raises(proc.ProtocolError):
        proc.decode(b"[1, 2]")


def test_terminate_group_lets_the_child_end_the_groups_it_started(tmp_path: Path) -> None:
    """A child whose own child leads another process group (as a bisection's runs do):
    SIGTERM makes it kill that group on the way out, which a kill of its own group would miss."""
    pidfile = tmp_path / "pid"
    code = ("import sys, time; from tuidebug import proc; proc.exit_on_sigterm(); "
            "run = proc.spawn([sys.executable, '-c', 'import time; time.sleep(600)']); "
            f"open({str(pidfile)!r}, 'w').write(str(run.pid)); proc.wait(run, None)")
    child = proc.spawn([sys.executable, "-c", code], env=proc.child_env())
    while not pidfile.exists() or not pidfile.read_text():
        time.sleep(0.05)
    run = int(pidfile.read_text())
    assert os.getpgid(run) == run != os.getpgid(child.pid)
    proc.terminate_group(child, grace=30)
    assert child.wait(30) == 143  # it exited itself, well before the SIGKILL
    assert _gone(run)
    # one that ignores SIGTERM is killed after the grace period
    stubborn = proc.spawn([sys.executable, "-c", "import signal, time; "
                           "signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); "
                           "time.sleep(600)"], stdout=subprocess.PIPE)
    assert stubborn.stdout.readline()
    proc.terminate_group(stubborn, grace=0.5)
    assert stubborn.wait(30) < 0
    stubborn.stdout.close()


# A child whose SIGTERM handler dies of it (as ``tuidebug trace``'s rank does) while its stderr
# write is blocked on a full pipe: the handler's flush is a reentrant call on that stream.
BLOCKED_WRITER = r'''
import signal, sys
from tuidebug import proc

signal.signal(signal.SIGTERM, lambda signum, frame: proc.die_of(signum))
print("ready", flush=True)
while True:
    sys.stderr.write("x" * 100 + "\n")
'''


def test_die_of_from_a_handler_that_interrupted_a_blocked_stderr_write() -> None:
    """SIGTERM while ``sys.stderr.write`` is blocked (nobody reads the pipe): ``die_of`` ends the
    process by the signal, never exit 1 with a traceback (a flush that raises ``RuntimeError:
    reentrant call`` is now caught; CPython 3.11 here lets the flush through, so this guards the
    end rather than reproducing that raise)."""
    p = subprocess.Popen([sys.executable, "-c", BLOCKED_WRITER], env=proc.child_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert p.stdout is not None and p.stdout.readline() == b"ready\n"
        time.sleep(1.0)  # the pipe fills (64 KiB) and the write blocks
        assert p.poll() is None
        p.send_signal(signal.SIGTERM)
        _, said = p.communicate(timeout=30)  # drains the pipe: the blocked write goes on
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == -signal.SIGTERM, said[-2000:]
    assert b"reentrant call" not in said
