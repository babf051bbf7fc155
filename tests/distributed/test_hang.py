"""A job that hangs (a rank-dependent collective order, torchrun + gloo on the CPU), ended by
``tuidebug trace --timeout``: nothing of it left running, and each rank's wait named."""

from __future__ import annotations

import json
import os

from tests.distributed.conftest import HANG_TIMEOUT_S, SCRIPT
from tests.distributed.test_ranks import _cli, _info


def _line_of(marker: str) -> int:
    return next(i for i, ln in enumerate(SCRIPT.read_text().splitlines(), 1) if marker in ln)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_timeout_ends_the_job_and_leaves_nothing_running(hang_job) -> None:
    job, proc, took = hang_job
    assert proc.returncode == 1, proc.stderr
    assert f"stopped after --timeout {HANG_TIMEOUT_S}s" in proc.stderr
    assert HANG_TIMEOUT_S <= took < HANG_TIMEOUT_S + 60
    # every process of the job: each rank's tuidebug trace and its capture child
    pids = [json.loads((job / "job" / f"rank_{r}.json").read_text())["pid"] for r in (0, 1)]
    pids += [json.loads((job / f"rank_{r}" / "manifest.json").read_text())["pid"] for r in (0, 1)]
    assert len(set(pids)) == 4
    assert not [p for p in pids if _alive(p)], "processes of the job are still running"


def test_each_rank_says_where_it_waits(hang_job) -> None:
    job, _, _ = hang_job
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
