"""A job one of whose ranks could not open its progress log (its collectives not logged:
``trace/jobs/unlogged.py``): the job-level answers say so where they are drawn from the logs.
``info JOBDIR`` said "ranks agree" with no word of it, and at a hang read the missing log as
"no collective issued" and blamed that rank for a collective the others waited in. Rank traces,
records and progress logs written as a job writes them (the torch-free writer; no torch)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from tuidebug.trace.format import schema
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.jobs.progress import progress_path
from tuidebug.trace.jobs.ranks import analyze_job
from tuidebug.trace.jobs.unlogged import NOT_LOGGED_WARNING
from tuidebug.viewers.ranks_view import divergence_lines, render_job

WHY = "IsADirectoryError: [Errno 21] Is a directory: '/j/job/rank_1.progress.jsonl'"


def _rank(job: Path, rank: int, status: str, *, unlogged: str | None = None,
          warned_only: bool = False, running: bool = False) -> None:
    """Rank ``rank``'s trace and record; ``unlogged``: why its collectives were not logged (as
    the capture says it; ``warned_only``: as a trace older than the field says it, a warning);
    ``running``: its trace left running (a rank stopped by ``--timeout``)."""
    w = TraceWriter(job / f"rank_{rank}", command=["train.py"])
    if unlogged is not None:
        w.warn(f"{NOT_LOGGED_WARNING}/j/job/rank_{rank}.progress.jsonl: {unlogged}")
        if not warned_only:
            w.update(collectives_not_logged=unlogged)
    if running:
        w.update(pid=2**22 + 17)  # no such process: its writer is gone
    else:
        w.finish(schema.STATUS_OK)
    (job / "job").mkdir(parents=True, exist_ok=True)
    (job / "job" / f"rank_{rank}.json").write_text(json.dumps(
        {"rank": rank, "world_size": 2, "status": status, "trace": f"rank_{rank}",
         "started_at": 1.0, "finished_at": 9.0, "hostname": "h"}))


def _log(job: Path, rank: int, seqs: int, waiting: bool) -> None:
    """Rank ``rank``'s progress log: all_reduce #1..#seqs, each done but the last when
    ``waiting``."""
    events: list[dict] = [{"event": "start", "t": 1.0}]
    for n in range(1, seqs + 1):
        events.append({"event": "collective", "op": "all_reduce", "group": "default", "seq": n,
                       "line": "train.py:40", "t": 1.0 + n})
        if not (waiting and n == seqs):
            events.append({"event": "done", "group": "default", "seq": n, "t": 1.5 + n})
    progress_path(job, rank).write_text("".join(json.dumps(e) + "\n" for e in events))


def _info(job: Path) -> str:
    console = Console(file=io.StringIO(), width=300, record=True, color_system=None)
    render_job(analyze_job(job), console)
    return console.export_text()


def test_a_finished_job_says_whose_collectives_were_not_logged(tmp_path: Path) -> None:
    job = tmp_path / "job"
    _rank(job, 0, "ok")
    _rank(job, 1, "ok", unlogged=WHY)
    _log(job, 0, 4, waiting=False)
    report = analyze_job(job)
    assert report["divergence"] is None, report["divergence"]
    assert [r.get("collectives_not_logged") for r in report["ranks"]] == [None, WHY]
    assert {"kind": "not_logged", "ranks": [{"rank": 1, "why": WHY}]} in report["notes"]
    lines = divergence_lines(report["divergence"], report["ranks"], report["notes"])
    said = (f"rank 1's collectives were not logged ({WHY}): where it waits at a hang, and "
            "whether the other ranks waited for it, is not known")
    assert lines == ["ranks agree", said], lines  # the TUI's ranks screen shows these too
    text = _info(job)
    assert said in text, text
    assert text.count("collectives were not logged") == 1, text  # not again as a note


def test_a_hang_does_not_blame_a_rank_whose_collectives_were_not_logged(tmp_path: Path) -> None:
    """Rank 0 waits in all_reduce #3; rank 1's log was never written: whether it reached #3 is
    not known. It read "rank 1 is in no collective …; no collective issued" and "rank(s) 0 wait
    in collective #3 of group default for rank(s) 1, which did not reach it"."""
    job = tmp_path / "job"
    _rank(job, 0, "timed_out", running=True)
    _rank(job, 1, "timed_out", unlogged=WHY, running=True)
    _log(job, 0, 3, waiting=True)
    waits = analyze_job(job)["waits"]
    assert waits is not None and waits["hung"], waits
    assert waits["mismatches"] == [], waits["mismatches"]
    lines = waits["lines"]
    assert any(ln.startswith("rank 0 waits in all_reduce #3") for ln in lines), lines
    mine = [ln for ln in lines if ln.startswith("rank 1")]
    assert len(mine) == 1 and mine[0].endswith(
        f"; its collectives were not logged ({WHY}): whether it waits in a collective is not "
        "known"), lines
    text = _info(job)
    assert "no collective issued" not in text and "which did not reach it" not in text, text
    assert "rank 1's collectives were not logged" in text, text


def test_a_trace_older_than_the_field_is_read_from_its_warning(tmp_path: Path) -> None:
    job = tmp_path / "job"
    _rank(job, 0, "ok")
    _rank(job, 1, "ok", unlogged=WHY, warned_only=True)
    _log(job, 0, 2, waiting=False)
    report = analyze_job(job)
    why = f"/j/job/rank_1.progress.jsonl: {WHY}"
    assert [r.get("collectives_not_logged") for r in report["ranks"]] == [None, why]
    assert f"rank 1's collectives were not logged ({why})" in _info(job)


def test_a_rank_whose_progress_log_tells_nothing_is_not_known_at_a_hang(tmp_path: Path) -> None:
    """No word in the manifest (an older capture, a log removed or replaced later): rank 1's
    log path is a directory, rank 2's log is missing, rank 3's is empty. Rank 0 waits in
    all_reduce #5: it said "rank(s) 0 wait in collective #5 of group default for rank(s) 1, 2,
    3, which did not reach it" and "rank 1 … no collective issued". Rank 4, whose log shows
    it stopped at #4, is still named."""
    job = tmp_path / "job"
    for r in range(5):
        _rank(job, r, "timed_out", running=True)
    _log(job, 0, 5, waiting=True)
    _log(job, 4, 4, waiting=False)
    progress_path(job, 1).mkdir()
    progress_path(job, 3).write_text("")
    report = analyze_job(job)
    waits = report["waits"]
    assert waits is not None, report
    [m] = waits["mismatches"]
    assert (m["ranks"], m["waits_for"], m["seq"]) == ([0], [4], 5), m
    lines = waits["lines"]
    for r, why in ((1, "its progress log was not read (refused: a directory"),
                   (2, "its collectives were not logged (no progress log)"),
                   (3, "its collectives were not logged (its progress log holds no event)")):
        mine = [ln for ln in lines if ln.startswith(f"rank {r}")]
        assert len(mine) == 1 and why in mine[0] \
            and mine[0].endswith("whether it waits in a collective is not known"), lines
    assert not any("no collective issued" in ln for ln in lines if not ln.startswith("rank 4")), \
        lines
    [note] = [n for n in report["notes"] if n["kind"] == "not_logged"]
    assert [x["rank"] for x in note["ranks"]] == [1, 2, 3], note
    assert [x.get("not_read", False) for x in note["ranks"]] == [True, False, False], note
    text = _info(job)
    assert "ranks 2, 3' collectives were not logged (rank 2: no progress log; rank 3: its " \
        "progress log holds no event); rank 1's progress log was not read (refused: a directory" \
        in text, text


def test_a_log_refused_is_said_not_read_not_unlogged(tmp_path: Path) -> None:
    """Rank 1 logged, but its progress log is a symbolic link (the safe reader refuses it). It
    read "rank 1's collectives were not logged (progress log refused: …)": the rank
    did log; tuidebug did not read it. Rank 0 waits in all_reduce #3."""
    job = tmp_path / "job"
    for r in range(2):
        _rank(job, r, "timed_out", running=True)
    _log(job, 0, 3, waiting=True)
    real = tmp_path / "elsewhere.jsonl"
    real.write_text(json.dumps({"event": "start", "t": 1.0}) + "\n")
    progress_path(job, 1).symlink_to(real)
    report = analyze_job(job)
    [rank1] = [r for r in report["ranks"] if r["rank"] == 1]
    assert "unlogged" not in rank1["progress"] and rank1["progress"]["unread"].startswith(
        "refused: "), rank1["progress"]
    [note] = [n for n in report["notes"] if n["kind"] == "not_logged"]
    assert note["ranks"] == [{"rank": 1, "why": rank1["progress"]["unread"], "not_read": True}]
    [mine] = [ln for ln in report["waits"]["lines"] if ln.startswith("rank 1")]
    assert f"; its progress log was not read ({rank1['progress']['unread']}): whether it waits " \
        "in a collective is not known" in mine, mine
    text = _info(job)
    assert f"rank 1's progress log was not read ({rank1['progress']['unread']}): where it " \
        "waits at a hang, and whether the other ranks waited for it, is not known" in text, text
    assert "not logged" not in text, text


def test_issued_ahead_is_not_said_of_a_rank_whose_log_is_missing(tmp_path: Path) -> None:
    """No rank blocked in a collective; rank 0 issued all_reduce #3 asynchronously and waits
    elsewhere; rank 1 has no progress log: whether it reached #3 is not known. It read "rank(s)
    0 issued collective #3 of group default, which rank(s) 1 did not reach"."""
    job = tmp_path / "job"
    for r in range(2):
        _rank(job, r, "timed_out", running=True)
    events = [{"event": "start", "t": 1.0}] + [
        e for n in (1, 2, 3) for e in (
            {"event": "collective", "op": "all_reduce", "group": "default", "seq": n,
             "async": True, "t": 1.0 + n},
            {"event": "done", "group": "default", "seq": n, "t": 1.1 + n})]
    progress_path(job, 0).write_text("".join(json.dumps(e) + "\n" for e in events))
    waits = analyze_job(job)["waits"]
    assert waits is not None and waits["mismatches"] == [], waits
    assert any(ln.startswith("rank 1") and "(no progress log)" in ln for ln in waits["lines"]), \
        waits["lines"]


async def test_the_tuis_ranks_screen_says_it_too(open_ui, tmp_path: Path) -> None:
    from textual.widgets import DataTable

    job = tmp_path / "job"
    _rank(job, 0, "ok")
    _rank(job, 1, "ok", unlogged="IsADirectoryError: [Errno 21] Is a directory")
    _log(job, 0, 4, waiting=False)
    async with open_ui(job / "rank_0", (200, 40), job=job.resolve(), start="ranks") as ui:
        app = ui.app
        assert await ui.wait_for(lambda: app.screen.query_one(DataTable).row_count == 2, 60)
        await ui.settle()
        text = " ".join(ui.text().split())
        assert ("rank 1's collectives were not logged (IsADirectoryError: [Errno 21] Is a "
                "directory): where it waits at a hang") in text, text


def test_a_ddp_step_is_not_said_parted_from_a_rank_whose_log_is_missing(tmp_path: Path) -> None:
    """Rank 0 waits in DDP step 2's first bucket; rank 1 has no progress log. It read "in DDP
    step 2, where the ranks parted (rank(s) 1 entered no DDP step)": not known."""
    job = tmp_path / "job"
    for r in range(2):
        _rank(job, r, "timed_out", running=True)
    events: list[dict] = [{"event": "start", "t": 1.0}]
    for seq, (bucket, last) in enumerate([(0, False), (1, True), (0, False)], start=1):
        events.append({"event": "collective", "op": "all_reduce", "group": "default",
                       "seq": seq, "async": True, "t": 1.0 + seq,
                       "ddp": {"bucket": bucket, "last": last, "bytes": 4}})
        if seq < 3:
            events.append({"event": "done", "group": "default", "seq": seq, "t": 1.5 + seq})
    progress_path(job, 0).write_text("".join(json.dumps(e) + "\n" for e in events))
    lines = analyze_job(job)["waits"]["lines"]
    [mine] = [ln for ln in lines if ln.startswith("rank 0 waits in DDP all_reduce bucket #0")]
    assert "in DDP step 2" in mine and "parted" not in mine and "rank(s) 1" not in mine, mine
