"""Distributed jobs traced for real (torchrun, gloo, CPU, 2 ranks) and compared across ranks."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import pythonpath
from tests.distributed.conftest import SCRIPT
from tuidebug.trace.jobs.job import read_job
from tuidebug.trace.jobs.ranks import analyze_job
from tuidebug.trace.format.reader import Trace


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=pythonpath())
    return subprocess.run([sys.executable, "-m", "tuidebug.cli", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def _info(job: Path) -> dict:
    proc = _cli("info", "--json", str(job))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _line_of(text: str) -> int:
    """The one line of the job script that is ``text`` (two would make the test ambiguous)."""
    found = [i for i, ln in enumerate(SCRIPT.read_text().splitlines(), 1) if ln.strip() == text]
    assert len(found) == 1, (text, found)
    return found[0]


def test_identical_ranks_agree(same_job) -> None:
    job, proc = same_job
    assert proc.returncode == 0, proc.stderr
    for r in (0, 1):  # each rank a complete single-process trace of its own
        t = Trace(job / f"rank_{r}")
        assert t.status == "ok" and [g.compile_id for g in t.graphs] == ["0/0"]
    saved = json.loads((job / "job.json").read_text())
    assert saved["world_size"] == 2 and saved["launcher"] == "torchrun"
    assert [r["rank"] for r in saved["ranks"]] == [0, 1]
    assert [n["ranks"] for n in saved["nodes"]] == [[0, 1]]
    info = _info(job)
    assert info["divergence"] is None
    assert [(r["rank"], r["status"]) for r in info["ranks"]] == [(0, "ok"), (1, "ok")]
    assert [g["ranks"] for g in info["groups"]] == [[0, 1]]
    # one compile: one sample per rank, and the same work on each — no rank called slow
    judged = info["compile_time"]
    assert judged["samples"] == 1 and judged["slow"] == [], judged
    # the compile named by its function, never by its id (each process numbers its frames)
    assert re.match(r"one sample \(the compile of \w+ \(\S*rank_job\.py:\d+\)\): rank ",
                    judged["text"]), judged
    text = _cli("info", str(job))
    assert "ranks agree" in text.stdout and "world size 2" in text.stdout
    said = " ".join(text.stdout.split())
    assert "compile time: one sample (the compile of " in said, said
    assert "compile-time skew: largest on" not in said


def test_graph_break_on_one_rank(break_job) -> None:
    job, proc = break_job
    d = _info(job)["divergence"]
    assert d["kind"] == "compile_only_on_some_ranks", d
    assert d["reference_ranks"] == [0] and d["diverging_ranks"] == [1]
    assert not d["on_reference"]
    assert d["compile_id"] in Trace(job / "rank_1").compiles
    assert d["compile_id"] not in Trace(job / "rank_0").compiles
    breaks = d["reason"]["graph_break_reasons"]
    assert len(breaks) == 1
    assert breaks[0]["where"].endswith(f"rank_job.py:{_line_of('torch._dynamo.graph_break()')}")
    assert "graph_break()" in breaks[0]["summary"]
    text = _cli("info", str(job)).stdout
    assert "first divergence" in text and "on rank(s) 1 only" in text


def test_recompile_on_one_rank(shape_job) -> None:
    job, proc = shape_job
    assert proc.returncode == 0, proc.stderr
    d = _info(job)["divergence"]
    assert d["kind"] == "compile_only_on_some_ranks", d
    assert d["compile_id"] == "0/1" and d["diverging_ranks"] == [1]
    reasons = d["reason"]["recompile_reasons"]
    assert reasons and any("size" in r for r in reasons), reasons
    assert d["reason"]["graph_break_reasons"] == []


def test_job_json_is_rebuilt_from_the_rank_records(break_job, tmp_path) -> None:
    """job.json is a convenience copy: a stale one (a rank that saw fewer records) is not believed,
    and per-node folders copied together make one job."""
    job, _ = break_job
    merged = tmp_path / "merged"
    merged.mkdir()
    for r in (0, 1):
        shutil.copytree(job / f"rank_{r}", merged / f"rank_{r}")
    (merged / "job").mkdir()
    shutil.copy(job / "job" / "rank_1.json", merged / "job" / "rank_1.json")
    stale = json.loads((job / "job.json").read_text())
    stale["ranks"] = stale["ranks"][1:]
    (merged / "job.json").write_text(json.dumps(stale))
    got = read_job(merged)
    assert [r["rank"] for r in got["ranks"]] == [0, 1]
    assert got["ranks"][0]["status"] == "unknown"  # its record was not copied
    assert analyze_job(merged)["divergence"]["diverging_ranks"] == [1]


def test_open_names_the_rank_it_opens(same_job) -> None:
    job, _ = same_job
    proc = _cli("open", str(job), "--rank", "5")
    assert proc.returncode == 2 and "without a trace of rank 5" in proc.stderr


def test_merge_per_node_folders(break_job, tmp_path) -> None:
    """Two nodes' folders (each holding its own ranks) merge into one job; a rank in both is
    refused."""
    job, _ = break_job
    for r in (0, 1):
        node = tmp_path / f"node{r}"
        shutil.copytree(job / f"rank_{r}", node / f"rank_{r}")
        (node / "job").mkdir()
        shutil.copy(job / "job" / f"rank_{r}.json", node / "job" / f"rank_{r}.json")
    proc = _cli("merge", str(tmp_path / "node0"), str(tmp_path / "node1"), "-o",
                str(tmp_path / "all"))
    assert proc.returncode == 0, proc.stderr
    assert _info(tmp_path / "all")["divergence"] == _info(job)["divergence"]
    again = _cli("merge", str(tmp_path / "node0"), str(job), "-o", str(tmp_path / "twice"))
    assert again.returncode == 2 and "rank 0 is in both" in again.stderr


def test_graph_differs_on_one_of_four_ranks(graph_job) -> None:
    """Three identical ranks form the reference (compared once); the odd rank's graph differs
    from its first snapshot on, and the node diff names the changed multiplication."""
    job, proc = graph_job
    assert proc.returncode == 0, proc.stderr
    info = _info(job)
    assert [g["ranks"] for g in info["groups"]] == [[0, 2, 3], [1]]
    d = info["divergence"]
    assert d["kind"] == "graph" and d["compile_id"] == "0/0", d
    assert d["reference_ranks"] == [0, 2, 3] and d["diverging_ranks"] == [1]
    assert d["stage"] == "dynamo"
    assert d["nodes"]["changed"] == ["y"] and not d["nodes"]["added"]
    assert any(line.startswith("- y:") and "2" in line for line in d["nodes"]["lines"])
    assert any(line.startswith("+ y:") and "3" in line for line in d["nodes"]["lines"])
    assert len({r["hostname"] for r in info["ranks"]}) == 1 and len(info["ranks"]) == 4


@pytest.mark.slow  # torchrun
def test_a_failing_rank_stops_the_job_and_leaves_nothing_running(tmp_path) -> None:
    """Rank 1 raises before compiling: torchrun stops rank 0; the job says so per rank, and no
    process of the job (the ranks' tuidebug, their capture children) is left running."""
    from tests.distributed.conftest import trace_job

    job = tmp_path / "raise"
    proc = trace_job(job, "raise")
    assert proc.returncode == 1, proc.stderr
    assert "torchrun exited with code" in proc.stderr
    ranks = {r["rank"]: r for r in _info(job)["ranks"]}
    assert ranks[1]["status"] == "script_failed" and ranks[1]["exit_code"] == 1  # the script's own: raised
    # rank 0 was compiling (or waiting for rank 1) when torchrun stopped it
    assert ranks[0]["status"] in ("killed", "script_failed"), ranks[0]
    pids = [json.loads((job / "job" / f"rank_{r}.json").read_text())["pid"] for r in (0, 1)]
    pids += [json.loads((job / f"rank_{r}" / "manifest.json").read_text())["pid"]
             for r in (0, 1) if (job / f"rank_{r}" / "manifest.json").exists()]
    assert len(pids) >= 3
    import time

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True

    deadline = time.monotonic() + 20  # a SIGTERMed capture child records its state, then ends
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in pids if alive(p)], "processes of the job are still running"


def test_a_linked_rank_folder_is_not_followed(break_job, tmp_path) -> None:
    """A job folder is untrusted: rank_1 as a symbolic link (to a real trace elsewhere) is not
    read; the job lacks rank 1's trace."""
    job, _ = break_job
    copy = tmp_path / "job"
    shutil.copytree(job / "rank_0", copy / "rank_0")
    shutil.copytree(job / "job", copy / "job")
    (copy / "rank_1").symlink_to(job / "rank_1", target_is_directory=True)
    info = analyze_job(copy)
    assert info["divergence"] == {"kind": "no_trace", "ranks": [1]}
    assert [g["ranks"] for g in info["groups"]] == [[0]]


@pytest.mark.slow  # torchrun
def test_two_nodes_share_one_folder(tmp_path) -> None:
    """Two launchers (--nnodes 2, one rank each, as two nodes would run them) write into one
    folder at once: both ranks' traces and records are there, job.json names both nodes, and the
    identical ranks agree."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=pythonpath())
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "SLURM_PROCID"):
        env.pop(name, None)
    job = tmp_path / "shared"
    nodes = [subprocess.Popen(
        [sys.executable, "-m", "tuidebug.cli", "trace", "--nproc-per-node", "1", "--nnodes", "2",
         "--node-rank", str(n), "--master-addr", "127.0.0.1", "--master-port", str(port),
         "--no-check", "-o", str(job), str(SCRIPT), "same"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for n in (0, 1)]
    outs = [p.communicate(timeout=600)[0] for p in nodes]
    assert [p.returncode for p in nodes] == [0, 0], outs
    info = _info(job)
    assert info["divergence"] is None
    assert [(r["rank"], r["status"]) for r in info["ranks"]] == [(0, "ok"), (1, "ok")]
    assert sorted(n["node_rank"] for n in info["nodes"]) == [0, 1]
    saved = json.loads((job / "job.json").read_text())
    assert [r["rank"] for r in saved["ranks"]] == [0, 1]
