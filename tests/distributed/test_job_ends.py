"""How real jobs that did not finish ended (torchrun + gloo, 2 ranks, nothing compiled).

A job interrupted mid-collective (Ctrl-C): ``tuidebug trace --nproc-per-node 2`` on
``rank_job.py block`` (gloo, nothing compiled: rank 0 waits in an all_reduce, rank 1 sleeps),
SIGINT to the launching process group once rank 0's progress log shows it in the all_reduce.
``info`` heads it ``interrupted:`` and places rank 0 in the all_reduce (the capture logged it
``done`` though it raised), never "stopped: no rank timed out: the ranks were stopped when
another ended".

A collective that ran past its group's timeout (``rank_job.py ctimeout``: 5 s): gloo's
"Timed out waiting 5000ms for recv operation" on rank 0, rank 1 stopped by torchrun — a hang,
named from rank 0's error (the NCCL watchdog's is the GPU's like; tests/trace/test_rank_ends.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.distributed.conftest import SCRIPT, _env
from tests.distributed.test_ranks import _cli
from tuidebug.trace.jobs.progress import progress_path

pytestmark = pytest.mark.slow


def _in_all_reduce(job: Path) -> bool:
    try:
        lines = progress_path(job, 0).read_text().splitlines()
    except OSError:
        return False
    events = [json.loads(ln) for ln in lines if ln.strip()]
    return any(e.get("event") == "collective" and e.get("op") == "all_reduce" for e in events) \
        and not any(e.get("event") == "done" for e in events) \
        and progress_path(job, 1).is_file()


def test_a_job_interrupted_in_a_collective_is_said_interrupted(tmp_path: Path) -> None:
    job = tmp_path / "job"
    cmd = [sys.executable, "-m", "tuidebug.cli", "trace", "--nproc-per-node", "2", "--no-check",
           "-o", str(job), str(SCRIPT), "block"]
    # its own process group, as a terminal's foreground job: Ctrl-C reaches the whole group
    p = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not _in_all_reduce(job):
            assert p.poll() is None and time.monotonic() < deadline, p.communicate(timeout=30)
            time.sleep(0.5)
        time.sleep(1.0)  # rank 1 in its sleep (it logged its start before rank 0's collective)
        os.killpg(p.pid, signal.SIGINT)
        p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    records = [json.loads((job / "job" / f"rank_{r}.json").read_text()) for r in (0, 1)]
    # SIGINT reaches each rank's script (gloo's wait gives way to it) and the rank ends on it
    # and says so (exit code -2); or torchrun, stopping the job, kills the rank before it
    # writes its end (its record left running): which one is the machine's timing; both are
    # an interrupted rank
    for r in records:
        assert r.get("exit_code") == -2 or (r["status"] == "running"
                                            and "finished_at" not in r), records
    report = json.loads(_cli("info", "--json", str(job)).stdout)
    w = report["waits"]
    assert w is not None and not w["hung"], w
    assert {e["kind"] for e in w["ends"]} == {"interrupted"}, w["ends"]
    assert sorted(r for e in w["ends"] for r in e["ranks"]) == [0, 1], w["ends"]
    # the all_reduce never completed: the capture logs no "done" for a call that raised
    assert any(ln.startswith("rank 0 waits in all_reduce #1 (rank_job.py:") for ln in w["lines"]
               ), w["lines"]
    text = _cli("info", str(job)).stdout
    assert "interrupted: rank(s) " in " ".join(text.split()), text
    assert "no rank timed out" not in text and "hung:" not in text, text


def test_a_collective_that_timed_out_is_a_hang_named_from_the_error(tmp_path: Path) -> None:
    job = tmp_path / "job"
    proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", "trace", "--nproc-per-node", "2",
                           "--no-check", "-o", str(job), str(SCRIPT), "ctimeout"],
                          env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    report = json.loads(_cli("info", "--json", str(job)).stdout)
    assert [r["status"] for r in report["ranks"]] == ["script_failed", "killed"], report["ranks"]
    # what rank 0 wrote last is kept in its record (read where a rank raised nothing)
    words = json.loads((job / "job" / "rank_0.json").read_text()).get("last_words") or []
    assert any("Timed out waiting 5000ms" in w for w in words), words
    w = report["waits"]
    assert w is not None and w["hung"], w
    assert [(e["kind"], e["ranks"]) for e in w["ends"]] == [
        ("collective_timeout", [0]), ("killed", [1])], w["ends"]
    assert "Timed out waiting 5000ms for recv operation" in w["ends"][0]["text"], w["ends"]
    line = next(i for i, ln in enumerate(SCRIPT.read_text().splitlines(), 1)
                if "CTIMEOUT rank 0" in ln)
    assert f"rank 0 waits in all_reduce #1 (rank_job.py:{line})" in w["lines"], w["lines"]
    text = " ".join(_cli("info", str(job)).stdout.split())
    assert "hung: rank 0's collective timed out (the process group's timeout): RuntimeError:" \
        in text or "hung: rank 0's collective timed out (the process group's timeout): " \
        "DistBackendError:" in text, text
