"""Identical files of a job's ranks are stored once (hard links inside the job directory), and
every rank folder is still a complete trace of its own."""

from __future__ import annotations

import os
import shutil

from tuidebug.trace.format import atomic
from tuidebug.trace.jobs.dedup import disk_bytes, link_identical
from tuidebug.trace.jobs.ranks import analyze_job
from tuidebug.trace.format.reader import Trace


def _inode(p) -> tuple[int, int]:
    st = os.stat(p, follow_symlinks=False)
    return st.st_dev, st.st_ino


def test_the_launcher_links_identical_files(same_job, tmp_path) -> None:
    job, proc = same_job
    assert "stored once" in proc.stderr
    stages = sorted((job / "rank_0" / "graphs" / "0_0-inference" / "stages").iterdir())
    assert stages
    for st in stages:  # the identical ranks' snapshots: one file, two names
        twin = job / "rank_1" / st.relative_to(job / "rank_0")
        assert _inode(st) == _inode(twin) and not twin.is_symlink()
    # per-rank files stay apart
    assert _inode(job / "rank_0" / "manifest.json") != _inode(job / "rank_1" / "manifest.json")
    apparent = sum(p.stat().st_size for r in (0, 1) for p in (job / f"rank_{r}").rglob("*")
                   if p.is_file())
    assert disk_bytes(job) < 0.8 * apparent
    # a copy of one rank (links become files) reads as the same trace
    alone = tmp_path / "rank_1"
    shutil.copytree(job / "rank_1", alone)
    assert Trace(alone).status == "ok" and [g.id for g in Trace(alone).graphs] == ["0_0-inference"]
    # a write to one rank's file (always a new file renamed into place) leaves the other's
    copy = tmp_path / "job"
    shutil.copytree(job, copy)  # copying makes each link a file of its own
    link_identical(copy)
    st0 = copy / "rank_0" / stages[0].relative_to(job / "rank_0")
    st1 = copy / "rank_1" / stages[0].relative_to(job / "rank_0")
    assert _inode(st0) == _inode(st1)
    before = st1.read_bytes()
    atomic.write_json(st0, {"changed": True})
    assert st1.read_bytes() == before


def test_linking_a_copied_job_saves_bytes_and_changes_no_verdict(break_job, tmp_path) -> None:
    job, _ = break_job
    copy = tmp_path / "job"
    shutil.copytree(job, copy)  # copying makes every link a file of its own again
    stored = link_identical(copy)
    assert stored["linked"] > 0 and stored["bytes_after"] < stored["bytes_before"]
    assert link_identical(copy)["linked"] == 0  # nothing left to link
    a, b = analyze_job(job), analyze_job(copy)
    assert a["divergence"] == b["divergence"] and a["groups"] == b["groups"]
    # the verdict itself, not only the same one twice (an analysis that found nothing in
    # either would pass the line above): rank 1's graph break
    assert b["divergence"]["kind"] == "compile_only_on_some_ranks", b["divergence"]
    assert b["divergence"]["diverging_ranks"] == [1] and [g["ranks"] for g in b["groups"]] == [
        [0], [1]]


def test_a_rank_still_running_is_not_linked(tmp_path) -> None:
    """In a folder shared by several nodes (or launchers) a rank may still be running when
    another launcher links the job: its files are left alone (it appends to some of them by
    name, and an append to a linked file would change another rank's trace too)."""
    from tuidebug.trace.jobs import job

    root = tmp_path / "job"
    for r, status in ((0, "ok"), (1, "ok"), (2, "running")):
        (root / f"rank_{r}" / "graphs").mkdir(parents=True)
        (root / f"rank_{r}" / "graphs" / "autotune.jsonl").write_text('{"op": "mm"}\n' * 50)
        job.write_record(root, {"rank": r, "world_size": 3, "status": status})
    s = link_identical(root)
    files = [root / f"rank_{r}" / "graphs" / "autotune.jsonl" for r in (0, 1, 2)]
    assert s["linked"] == 1 and s["running"] == [2], s
    assert _inode(files[0]) == _inode(files[1]) != _inode(files[2])
    with open(files[2], "a") as f:  # rank 2 appends, as the capture does
        f.write('{"op": "addmm"}\n')
    assert "addmm" not in files[0].read_text()
    job.write_record(root, {"rank": 2, "world_size": 3, "status": "ok"})
    assert link_identical(root)["linked"] == 0  # its file differs now: nothing to link
