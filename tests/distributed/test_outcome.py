"""Tracing never changes a job's outcome: each rank exits with the script's own code and prints
the script's own output; what tuidebug has to say (no Inductor graph, and what Dynamo did
instead) is in the trace and ``info`` (real torchrun, gloo, 2 ranks; the capture child for the single-rank cases)."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import pythonpath
from tests.distributed.conftest import SCRIPT, _env, plain_job, trace_job
from tests.distributed.test_ranks import _cli, _info


def _script_lines(text: str) -> list[str]:
    """Each rank's loss line: found anywhere in the text, since two ranks writing to one stdout
    at once can glue their lines ('rank 0: loss -3.5825rank 1: loss -3.5825', seen in CI)."""
    return sorted(re.findall(r"rank \d: loss -?\d+\.\d+", text))


@pytest.mark.slow
def test_a_ddp_job_that_compiles_no_graph_ends_as_it_does_untraced(tmp_path: Path) -> None:
    """DDP of torch's own modules under torch.compile: Dynamo skips DDP's frames and no
    Inductor graph is compiled. Untraced the job exits 0; traced it must too, every rank with
    the script's exit code and output, and the missing graph a note, not a failure."""
    plain = plain_job("ddp")
    job = tmp_path / "ddp"
    traced = trace_job(job, "ddp")
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert traced.returncode == plain.returncode, traced.stderr[-3000:]
    lines = _script_lines(plain.stdout)
    assert len(lines) == 2, plain.stdout
    assert _script_lines(traced.stdout) == lines  # the same losses, printed by each rank
    assert "never compiled" not in traced.stderr and "error" not in traced.stderr.lower()
    info = _info(job)
    ranks = {r["rank"]: r for r in info["ranks"]}
    assert [(ranks[r]["status"], ranks[r]["exit_code"], ranks[r]["graphs"]) for r in (0, 1)] \
        == [("ok", 0, 0), ("ok", 0, 0)]
    assert all(ranks[r]["compiles"] > 0 for r in (0, 1))  # Dynamo ran; no graph reached Inductor
    assert info["divergence"] is None
    [note] = [n for n in info["notes"] if n["kind"] == "no_graph"]
    assert note["ranks"] == [0, 1]
    text = _cli("info", str(job)).stdout
    assert "ranks agree" in text and "ended differently" not in text
    assert "note: rank(s) 0-1: no Inductor graph" in " ".join(text.split())
    for r in (0, 1):
        rec = json.loads((job / "job" / f"rank_{r}.json").read_text())
        assert rec["exit_code"] == 0 and "no Inductor graph" in rec["note"]
    # what Dynamo did instead, in the rank's own info: DDP's frames skipped, the modules inside
    # torch's own — never "did not call a torch.compile'd function", nor another backend
    rank = _cli("info", str(job), "--rank", "0")
    assert rank.returncode == 0, rank.stderr
    said = " ".join(rank.stdout.split())
    assert "Dynamo does not trace DistributedDataParallel's own frames (its forward, " \
        "_inside_ddp_forward)" in said, said
    assert "torch's own modules (" in said and "so they ran eagerly" in said, said
    assert "traced no tensor operation" in said, said
    assert "_inside_ddp_forward" in said.split("graph breaks:", 1)[-1]  # the break's cause
    assert "torch.compile'd function" not in said and "never handed a frame" not in said
    assert "backend other than Inductor" not in said, said


@pytest.mark.slow
def test_a_ddp_job_that_ends_its_group_before_freeing_the_model_ends(tmp_path: Path) -> None:
    """``rank_job.py ddpexit``: DDP trained 4 steps, ``destroy_process_group()`` while the
    model lives, the model freed as the function returns (the reducer holds the group's last
    reference). Untraced it ends in seconds; traced, a rank hung at exit until killed (the
    capture's hook left a Python callback needing the GIL on gloo's thread, and the group's
    destructor joined that thread with the GIL held): 150 s, killed, where after the fix it
    ends in 45 s (2 loaded cores). The hang is a race (this job under pytest once ended
    before the fix): test_ddp_after_capture checks what prevents it, in-process; this is the
    job end to end. ``--timeout`` ends a hang in minutes, not the test's 10."""
    job = tmp_path / "ddpexit"
    traced = trace_job(job, "ddpexit", extra=["--timeout", "240"])
    assert traced.returncode == 0, traced.stderr[-3000:]
    digests = re.findall(r"rank \d digest (-?\d+\.\d+)", traced.stdout)
    assert len(digests) == 2 and len(set(digests)) == 1, traced.stdout
    for r in (0, 1):
        rec = json.loads((job / "job" / f"rank_{r}.json").read_text())
        assert (rec["status"], rec["exit_code"]) == ("ok", 0), rec


@pytest.mark.slow
@pytest.mark.parametrize("body, code, said", [
    ("import sys\nprint('bye')\nsys.exit(7)\n", 7, "bye"),
    ("import torch\nraise ValueError('bad config')\n", 1, "ValueError: bad config"),
    ("import sys\nsys.exit('a message')\n", 1, "a message"),
    ("import sys\nsys.exit(-1)\n", 255, ""),  # as the C exit() takes it: not a signal
    # Python ends by SIGINT on an uncaught KeyboardInterrupt (main: exit 130)
    ("import torch\nraise KeyboardInterrupt\n", -2, "KeyboardInterrupt"),
])
def test_a_rank_exits_with_the_scripts_own_code(tmp_path: Path, body: str, code: int,
                                                 said: str) -> None:
    """A rank's capture child (``--own-exit``) exits as ``python script.py`` does, nothing
    compiled or not; the trace still records how the script ended."""
    script = tmp_path / "s.py"
    script.write_text(body)
    env = dict(os.environ, PYTHONPATH=pythonpath())
    untraced = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              timeout=300)
    proc = subprocess.run(
        [sys.executable, "-m", "tuidebug.compiler.run_script", "--out", str(tmp_path / "t"),
         "--no-check", "--own-exit", str(script)], env=env, capture_output=True, text=True,
        timeout=300)
    assert untraced.returncode == code
    assert proc.returncode == code, proc.stderr[-2000:]
    assert said in proc.stdout + proc.stderr
    assert untraced.stdout == proc.stdout
    m = json.loads((tmp_path / "t" / "manifest.json").read_text())
    assert m["status"] == "ok" and (m.get("script_error") or m.get("script_exit_code")), m


@pytest.fixture(scope="module")
def budget_job(tmp_path_factory: pytest.TempPathFactory
               ) -> tuple[Path, list[str], subprocess.CompletedProcess[str]]:
    """``rank_job.py budget`` untraced (its lines) and traced with ``--profile``."""
    plain = plain_job("budget")
    assert plain.returncode == 0, plain.stderr[-3000:]
    lines = sorted(re.findall(r"rank \d: \w+ -?\d+\.\d+", plain.stdout))
    assert len(lines) == 7, plain.stdout  # budget, flaky, eager on each rank, solo on rank 0
    job = tmp_path_factory.mktemp("budget") / "budget"
    env = dict(os.environ, PYTHONPATH=pythonpath())
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK"):
        env.pop(name, None)
    cmd = [sys.executable, "-m", "tuidebug.cli", "trace", "--nproc-per-node", "2", "--profile",
           "3", "--timeout", "300", "-o", str(job), str(Path(__file__).parent / "rank_job.py"),
           "budget"]
    traced = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    return job, lines, traced


def _calls(job: Path, rank: int) -> dict[str, dict]:
    return {c["callable"]: c for c in json.loads(
        (job / f"rank_{rank}" / "profile.json").read_text()).get("calls", [])}


@pytest.mark.slow
def test_a_rank_without_memory_for_the_copies_makes_every_rank_skip_the_timing(
        budget_job: tuple[Path, list[str], subprocess.CompletedProcess[str]]) -> None:
    """``--profile`` times each compiled callable's whole call in a fixed number of rounds on
    every rank, so that the collectives inside pair up. A rank that could not make the copies
    the re-runs need (its budget: 0 bytes, rank 1 only) stopped alone, and the others waited
    forever in the timed calls' all_reduce. Now the ranks agree: every rank's entry says
    not_measured (rank 1 why, rank 0 that rank 1 could not), and the job ends as untraced."""
    job, lines, traced = budget_job
    assert traced.returncode == 0, traced.stderr[-3000:]
    assert sorted(re.findall(r"rank \d: \w+ -?\d+\.\d+", traced.stdout)) == lines
    said = {}
    for r in (0, 1):
        call = _calls(job, r)["budget.<locals>.step"]
        said[r] = call.get("not_measured", "")
        # with rank 1 alone skipping, rank 0's timed all_reduce failed ("Connection closed by
        # peer" once rank 1 left; a hang while it lives): its trace said the graph failed
        manifest = json.loads((job / f"rank_{r}" / "manifest.json").read_text())
        assert manifest.get("error") is None, (r, manifest["error"])
        assert not any("whole call" in w for w in manifest.get("warnings", [])), manifest
    # a callable rank 0 alone makes, communicating with no rank, is not agreed on: no rank
    # waits for it (an agreement there left rank 0 waiting for a rank that never asks)
    solo = _calls(job, 0)["budget.<locals>.solo"]
    assert "not_measured" not in solo and solo["rounds"] >= 10, solo
    assert "over the budget of 0" in said[1], said
    assert said[0].startswith("rank 1 could not time the call (what the call reaches was more "
                              "than the walk looks at, or it had not the memory"), said


@pytest.mark.slow
def test_a_rank_whose_timed_call_raises_leaves_no_rank_waiting(
        budget_job: tuple[Path, list[str], subprocess.CompletedProcess[str]]) -> None:
    """``flaky`` raises on rank 1 at its fourth call: the user's call is its first, the
    learning re-run its second, and the fourth is in the timed rounds' warm-up. Rank 1 then
    returned not_measured and went on with the script while rank 0 went on with its rounds,
    waiting in their all_reduce for a rank that had left (a hang, or "Connection closed by
    peer" once rank 1 exited). Now the rank that raised makes the rest of the fixed rounds,
    and the ranks agree after them: both entries say not_measured (rank 1 why, rank 0 that
    rank 1 could not), and the job ends as untraced."""
    job, lines, traced = budget_job
    assert traced.returncode == 0, traced.stderr[-3000:]
    assert sorted(re.findall(r"rank \d: \w+ -?\d+\.\d+", traced.stdout)) == lines
    said = {r: _calls(job, r)["budget.<locals>.flaky"].get("not_measured", "") for r in (0, 1)}
    assert "RuntimeError: rank 1 fails its fourth call" in said[1], said
    assert said[0].startswith("rank 1 could not time the call (a timed call of it raised)"), said


@pytest.mark.slow
def test_an_eager_collective_makes_the_ranks_time_the_call_together(
        budget_job: tuple[Path, list[str], subprocess.CompletedProcess[str]]) -> None:
    """``eager_sum``'s all_reduce is eager, after a graph break: no compiled graph issues a
    collective and no DDP module is called, so each rank timed the call alone, in rounds of
    its own number, and rank 1, raising in them, left rank 0 waiting in their all_reduce.
    Whether the ranks time a call together is now whether the user's call issued a collective
    (counted while it ran): both make the fixed rounds and agree after them."""
    job, lines, traced = budget_job
    assert traced.returncode == 0, traced.stderr[-3000:]
    assert sorted(re.findall(r"rank \d: \w+ -?\d+\.\d+", traced.stdout)) == lines
    said = {r: _calls(job, r)["budget.<locals>.eager_sum"].get("not_measured", "")
            for r in (0, 1)}
    assert "RuntimeError: rank 1 fails its fourth eager call" in said[1], said
    assert said[0].startswith("rank 1 could not time the call (a timed call of it raised)"), said


@pytest.mark.slow
def test_a_rank_that_cannot_count_its_collectives_leaves_no_rank_waiting(tmp_path: Path) -> None:
    """Whether the ranks time a call together (``--profile``) is decided from the collectives
    counted while the user's call ran. Rank 1's counter cannot be installed here (its progress
    log's path is a directory: a disk error of that rank alone); rank 1 then timed nothing and
    went on with its loop while rank 0, counting the call's all_reduce, entered the ranks'
    agreement: rank 1's next all_reduce met it, and both waited forever. Now every rank says
    whether it counts through the process group's own store, and no rank times a call that
    talks to a rank that does not count: the job ends as untraced, and each rank's profile says
    why its call was not timed. Run under the user's own torchrun (``tuidebug trace`` per rank,
    as the launcher runs it), so that the job folder can hold the fault."""
    plain = plain_job("counted")
    assert plain.returncode == 0, plain.stderr[-3000:]
    lines = sorted(re.findall(r"rank \d: counted \d -?\d+\.\d+", plain.stdout))
    assert len(lines) == 6, plain.stdout
    job = tmp_path / "counted"
    blocked = job / "job" / "rank_1.progress.jsonl"
    blocked.mkdir(parents=True)  # rank 1's log cannot be opened for writing: its counter fails
    child, out, err = _job_or_hang(job, "counted", 480)
    assert child.returncode == 0, err[-3000:]
    assert sorted(re.findall(r"rank \d: counted \d -?\d+\.\d+", out)) == lines
    said = {r: _calls(job, r)["counted.<locals>.reduce"].get("not_measured", "") for r in (0, 1)}
    assert said[1].startswith("this rank's collectives are not counted (installing the counter "
                              "failed: IsADirectoryError"), said
    assert said[0].startswith("rank 1 does not count its collectives (installing the counter "
                              "failed: IsADirectoryError"), said
    warned = json.loads((job / "rank_1" / "manifest.json").read_text()).get("warnings", [])
    assert any("this rank's collectives are not logged" in w for w in warned), warned
    assert blocked.is_dir() and not any(blocked.iterdir())  # nothing written into the fault
    # the job's own answer says whose collectives were not logged (not only info --rank 1)
    text = _cli("info", str(job)).stdout
    assert "rank 1's collectives were not logged (IsADirectoryError" in text, text
    note = [n for n in _info(job)["notes"] if n["kind"] == "not_logged"]
    assert [r["rank"] for n in note for r in n["ranks"]] == [1], note


def _job_or_hang(job: Path, mode: str, timeout: int, options: tuple[str, ...] = ("--profile", "3")
                 ) -> tuple[subprocess.Popen[str], str, str]:
    """``rank_job.py MODE`` traced with ``options`` (``--profile 3``) under the user's own
    torchrun (``tuidebug trace`` per rank); the test fails (every process ended) where it runs
    past ``timeout``."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           "2", "-m", "tuidebug.cli", "trace", *options, "-o", str(job), str(SCRIPT), mode]
    child = subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.terminate()  # torchrun ends its ranks (SIGTERM, then SIGKILL 30 s later)
        try:
            out, err = child.communicate(timeout=60)
        finally:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
        pytest.fail(f"the job hung (a rank waited for another):\n{err[-3000:]}")
    return child, out, err


@pytest.mark.slow
def test_a_rank_whose_compile_made_no_graph_leaves_no_rank_waiting(tmp_path: Path) -> None:
    """Rank 1's compile of the function makes no graph (all of it in a disabled function), so
    its capture never reached the point where a rank said whether it counts its collectives;
    rank 0, about to time the call with the others, waited for that word as long as the
    process group's store waits (30 minutes under torchrun), while rank 1 waited in its next
    all_reduce for rank 0. Each rank now says its word at its first call that talks to the
    others, whatever else that call does; rank 1's says it had no graph, and no rank times a
    call with it: the job ends as untraced (each result 2 × (sin s + sin s) × 4 elements)."""
    job = tmp_path / "eagerone"
    child, out, err = _job_or_hang(job, "eagerone", 300)
    assert child.returncode == 0, err[-3000:]
    said = sorted(re.findall(r"rank (\d): counted (\d) (-?\d+\.\d+)", out))
    assert [(r, s) for r, s, _ in said] == [(r, s) for r in "01" for s in "012"], out
    assert all(abs(float(v) - 16 * math.sin(int(s))) < 1e-3 for _, s, v in said), said
    calls = {r: _calls(job, r) for r in (0, 1)}
    assert "counted.<locals>.reduce" not in calls[1], calls[1]  # no graph: nothing to time
    said0 = calls[0]["counted.<locals>.reduce"].get("not_measured", "")
    assert said0.startswith("rank 1 had compiled no graph by its first call that talks to the "
                            "others"), said0


@pytest.mark.slow
def test_a_compile_only_one_rank_makes_is_not_re_run_by_the_eager_check(tmp_path: Path) -> None:
    """The eager check (on by default) runs a graph's first call again, eagerly, to judge it. At
    its third call rank 1 alone compiled the function again (another float), and the check's
    re-run issued that graph's all_reduce again on rank 1 alone: it paired with rank 0's next
    all_reduce, rank 0 printed 64 where untraced it prints 60, and rank 1 failed. A graph that
    issues collectives is now run once, as the program asked, and its check says why not
    compared; the job ends as untraced (each result 4 × (Σ_r (s + r) × scale_r + 1))."""
    job = tmp_path / "onerank"
    child, out, err = _job_or_hang(job, "onerank", 400, options=())
    assert child.returncode == 0, err[-3000:]
    said = sorted(re.findall(r"rank (\d): onerank (\d) (-?\d+\.\d+)", out))
    assert [(r, s) for r, s, _ in said] == [(r, s) for r in "01" for s in "0123"], out

    def expected(s: int) -> float:
        return 4 * sum((s + r) * (3.0 if r == 1 and s == 2 else 2.0) for r in (0, 1)) + 4

    assert all(float(v) == expected(int(s)) for _, s, v in said), said
    checks = json.loads((job / "rank_1" / "runtime.json").read_text())["checks"]
    assert len(checks) >= 2, checks  # the compile every rank made, and rank 1's own
    for cid, c in checks.items():
        assert c.get("skipped", "").startswith("not compared: the graph issues collectives "
                                                "(all_reduce)"), (cid, c)
