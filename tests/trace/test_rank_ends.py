"""How the ranks of a job that did not finish ended, said as what is known (``trace/jobs/ends.py``):
a collective that timed out (the NCCL watchdog's error on one rank, the others stopped by the
launcher) is a hang, named from that rank's error; records left ``running`` with no end are
an interrupted job (Ctrl-C), not ranks "stopped when another ended"; a rank with no record is
not known. ``info`` said "stopped: no rank timed out: the ranks were stopped when another
ended" for all three. Rank traces, records and progress logs written as a job writes them (the
torch-free writer; no torch)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.make_traces import pythonpath

from tuidebug.trace.format import schema
from tuidebug.trace.format.error_record import ErrorRecord
from tuidebug.trace.format.manifest import ScriptError
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.jobs.progress import progress_path
from tuidebug.trace.jobs.ranks import analyze_job
from tuidebug.viewers.ranks_view import wait_headings

WATCHDOG = ("[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, "
            "OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600071 "
            "milliseconds before timing out.")


def _collectives(job: Path, rank: int, seqs: list[int], waiting: bool) -> None:
    """Rank ``rank``'s progress log: all_reduce #n of the default group for each of ``seqs``,
    each done but the last when ``waiting``."""
    log = progress_path(job, rank)
    log.parent.mkdir(parents=True, exist_ok=True)
    events: list[dict] = [{"event": "start", "t": 1.0}]
    for n in seqs:
        events.append({"event": "collective", "op": "all_reduce", "group": "default", "seq": n,
                       "line": "train.py:40", "t": 2.0})
        if not (waiting and n == seqs[-1]):
            events.append({"event": "done", "group": "default", "seq": n, "t": 2.1})
    log.write_text("".join(json.dumps(e) + "\n" for e in events))


def _rank(job: Path, rank: int, status: str | None, *, world: int = 2,
          error: ScriptError | None = None, writer_pid: int | None = None,
          finished: bool | float = True, host: str | None = None,
          compile_error: ErrorRecord | None = None, **extra: object) -> None:
    """Rank ``rank``'s trace (finished ``failed`` with ``error``, else left running: its writer
    ``writer_pid``) and its record (``status``; None: no record; ``finished``: its end, 9.0
    when True; ``host``: its host; ``extra``: more of its fields)."""
    w = TraceWriter(job / f"rank_{rank}", command=["train.py"])
    if compile_error is not None:  # a compile failed earlier (the script ran on)
        w.finish(schema.STATUS_FAILED, compile_error)
    elif error is not None:
        w.update(script_error=error.to_json())
        w.finish(schema.STATUS_OK)  # the compile was fine: the script raised (script_failed)
    elif writer_pid is not None:
        w.update(pid=writer_pid)
    else:
        w.finish(schema.STATUS_OK)
    if status is None:
        return
    record = {"rank": rank, "world_size": world, "status": status, "trace": f"rank_{rank}",
              "started_at": 1.0, **extra}
    if host is not None:
        record["hostname"] = host
    if finished is not False:
        record["finished_at"] = 9.0 if finished is True else finished
    (job / "job").mkdir(parents=True, exist_ok=True)
    (job / "job" / f"rank_{rank}.json").write_text(json.dumps(record))


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_collective_the_watchdog_timed_out_is_a_hang_named_from_the_error(
        tmp_path: Path) -> None:
    """Rank 1's all_reduce #2 ran past the process group's timeout: the NCCL watchdog raised
    DistBackendError on it, and torchrun stopped rank 0, which never reached #2."""
    job = tmp_path / "job"
    _rank(job, 0, "killed")
    _collectives(job, 0, [1], waiting=False)
    _rank(job, 1, "script_failed", error=ScriptError("DistBackendError", WATCHDOG))
    _collectives(job, 1, [1, 2], waiting=True)
    w = analyze_job(job)["waits"]
    assert w is not None and w["hung"], w
    assert [(e["kind"], e["ranks"]) for e in w["ends"]] == [
        ("collective_timeout", [1]), ("killed", [0])], w["ends"]
    label, style, texts = wait_headings(w)
    assert (label, style) == ("hung: ", "bold red")
    assert texts[0].startswith(
        "rank 1's collective timed out (ALLREDUCE, NCCL SeqNum=2; the NCCL watchdog): "
        "DistBackendError: [Rank 1] Watchdog caught collective operation timeout:"
    ), texts
    assert "ALLREDUCE #2" not in texts[0], texts  # NCCL's count is not tuidebug's numbering
    assert "rank(s) 0 stopped by the launcher when another rank ended" in texts[0], texts
    assert texts[1] == ("rank(s) 1 wait in collective #2 of group default for rank(s) 0, which "
                        "did not reach it"), texts
    assert any(ln.startswith("rank 1 waits in all_reduce #2") for ln in w["lines"]), w["lines"]
    assert not any("no rank timed out" in t for t in texts), texts


def test_a_rank_the_watchdog_aborted_is_named_from_its_last_words(tmp_path: Path) -> None:
    """The NCCL watchdog's default (TORCH_NCCL_ASYNC_ERROR_HANDLING=3) tears the process down:
    SIGABRT, no Python exception in the trace; the rank's last lines (its record's
    ``last_words``, from its stderr) name the timed-out collective."""
    job = tmp_path / "job"
    _rank(job, 0, "killed")
    _collectives(job, 0, [1, 2, 3], waiting=True)
    _rank(job, 1, "script_failed")
    rec = json.loads((job / "job" / "rank_1.json").read_text())
    said = ("[rank1]:[E1127 06:40:01.1 watchdog.cpp:288] [PG ID 0 PG GUID 0(default_pg) Rank 1] "
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, "
            "NumelIn=1, NumelOut=1, Timeout(ms)=10000) ran for 10043 milliseconds before timing out.")
    (job / "job" / "rank_1.json").write_text(json.dumps(
        {**rec, "exit_code": -6, "last_words": ["a line of the script", said]}))
    _collectives(job, 1, [1, 2], waiting=False)
    w = analyze_job(job)["waits"]
    assert w is not None and w["hung"], w
    assert [(e["kind"], e["ranks"]) for e in w["ends"]] == [
        ("collective_timeout", [1]), ("killed", [0])], w["ends"]
    assert w["ends"][0]["text"].startswith(
        "rank 1's collective timed out (ALLREDUCE, NCCL SeqNum=3; the NCCL watchdog): "
        "[rank1]:"), w["ends"]


def test_an_ordinary_error_is_no_hang(tmp_path: Path) -> None:
    """Rank 1 raised a ValueError: said with its error, under ``stopped:``, no hang."""
    job = tmp_path / "job"
    _rank(job, 0, "killed")
    _collectives(job, 0, [1], waiting=True)
    _rank(job, 1, "script_failed", error=ScriptError("ValueError", "bad batch\nmore"))
    w = analyze_job(job)["waits"]
    assert w is not None and not w["hung"], w
    label, _, texts = wait_headings(w)
    assert label == "stopped: " and texts[0] == (
        "rank 1 script_failed: ValueError: bad batch; rank(s) 0 stopped by the launcher when "
        "another rank ended; where each rank was:"), texts


@pytest.mark.slow
def test_a_rank_torchrun_stops_with_sigterm_writes_killed_and_dies_of_it(tmp_path: Path) -> None:
    """A rank's ``tuidebug trace`` under a launcher, its process group sent SIGTERM as torchrun
    stops the survivors when another rank failed (``os.killpg``): it writes its record
    ``killed`` (exit code -15) and dies of SIGTERM, as the rank would untraced. Before, it had
    no handler: the record stayed ``running`` and the job read "interrupted (Ctrl-C)"."""
    job = tmp_path / "job"
    marker = tmp_path / "running"
    script = tmp_path / "train.py"
    script.write_text(f"import pathlib, time\npathlib.Path({str(marker)!r}).write_text('x')\n"
                      "time.sleep(120)\n")
    env = dict(os.environ, PYTHONPATH=pythonpath(), RANK="0", WORLD_SIZE="2", LOCAL_RANK="0")
    p = subprocess.Popen([sys.executable, "-m", "tuidebug.cli", "trace", "--no-check", "-o",
                          str(job), str(script)], env=env, start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while not marker.exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert marker.exists(), p.stderr.read() if p.poll() is not None else "no start"
        os.killpg(p.pid, signal.SIGTERM)  # as torchrun's SubprocessHandler.close does
        assert p.wait(timeout=60) == -signal.SIGTERM  # the job's outcome unchanged
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        p.stderr.close()
    rec = json.loads((job / "job" / "rank_0.json").read_text())
    assert (rec["status"], rec["exit_code"], rec["ended_by"]) == ("killed", -15, "SIGTERM"), rec
    _collectives(job, 0, [1], waiting=True)
    _rank(job, 1, "script_failed", error=ScriptError("ValueError", "bad batch"))
    w = analyze_job(job)["waits"]
    assert w is not None and not w["hung"], w
    assert [(e["kind"], e["ranks"], e["text"]) for e in w["ends"]] == [
        ("raised", [1], "rank 1 script_failed: ValueError: bad batch"),
        ("killed", [0], "rank 0 ended by SIGTERM (the launcher stops every rank when one ends)")
    ], w["ends"]
    assert wait_headings(w)[0] == "stopped: "


def test_a_record_left_running_while_another_rank_raised_is_no_interrupt(
        tmp_path: Path) -> None:
    """Rank 0's record was left ``running`` (SIGKILL, or a tuidebug before the SIGTERM
    handler) while rank 1 raised: the launcher stopped it, said under ``stopped:``, never
    "interrupted (Ctrl-C)". A ``running`` record of another host is not known from here."""
    job = tmp_path / "job"
    _rank(job, 0, "running", writer_pid=_dead_pid(), finished=False)
    _collectives(job, 0, [1], waiting=True)
    _rank(job, 1, "script_failed", error=ScriptError("ValueError", "bad batch"))
    w = analyze_job(job)["waits"]
    assert w is not None and not w["hung"], w
    assert [(e["kind"], e["ranks"]) for e in w["ends"]] == [("raised", [1]), ("killed", [0])]
    label, _, texts = wait_headings(w)
    assert label == "stopped: ", (label, texts)
    assert "interrupted" not in texts[0] and "rank(s) 0 left their records running, with no " \
        "end: stopped before they could say how" in texts[0], texts
    far = tmp_path / "far"
    _rank(far, 0, "running", writer_pid=_dead_pid(), finished=False, host="node-b.invalid")
    _collectives(far, 0, [1], waiting=True)
    _rank(far, 1, "running", writer_pid=_dead_pid(), finished=False)
    _collectives(far, 1, [1], waiting=True)
    ends = analyze_job(far)["waits"]["ends"]
    assert [(e["kind"], e["ranks"]) for e in ends] == [("interrupted", [1]),
                                                       ("not_known_here", [0])], ends
    assert ends[1]["text"] == ("rank(s) 0 on another host (node-b.invalid): their records say "
                               "running; whether they still run, or how they ended, is not "
                               "known from this host"), ends


def test_a_compile_error_does_not_hide_the_watchdog_abort(tmp_path: Path) -> None:
    """Rank 1's compile failed earlier (an accuracy mismatch; the script ran on), then the NCCL
    watchdog aborted it (SIGABRT, its last words): a hang, named from those words — not "ended
    by SIGABRT" with the compile's error."""
    job = tmp_path / "job"
    _rank(job, 0, "killed")
    _collectives(job, 0, [1, 2, 3], waiting=True)
    said = ("[rank1]:[E1127 06:40:01.1 watchdog.cpp:288] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
            "Timeout(ms)=10000) ran for 10043 milliseconds before timing out.")
    _rank(job, 1, "failed", compile_error=ErrorRecord(phase="accuracy", type="AccuracyError",
                                                      message="outputs differ", graph="0_0"),
          exit_code=-6, last_words=["a line", said])
    _collectives(job, 1, [1, 2], waiting=False)
    report = analyze_job(job)
    w = report["waits"]
    assert w is not None and w["hung"], w
    assert [(e["kind"], e["ranks"]) for e in w["ends"]] == [
        ("collective_timeout", [1]), ("killed", [0])], w["ends"]
    assert report["ranks"][1]["error"]["message"] == said


def test_timeouts_after_a_rank_raised_are_no_hang(tmp_path: Path) -> None:
    """Rank 0 raised a ValueError; ranks 1 and 2, left waiting for it, reached the NCCL
    watchdog's timeout: ``stopped:``, rank 0 first, the others said to have timed out waiting
    after it ended — not ``hung:`` with the timeouts ahead of the rank that raised."""
    job = tmp_path / "job"
    _rank(job, 0, "script_failed", world=3, error=ScriptError("ValueError", "bad batch"),
          finished=5.0, host="h")
    _collectives(job, 0, [1], waiting=False)
    for r in (1, 2):
        _rank(job, r, "script_failed", world=3, finished=700.0, host="h",
              error=ScriptError("DistBackendError", WATCHDOG))
        _collectives(job, r, [1, 2], waiting=True)
    w = analyze_job(job)["waits"]
    assert w is not None and not w["hung"], w
    assert [(e["kind"], e["ranks"]) for e in w["ends"]] == [
        ("raised", [0]), ("timeout_after_raise", [1]), ("timeout_after_raise", [2])], w["ends"]
    assert w["ends"][1]["text"].startswith(
        "rank 1's collective then timed out (ALLREDUCE, NCCL SeqNum=2; the NCCL watchdog), "
        "waiting for rank(s) 0, which had ended: DistBackendError:"), w["ends"]
    label, _, texts = wait_headings(w)
    assert label == "stopped: " and texts[0].startswith(
        "rank 0 script_failed: ValueError: bad batch; rank 1's collective then timed out"), texts
    # on one host, a raise that came after the timeouts (the clock says so), or one a dead peer
    # causes, is no first cause: the hang stands
    for rank0, end in ((ScriptError("ValueError", "bad batch"), 900.0),
                       (ScriptError("RuntimeError", "Connection closed by peer"), 5.0)):
        other = tmp_path / f"other{end}"
        _rank(other, 0, "script_failed", world=2, error=rank0, finished=end, host="h")
        _rank(other, 1, "script_failed", world=2, finished=700.0, host="h",
              error=ScriptError("DistBackendError", WATCHDOG))
        _collectives(other, 1, [1, 2], waiting=True)
        w = analyze_job(other)["waits"]
        assert w["hung"] and w["ends"][0]["kind"] == "collective_timeout", w["ends"]


def test_records_left_running_are_an_interrupted_job(tmp_path: Path) -> None:
    """Ctrl-C ends ``tuidebug trace`` and torchrun before either writes an end: both records
    say ``running`` and no rank ran out of time nor was stopped by another's end. A rank whose
    trace's writer is alive still runs."""
    job = tmp_path / "job"
    _rank(job, 0, "running", writer_pid=_dead_pid(), finished=False)
    _collectives(job, 0, [1], waiting=True)
    _rank(job, 1, "running", writer_pid=_dead_pid(), finished=False)
    _collectives(job, 1, [1], waiting=True)
    w = analyze_job(job)["waits"]
    assert w is not None and not w["hung"], w
    label, style, texts = wait_headings(w)
    assert (label, style) == ("interrupted: ", "bold yellow"), (label, style)
    assert texts == ["rank(s) 0, 1 left their records running, with no end: the job was "
                     "interrupted (Ctrl-C) or killed before it could say how it ended; where "
                     "each rank was:"], texts
    live = tmp_path / "live"
    _rank(live, 0, "running", writer_pid=os.getpid(), finished=False)
    _collectives(live, 0, [1], waiting=True)
    _rank(live, 1, "running", writer_pid=_dead_pid(), finished=False)
    _collectives(live, 1, [1], waiting=True)
    ends = analyze_job(live)["waits"]["ends"]
    assert [(e["kind"], e["ranks"]) for e in ends] == [("interrupted", [1]), ("running", [0])]


def test_ranks_that_ended_on_sigint_are_interrupted(tmp_path: Path) -> None:
    """Ctrl-C that reaches the scripts: each rank ends on SIGINT (exit code -2, a
    KeyboardInterrupt its trace records) and writes its end: interrupted, with where it was."""
    job = tmp_path / "job"
    for rank in (0, 1):
        _rank(job, rank, "script_failed", error=ScriptError("KeyboardInterrupt", ""))
        rec = json.loads((job / "job" / f"rank_{rank}.json").read_text())
        (job / "job" / f"rank_{rank}.json").write_text(json.dumps({**rec, "exit_code": -2}))
    _collectives(job, 0, [1], waiting=True)
    _collectives(job, 1, [], waiting=False)  # started, issued none (no log: not known)
    w = analyze_job(job)["waits"]
    assert w is not None and not w["hung"], w
    assert [(e["kind"], e["ranks"]) for e in w["ends"]] == [("interrupted", [0, 1])], w
    label, _, texts = wait_headings(w)
    assert label == "interrupted: " and texts == [
        "rank(s) 0, 1 interrupted (SIGINT: Ctrl-C, or the launcher passing it on)",
        "rank(s) 0 wait in collective #1 of group default for rank(s) 1, which did not reach "
        "it"], texts
    assert w["lines"][0].startswith("rank 0 waits in all_reduce #1"), w["lines"]


def test_a_rank_with_no_record_is_not_known(tmp_path: Path) -> None:
    """A world of 3 with records of ranks 0 and 1 only: rank 2 is neither said stopped nor
    placed; it is said not known."""
    job = tmp_path / "job"
    _rank(job, 0, "killed", world=3)
    _collectives(job, 0, [1], waiting=True)
    _rank(job, 1, "script_failed", world=3, error=ScriptError("ValueError", "bad batch"))
    w = analyze_job(job)["waits"]
    assert w is not None and not w["hung"]
    assert ("unknown", [2]) in [(e["kind"], e["ranks"]) for e in w["ends"]], w["ends"]
    assert "rank(s) 2: no record; where they were is not known" in w["lines"], w["lines"]
    label, _, texts = wait_headings(w)
    assert label == "stopped: " and texts[0].endswith(
        "nothing is known of how rank(s) 2 ended (no record); where each rank was:"), texts
    assert not any("no rank timed out" in t for t in texts), texts


# a training script whose SIGTERM handler saves a checkpoint (1 s), says so on stderr through
# logging, and exits 3
SAVES_ON_SIGTERM = """import logging, pathlib, signal, sys, time
logging.basicConfig()

def save(signum, frame):
    time.sleep(1)
    logging.getLogger("train").warning("saving a checkpoint on SIGTERM")
    pathlib.Path({saved!r}).write_text("saved")
    sys.exit(3)

signal.signal(signal.SIGTERM, save)
pathlib.Path({marker!r}).write_text("x")
time.sleep(120)
"""


def _stopped(cmd: list[str], marker: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run ``cmd`` in a process group of its own, wait for ``marker``, send SIGTERM to the
    group (torchrun's ``os.killpg``); its exit code and stderr."""
    p = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while not marker.exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert marker.exists(), p.stderr.read() if p.poll() is not None else "no start"
        os.killpg(p.pid, signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    return p.returncode, err


@pytest.mark.slow
def test_a_rank_sent_sigterm_waits_for_the_script_and_ends_as_it_ended(tmp_path: Path) -> None:
    """torchrun's SIGTERM to a rank's process group reaches the script too; its own handler
    saves a checkpoint (1 s) and exits 3. Untraced the rank exits 3 with the file written;
    traced it did the same only by luck: ``tuidebug trace`` died of SIGTERM at once (the rank
    exited -15, the script orphaned, its stderr pipe broken). Now the rank waits for the script
    and exits 3, the checkpoint written, its log line passed through; the record says killed
    by SIGTERM with the script's exit code 3."""
    env = dict(os.environ, PYTHONPATH=pythonpath())
    ends = {}
    for how in ("untraced", "traced"):
        marker, saved = tmp_path / f"{how}.running", tmp_path / f"{how}.saved"
        script = tmp_path / f"{how}.py"
        script.write_text(SAVES_ON_SIGTERM.format(saved=str(saved), marker=str(marker)))
        cmd = [sys.executable, str(script)] if how == "untraced" else [
            sys.executable, "-m", "tuidebug.cli", "trace", "--no-check", "-o",
            str(tmp_path / "job"), str(script)]
        code, err = _stopped(cmd, marker, {**env, "RANK": "0", "WORLD_SIZE": "2",
                                           "LOCAL_RANK": "0"} if how == "traced" else env)
        ends[how] = (code, saved.is_file(), "saving a checkpoint on SIGTERM" in err)
        assert "BrokenPipeError" not in err, err[-3000:]
    assert len(ends) == 2
    assert ends["untraced"] == (3, True, True), ends
    assert ends["traced"] == ends["untraced"], ends  # the job's outcome unchanged
    rec = json.loads((tmp_path / "job" / "job" / "rank_0.json").read_text())
    assert (rec["status"], rec["exit_code"], rec["ended_by"]) == ("killed", 3, "SIGTERM"), rec
    assert "the script then ended: exit status 3" in rec["note"], rec


def test_a_sigterm_after_the_script_ended_keeps_its_end(tmp_path: Path) -> None:
    """The rank's SIGTERM handler once the script has ended (its end written, the trace still
    being read): the record keeps the script's end — it read ``killed`` for a script that
    exited 0 — and the rank does not die of it (its exit code is the script's)."""
    from tuidebug.cli.rank_sigterm import RankSigterm
    from tuidebug.trace.jobs import job

    root = tmp_path / "job"
    (root / "job").mkdir(parents=True)
    record = {"rank": 0, "world_size": 2, "status": "running"}
    before = signal.getsignal(signal.SIGTERM)
    try:
        sigterm = RankSigterm(root, record)
        sigterm.started(os.getpid())
        record.update(sigterm.end(0))
        job.write_record(root, record)
        os.kill(os.getpid(), signal.SIGTERM)  # a real signal, to this process
        time.sleep(0.2)
    finally:
        signal.signal(signal.SIGTERM, before)
    rec = json.loads((root / "job" / "rank_0.json").read_text())
    assert (rec["status"], rec["exit_code"]) == ("unknown", 0), rec
    assert "ended_by" not in rec, rec


def test_a_sigterm_after_the_script_exited_but_before_its_end_was_taken(tmp_path: Path) -> None:
    """torchrun's SIGTERM between the script's process ending (exit 0, not reaped yet) and the
    rank taking its end (``sigterm.end``): the handler wrote ``killed`` and the end said
    "sent SIGTERM before it finished" for a script that had exited 0. It asks first whether
    the script's process has ended (without reaping it: its exit code still comes back)."""
    from tuidebug.cli.rank_sigterm import RankSigterm
    from tuidebug.trace.jobs import job

    root = tmp_path / "job"
    (root / "job").mkdir(parents=True)
    record = {"rank": 0, "world_size": 2, "status": "running"}
    before = signal.getsignal(signal.SIGTERM)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        sigterm = RankSigterm(root, record)
        sigterm.started(child.pid)
        deadline = time.monotonic() + 60
        while os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            assert time.monotonic() < deadline, "the child did not exit"
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGTERM)  # a real signal, to this process
        time.sleep(0.2)
        assert child.wait(timeout=30) == 0  # its exit code still comes back
        record.update(sigterm.end(child.returncode))
        job.write_record(root, record)
    finally:
        signal.signal(signal.SIGTERM, before)
        if child.poll() is None:
            child.kill()
    rec = json.loads((root / "job" / "rank_0.json").read_text())
    assert (rec["status"], rec["exit_code"]) == ("unknown", 0), rec
    assert "ended_by" not in rec and not sigterm.received, rec


def test_a_rank_killed_while_it_waited_for_its_script_is_closed(tmp_path: Path) -> None:
    """A rank sent SIGTERM wrote ``killed`` with no exit code (waiting for its script), then
    torchrun SIGKILLed it (its script ran on past 30 s): once torchrun returns, its record says
    so, not "waiting for the script to end"; a rank still alive (this process) is left."""
    import socket

    from tuidebug.cli.distributed import _close_records
    from tuidebug.trace.jobs import job

    root = tmp_path / "job"
    (root / "job").mkdir(parents=True)
    for rank, pid in ((0, _dead_pid()), (1, os.getpid())):
        job.write_record(root, {"rank": rank, "world_size": 2, "hostname": socket.gethostname(),
                                "pid": pid, "status": "killed", "exit_code": None,
                                "ended_by": "SIGTERM", "note": "… waiting for the script to end"})
    _close_records(root)
    recs = [json.loads((root / "job" / f"rank_{r}.json").read_text()) for r in (0, 1)]
    assert len(recs) == 2
    assert recs[0]["status"] == "killed" and recs[0]["note"].startswith(
        "sent SIGTERM, then ended (SIGKILL) before its script did"), recs[0]
    assert recs[1]["note"] == "… waiting for the script to end", recs[1]


def test_a_sigterm_before_the_script_started_says_so(tmp_path: Path) -> None:
    """torchrun's SIGTERM reaching a rank before its script started: the record said "waiting
    for the script to end" with no exit code, and the launcher's close then read it as a rank
    SIGKILLed while it waited for a script (there was none). A real SIGTERM to a real process
    that made the handler and started nothing: it dies of it, its record says so."""
    import subprocess
    import sys
    import textwrap

    root = tmp_path / "job"
    (root / "job").mkdir(parents=True)
    code = textwrap.dedent(f"""
        import os, signal, time
        from pathlib import Path
        from tuidebug.cli.rank_sigterm import RankSigterm
        RankSigterm(Path({str(root)!r}), {{"rank": 0, "world_size": 2, "status": "running"}})
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == -signal.SIGTERM, (done.returncode, done.stderr)
    rec = json.loads((root / "job" / "rank_0.json").read_text())
    assert (rec["status"], rec["exit_code"]) == ("killed", -signal.SIGTERM), rec
    assert "before its script started" in rec["note"] and "waiting" not in rec["note"], rec
