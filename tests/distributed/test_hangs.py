"""Jobs that hang (torchrun + gloo on the CPU, 2 ranks), each ended by ``tuidebug trace
--timeout``: nothing of a job left running, and where each rank waits named — a rank-dependent
collective order, a compiled function's functional all_reduce that rank 1 stops calling, and a
DDP bucket all-reduce rank 1 never joins.

One file on purpose: each job really blocks until its ``--timeout`` (its ranks idle for
minutes), so the three are traced side by side (``hang_jobs``: one timeout's wait, not three in a
row) on one xdist worker (``--dist loadfile``), started first (``waits``: tests/conftest.py),
while the other workers' compiles use the cores."""

from __future__ import annotations

import json
import os

import pytest

from tests.distributed.conftest import HANG_TIMEOUT_S, SCRIPT, HungJob
from tests.distributed.test_ranks import _cli, _info
from tuidebug.trace.format.reader import Trace

pytestmark = pytest.mark.waits  # the fast CLI check below stays in the fast tier


def _line_of(marker: str) -> int:
    return next(i for i, ln in enumerate(SCRIPT.read_text().splitlines(), 1) if marker in ln)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# -- a rank-dependent collective order (rank_job.py hang) ------------------------------------------

def test_timeout_ends_the_job_and_leaves_nothing_running(hang_jobs: dict[str, HungJob]) -> None:
    job, proc, took = hang_jobs["hang"].out, hang_jobs["hang"].proc, hang_jobs["hang"].took
    assert proc.returncode == 1, proc.stderr
    assert f"stopped after --timeout {HANG_TIMEOUT_S}s" in proc.stderr
    assert took >= HANG_TIMEOUT_S  # it hung until the timeout, not ended early
    # ended by the timeout, not by anything else: each rank's record says so (no bound on how
    # long the end took: that is the machine's speed)
    records = [json.loads((job / "job" / f"rank_{r}.json").read_text()) for r in (0, 1)]
    assert [(r["status"], r.get("note")) for r in records] == [
        ("timed_out", "stopped by --timeout (the job ran too long)")] * 2, records
    # every process of the job: each rank's tuidebug trace and its capture child
    pids = [r["pid"] for r in records]
    pids += [json.loads((job / f"rank_{r}" / "manifest.json").read_text())["pid"] for r in (0, 1)]
    assert len(set(pids)) == 4
    assert not [p for p in pids if _alive(p)], "processes of the job are still running"


def test_each_rank_says_where_it_waits(hang_jobs: dict[str, HungJob]) -> None:
    job = hang_jobs["hang"].out
    info = _info(job)
    ranks = {r["rank"]: r for r in info["ranks"]}
    assert [ranks[r]["status"] for r in (0, 1)] == ["timed_out", "timed_out"]
    for r in (0, 1):  # both compiled their graph, then ran on into the collectives
        p = ranks[r]["progress"]
        assert p["phase"] == "script" and p["graph"] == "0_0-inference", p
        assert p["collective"]["state"] == "waiting" and p["collective"]["seq"] == 1
    c0, c1 = ranks[0]["progress"]["collective"], ranks[1]["progress"]["collective"]
    assert (c0["op"], c0["line"]) == ("broadcast", f"rank_job.py:{_line_of('HANG rank 0')}")
    assert (c1["op"], c1["line"]) == ("all_reduce", f"rank_job.py:{_line_of('HANG rank 1')}")
    [m] = info["waits"]["mismatches"]
    assert m["kind"] == "different_collectives" and m["seq"] == 1
    assert m["ops"] == {"0": "broadcast", "1": "all_reduce"}
    text = _cli("info", str(job)).stdout
    assert f"rank 1 waits in all_reduce #1 (rank_job.py:{_line_of('HANG rank 1')})" in text
    assert "rank 0 waits in broadcast #1" in text and "hung:" in text


def test_timeout_needs_a_distributed_job(tmp_path) -> None:
    proc = _cli("trace", "--timeout", "5", "-o", str(tmp_path / "t"), str(SCRIPT), "same")
    assert proc.returncode == 2 and "--nproc-per-node" in proc.stderr


# -- inside compiled code (rank_job.py chang) ------------------------------------------------------

def test_each_rank_s_wait_inside_compiled_code_is_located(hang_jobs: dict[str, HungJob]) -> None:
    job, proc = hang_jobs["chang"].out, hang_jobs["chang"].proc
    assert proc.returncode == 1 and "stopped after --timeout" in proc.stderr, proc.stderr[-3000:]
    info = _info(job)
    ranks = {r["rank"]: r for r in info["ranks"]}
    assert [ranks[r]["status"] for r in (0, 1)] == ["timed_out", "timed_out"]
    collective_line = f"rank_job.py:{_line_of('STALL the compiled all_reduce')}"
    # rank 0: in the wait of the third all_reduce, issued by the compiled graph's wrapper
    p0 = ranks[0]["progress"]
    assert p0["phase"] == "script" and p0["graph"] == "0_0-inference", p0
    c0 = p0["collective"]
    assert (c0["op"], c0["seq"], c0["state"], c0["in_wait"]) == ("all_reduce", 3, "waiting", True)
    assert c0["line"] == collective_line, c0
    k = c0["compiled"]
    assert (k["graph"], k["index"]) == ("0_0-inference", 0), k
    wrapper = (job / "rank_0" / "graphs" / "0_0-inference" / "code" / "wrapper.py").read_text()
    assert "_c10d_functional.all_reduce_" in wrapper.splitlines()[k["wrapper_line"] - 1]
    [issued] = [c for c in json.loads((job / "rank_0" / "graphs" / "0_0-inference" /
                                       "collectives.json").read_text())["collectives"]
                if c["op"] == "all_reduce_"]
    assert issued["wrapper_line"] == k["wrapper_line"]
    # rank 1: asleep in the script, its two all_reduces done
    p1 = ranks[1]["progress"]
    c1 = p1["collective"]
    assert (c1["seq"], c1["state"], c1["compiled"]["graph"]) == (2, "done", "0_0-inference")
    stack = p1["stack"]
    assert stack["user"] == f"rank_job.py:{_line_of('STALL rank 1')} (compiled_hang)", stack
    assert ranks[0]["progress"]["stack"]["user"].startswith("rank_job.py:"), ranks[0]
    [m] = info["waits"]["mismatches"]
    assert (m["kind"], m["ranks"], m["waits_for"], m["seq"]) == ("waits_for_ranks", [0], [1], 3)
    text = " ".join(_cli("info", str(job)).stdout.split())
    assert (f"rank 0 waits in all_reduce #3 of graph 0_0-inference (collective 0 in it, "
            f"wrapper line {k['wrapper_line']}, {collective_line})") in text, text
    assert (f"rank 1 is at rank_job.py:{_line_of('STALL rank 1')} (compiled_hang)") in text
    assert "outside any collective" in text
    assert "its last collective all_reduce #2 of graph 0_0-inference" in text
    assert "was waited for" in text and "may wait for it" not in text
    # each rank's own trace: stopped by --timeout while it ran, not crashed
    assert [Trace(job / f"rank_{r}").status for r in (0, 1)] == ["stopped", "stopped"]
    assert "STOPPED" in _cli("info", str(job), "--rank", "1").stdout
    # nothing of the job left running
    pids = [json.loads((job / "job" / f"rank_{r}.json").read_text())["pid"] for r in (0, 1)]
    pids += [json.loads((job / f"rank_{r}" / "manifest.json").read_text())["pid"] for r in (0, 1)]
    assert not [p for p in pids if _alive(p)]


# -- in a DDP bucket all-reduce (rank_job.py ddphang) ----------------------------------------------

def test_ddp_bucket_all_reduces_are_logged_and_a_hang_in_one_is_located(
        hang_jobs: dict[str, HungJob], tmp_path) -> None:
    job, proc = hang_jobs["ddphang"].out, hang_jobs["ddphang"].proc
    assert proc.returncode == 1 and "stopped after --timeout" in proc.stderr, proc.stderr[-3000:]
    backward = f"rank_job.py:{_line_of('DDP BACKWARD')}"
    events = [json.loads(ln) for ln in
              (job / "job" / "rank_0.progress.jsonl").read_text().splitlines() if ln.strip()]
    buckets = [e for e in events if e.get("event") == "collective" and "ddp" in e]
    assert buckets, events  # the reducer's all-reduces, logged by the capture's comm hook
    assert all((e["op"], e["async"], e["line"]) == ("all_reduce", True, backward)
               for e in buckets), buckets
    done = {(e["group"], e["seq"]) for e in events if e.get("event") == "done"}
    first = [e for e in buckets if (e["group"], e["seq"]) in done]
    assert first and all(e["ddp"]["bytes"] > 0 for e in first), events  # step 1 completed
    pending = [e for e in buckets if (e["group"], e["seq"]) not in done]
    assert pending, events  # step 2: issued, never completed (rank 1 never joined)
    assert max(e["seq"] for e in first) < min(e["seq"] for e in pending)

    info = _info(job)
    ranks = {r["rank"]: r for r in info["ranks"]}
    assert [ranks[r]["status"] for r in (0, 1)] == ["timed_out", "timed_out"]
    c0 = ranks[0]["progress"]["collective"]
    assert (c0["op"], c0["state"], c0["line"]) == ("all_reduce", "waiting", backward), c0
    # the earliest bucket all-reduce that never completed: where the reducer waits first
    assert (c0["seq"], c0["ddp"]["bucket"]) == (pending[0]["seq"], pending[0]["ddp"]["bucket"])
    stack = ranks[1]["progress"]["stack"]
    assert stack["user"] == f"rank_job.py:{_line_of('STALL rank 1 before')} (ddp_hang)", stack
    text = " ".join(_cli("info", str(job)).stdout.split())
    assert (f"rank 0 waits in DDP all_reduce bucket #{c0['ddp']['bucket']} (all_reduce "
            f"#{c0['seq']} of group default, {backward})") in text, text
    # within the step where the ranks parted: rank 0 entered step 2, rank 1 only step 1
    assert c0["ddp"]["step"] == 2 and c0["ddp_steps"] == {"default": 2}, c0
    assert ranks[1]["progress"]["collective"]["ddp_steps"] == {"default": 1}
    assert ("in DDP step 2, where the ranks parted (rank(s) 1 entered step 1 at most): the "
            "earliest bucket of that step that never completed") in text, text
    # a step-1 bucket whose completion the log lacks (a lost line) is not where rank 0 waits:
    # the reducer finished step 1 before step 2 began (main picked the earliest across steps)
    from tuidebug.trace.jobs.progress import last_collective

    lost = tmp_path / "lost.progress.jsonl"
    lost.write_text("".join(ln + "\n" for ln in
                            (job / "job" / "rank_0.progress.jsonl").read_text().splitlines()
                            if ln.strip() and not (json.loads(ln).get("event") == "done"
                                    and json.loads(ln).get("seq") == first[0]["seq"])))
    again = last_collective(lost)
    assert again is not None and (again["seq"], again["ddp"]["step"]) == (c0["seq"], 2), again
    assert "rank 1 is at rank_job.py:" in text and "outside any collective" in text
    # rank 1's step-1 buckets completed: a DDP bucket's done is its all-reduce complete
    assert ranks[1]["progress"]["collective"]["ddp"] is not None
    assert "was waited for" in text.split("rank 1 is at", 1)[1], text
    [m] = info["waits"]["mismatches"]
    assert (m["kind"], m["ranks"], m["waits_for"]) == ("waits_for_ranks", [0], [1]), m
    pids = [json.loads((job / "job" / f"rank_{r}.json").read_text())["pid"] for r in (0, 1)]
    pids += [json.loads((job / f"rank_{r}" / "manifest.json").read_text())["pid"] for r in (0, 1)]
    assert not [p for p in pids if _alive(p)]
