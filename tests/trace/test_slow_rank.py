"""A rank that finished far later than every other is named, with where its time went — only
beyond noise: outside the other ranks' spread (``trace/jobs/skew.py`` ``slow_ranks``). ``ranks``
said nothing of a rank that took three times as long once every rank had finished. A run is
timed from the rank's first collective's return (before it, ranks wait for each other to
start), compiles matched by function, never by frame id. Jobs written with the torch-free
writer (records with their start and end, compile summaries, progress logs)."""

from __future__ import annotations

import json
from pathlib import Path

from tuidebug.trace.format import schema
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.jobs.ranks import analyze_job
from tuidebug.trace.jobs.skew import slow_ranks
from tuidebug.viewers.ranks_view import slow_rank_lines


def _write_log(job: Path, rank: int, events: list[dict]) -> None:
    from tuidebug.trace.jobs.progress import progress_path

    log = progress_path(job, rank)
    log.parent.mkdir(parents=True, exist_ok=True)
    events = [{"event": "start", "t": 0.0}] + sorted(events, key=lambda e: e["t"])
    log.write_text("".join(json.dumps(e) + "\n" for e in events))


def _job(root: Path, compiles: dict[int, dict[str, tuple[float, float]]],
         runs: dict[int, float], *, names: dict[int, dict[str, str]] | None = None,
         waited: dict[int, float] | None = None, logs: bool = True) -> Path:
    """Ranks that finished ok: per rank, per compile id (entire, Inductor) seconds of the
    function ``names[rank][id]`` (default ``f<frame>``), and its run from its first
    collective's return (at 1005.0, in its progress log unless not ``logs``) to its end; it
    started ``waited[rank]`` seconds before that return (5 s by default)."""
    for rank, cs in compiles.items():
        w = TraceWriter(root / f"rank_{rank}", command=["train.py"])
        for cid, (entire, ind) in cs.items():
            name = (names or {}).get(rank, {}).get(cid, f"f{cid.split('/')[0]}")
            w.add_compile(cid, {"graphs": [], "summary": {
                "co_name": name, "co_filename": "/job/train.py", "co_firstlineno": 3,
                "entire_frame_compile_time_s": entire, "inductor_compile_time_s": ind,
                "cache": {}}})
        w.finish(schema.STATUS_OK)
        (root / "job").mkdir(parents=True, exist_ok=True)
        (root / "job" / f"rank_{rank}.json").write_text(json.dumps(
            {"rank": rank, "world_size": len(compiles), "status": "ok", "trace": f"rank_{rank}",
             "started_at": 1005.0 - (waited or {}).get(rank, 5.0),
             "finished_at": 1005.0 + runs[rank]}))
        if logs:
            _write_log(root, rank, [
                {"event": "collective", "op": "barrier", "group": "default", "seq": 1,
                 "line": "train.py:10", "t": 1004.0},
                {"event": "done", "group": "default", "seq": 1, "t": 1005.0}])
    return root


def test_a_rank_that_compiled_far_longer_is_named_with_where(tmp_path: Path) -> None:
    """Rank 2's compile of f0 took 31 s against 10.1–10.6 s, Inductor's part most of it."""
    compiles = {0: {"0/0": (10.1, 7.0), "1/0": (2.0, 1.0)},
                1: {"0/0": (10.6, 7.3), "1/0": (2.1, 1.1)},
                2: {"0/0": (31.0, 27.0), "1/0": (2.0, 1.0)},
                3: {"0/0": (10.3, 7.1), "1/0": (2.2, 1.0)}}
    report = analyze_job(_job(tmp_path / "job", compiles, {0: 40.0, 1: 41.0, 2: 62.0, 3: 40.5}))
    slow = report["slow_ranks"]
    assert [(x["rank"], x["what"]) for x in slow] == [(2, "compile"), (2, "run")], slow
    lines = slow_rank_lines(slow)
    assert lines == [
        "slow rank: rank 2 compiled for 33.0 s, outside the other 3 ranks' 12.1 s–12.7 s (over "
        "the 2 compiles every rank made alike)",
        "  compile of f0 (/job/train.py:3): 31.0 s vs 10.1 s–10.6 s — Inductor 27.0 s vs "
        "7.00 s–7.30 s, before it (Dynamo, AOTAutograd) 4.00 s vs 3.10 s–3.30 s",
        "slow rank: rank 2 ran for 62.0 s from its first collective's return to its end, "
        "outside the other 3 ranks' 40.0 s–41.0 s",
        "  its compiles took 33.0 s, the others' 12.1 s–12.7 s; the trace times its run no "
        "finer"], lines


def test_a_rank_that_ran_longer_not_compiling_is_said_so(tmp_path: Path) -> None:
    compiles = {r: {"0/0": (10.0 + r / 10, 7.0)} for r in range(3)}
    slow = analyze_job(_job(tmp_path / "job", compiles, {0: 40.0, 1: 95.0, 2: 41.0}))["slow_ranks"]
    assert [(x["rank"], x["what"]) for x in slow] == [(1, "run")], slow
    assert slow[0]["where"] == ["its compiles took 10.1 s, the others' 10.0 s–10.2 s; the trace "
                                "times its run no finer"], slow


def test_a_rank_that_started_first_and_waited_is_not_slow(tmp_path: Path) -> None:
    """Rank 0 started 60 s before the others and waited for them in init_process_group: from
    its record's start it 'ran' far longer, from its first collective's return no longer. With
    no progress log the run is not timed at all."""
    compiles = {r: {"0/0": (10.0, 7.0)} for r in range(3)}
    runs = {0: 40.0, 1: 41.0, 2: 40.5}
    waited = _job(tmp_path / "job", compiles, runs, waited={0: 65.0, 1: 5.0, 2: 5.5})
    assert analyze_job(waited)["slow_ranks"] == []
    quiet = _job(tmp_path / "quiet", compiles, {0: 40.0, 1: 95.0, 2: 41.0}, logs=False)
    assert analyze_job(quiet)["slow_ranks"] == []  # no first return: its run not timed


def test_compiles_are_matched_by_function_never_by_id(tmp_path: Path) -> None:
    """Rank 2 compiled a function of its own (h, 25 s) first: its frame ids are shifted (its
    0/0 is h, its 1/0 the others' 0/0). Matched by id it was 'slower in every compile the
    ranks share' (25 s vs 10 s, 10 s vs 2 s); by function, f and g took it as long as the
    others."""
    compiles = {r: {"0/0": (10.0 + r / 10, 7.0), "1/0": (2.0 + r / 20, 1.0)} for r in (0, 1, 3)}
    compiles[2] = {"0/0": (25.0, 20.0), "1/0": (10.2, 7.0), "2/0": (2.1, 1.0)}
    names = {r: {"0/0": "f", "1/0": "g"} for r in (0, 1, 3)}
    names[2] = {"0/0": "h", "1/0": "f", "2/0": "g"}
    report = analyze_job(_job(tmp_path / "job", compiles, {r: 40.0 + r / 10 for r in range(4)},
                              names=names))
    assert report["slow_ranks"] == [], report["slow_ranks"]
    assert report["compile_time"]["slow"] == [], report["compile_time"]
    assert report["compile_time"]["samples"] == 2, report["compile_time"]


def test_inside_the_others_spread_or_with_two_ranks_nothing_is_said() -> None:
    # rank 2 the slowest, but the others differ as much among themselves: noise
    wide = {0: {"0/0": 10.0}, 1: {"0/0": 20.0}, 2: {"0/0": 26.0}}
    assert slow_ranks(wide, {}, {0: 40.0, 1: 80.0, 2: 101.0}) == []
    # only a little above a tight spread (under NOISE_RATIO): noise
    assert slow_ranks({0: {"0/0": 10.0}, 1: {"0/0": 10.2}, 2: {"0/0": 11.5}}, {}, {}) == []
    # two ranks: one number each measures no noise, however far apart
    assert slow_ranks({0: {"0/0": 10.0}, 1: {"0/0": 31.0}}, {}, {0: 40.0, 1: 90.0}) == []


def _steps(job: Path, work: dict[int, list[float]], blocking: bool = True) -> None:
    """Progress logs of ranks that each do ``work[rank][n-1]`` seconds of their own work, then
    issue all_reduce #n (train.py:40): as a blocking collective returns, every rank leaves it
    when the last one issued it (``blocking``); NCCL's returns at once (its wait is on the GPU)
    and the ranks go on apart."""
    at = {r: 0.0 for r in work}
    logs: dict[int, list[dict]] = {r: [] for r in work}
    for n in range(1, len(next(iter(work.values()))) + 1):
        issued = {r: at[r] + work[r][n - 1] for r in work}
        for r, t in issued.items():
            done = max(issued.values()) + 0.01 if blocking else t + 0.001
            logs[r] += [{"event": "collective", "op": "all_reduce", "group": "default", "seq": n,
                         "line": "train.py:40", "t": t},
                        {"event": "done", "group": "default", "seq": n, "t": done}]
            at[r] = done
    for r, evs in logs.items():
        _write_log(job, r, evs)


def test_the_rank_the_others_wait_for_at_every_step_is_named(tmp_path: Path) -> None:
    """Rank 1's own work before each of the 4 all_reduces after the first takes 0.8–2.0 s
    longer (its steps are slower; the compiles alike): the others waited for it in each, and
    where most is said. The first all_reduce is reached after start-up (imports, the first
    compile): rank 0, which compiled 4 s longer, is last there, and that is no step of its own
    work (before, the verdict was withheld: rank 1 was not last at every collective). An
    all_reduce that returns at once (NCCL: the wait is the GPU's) shows no waiting: no
    verdict."""
    compiles = {r: {"0/0": (10.0, 7.0)} for r in range(3)}
    job = _job(tmp_path / "job", compiles, {0: 40.0, 1: 41.0, 2: 40.5})
    work = {0: [9.0, 1.0, 2.0, 2.0, 2.0], 2: [5.2, 1.05, 2.0, 2.0, 2.0],
            1: [5.0, 1.0 + 0.8, 2.0 + 0.9, 2.0 + 2.0, 2.0 + 1.0]}
    _steps(job, work)
    late = analyze_job(job)["late_rank"]
    assert late is not None and late["rank"] == 1 and late["collectives"] == 4, late
    assert abs(late["total_s"] - 4.65) < 1e-6, late  # 0.75 + 0.9 + 2.0 + 1.0, each once
    lines = slow_rank_lines([], late)
    assert lines[0] == ("slow rank: the other ranks waited for rank 1 at all 4 collectives they "
                        "all issued and waited in after their first returned, 750 ms–2.00 s "
                        "each; its "
                        "own work between collectives took 4.65 s longer than theirs in all"), lines
    assert lines[1] == ("  all_reduce #4 of group default (train.py:40): 2.00 s after the "
                        "others, 2.00 s of it gained in its own work since its previous "
                        "collective"), lines
    nccl = _job(tmp_path / "nccl", compiles, {0: 40.0, 1: 41.0, 2: 40.5})
    _steps(nccl, work, blocking=False)
    assert analyze_job(nccl)["late_rank"] is None


def _backwards(logs: dict[int, list[dict]], at: dict[int, float], seq: int,
               work: list[dict[int, float]], done_each: bool) -> None:
    """DDP steps appended to ``logs``: in step n each rank works ``work[n][rank]`` seconds
    after the step before returned (``at``), then its backward issues 4 bucket all-reduces
    0.1 s apart (asynchronous; numbered on from ``seq``), each ``done`` once every rank issued
    it: logged right after it (``done_each``) or after the step's last bucket (every bucket
    issued before any returns)."""
    for step_work in work:
        issued: dict[tuple[int, int], float] = {}
        for b in range(4):
            seq += 1
            for r in logs:
                t = at[r] + step_work[r] + 0.1 * b + 0.01 * r * (b == 0)
                issued[(r, seq)] = t
                logs[r].append({"event": "collective", "op": "all_reduce", "group": "default",
                                "seq": seq, "line": "train.py:50", "async": True, "t": t,
                                "ddp": {"bucket": b, "last": b == 3}})
            if done_each or b == 3:
                for s in range(seq if done_each else seq - 3, seq + 1):
                    done = max(issued[(r, s)] for r in logs) + 0.01
                    for r in logs:
                        logs[r].append({"event": "done", "group": "default", "seq": s,
                                        "t": done})
        at.update({r: done for r in logs})


def test_a_ddp_steps_lag_is_counted_once_not_per_bucket(tmp_path: Path) -> None:
    """DDP: each step's backward issues 4 bucket all-reduces 0.1 s apart (asynchronous; each
    ``done`` when it completed, once every rank issued it) and waits for them all before the
    next step. Rank 1's forward takes 1 s longer: it was last at all 12 buckets, the others
    waited ~1 s at each, but it lost 1 s per step — 3 s in all, not 12."""
    compiles = {r: {"0/0": (10.0, 7.0)} for r in range(3)}
    job = _job(tmp_path / "job", compiles, {0: 40.0, 1: 41.0, 2: 40.5})
    # the first collective, reached after start-up, is not judged
    logs: dict[int, list[dict]] = {r: [
        {"event": "collective", "op": "broadcast", "group": "default", "seq": 1,
         "line": "train.py:30", "t": 1.0 + 0.1 * r},
        {"event": "done", "group": "default", "seq": 1, "t": 1.3}] for r in range(3)}
    _backwards(logs, {r: 1.3 for r in range(3)}, 1, [{0: 2.0, 1: 3.0, 2: 2.0}] * 3,
               done_each=True)
    for r, evs in logs.items():
        _write_log(job, r, evs)
    late = analyze_job(job)["late_rank"]
    assert late is not None and late["rank"] == 1 and late["collectives"] == 12, late
    assert 2.9 < late["total_s"] < 3.1, late  # one lag a step, not one a bucket (12 s)
    assert len(late["where"]) == 3 and all(" #2 " in w or " #6 " in w or " #10 " in w
                                           for w in late["where"]), late["where"]


def test_a_rank_late_only_sometimes_or_inside_noise_is_not_named(tmp_path: Path) -> None:
    compiles = {r: {"0/0": (10.0, 7.0)} for r in range(2)}
    once = _job(tmp_path / "once", compiles, {0: 40.0, 1: 41.0})
    _steps(once, {0: [1.0, 2.0, 2.0, 2.0], 1: [1.8, 2.9, 1.9, 3.0]})  # first at #3
    assert analyze_job(once)["late_rank"] is None
    small = _job(tmp_path / "small", compiles, {0: 40.0, 1: 41.0})
    _steps(small, {0: [1.0, 2.0, 2.0, 2.0], 1: [1.3, 2.3, 2.3, 2.3]})  # by less than NOISE_S
    assert analyze_job(small)["late_rank"] is None


def test_ddp_buckets_before_a_ranks_first_return_are_not_judged(tmp_path: Path) -> None:
    """DDP's start-up collectives (its parameter broadcast) are C++'s and not logged: the first
    logged ones are the buckets of the first backward, all issued (asynchronously) before any
    returns, and each carries the start-up's lag: rank 0, which compiled 4 s longer, is last
    at all 4 of them. Only the first was skipped, so rank 0 was last at 3 judged buckets and
    rank 1 at the 12 after: no verdict. Every collective a rank issued before its first
    ``done`` is skipped: rank 1, 1 s slower at each of the 3 later steps, is named."""
    compiles = {r: {"0/0": (10.0, 7.0)} for r in range(3)}
    job = _job(tmp_path / "job", compiles, {0: 40.0, 1: 41.0, 2: 40.5})
    logs: dict[int, list[dict]] = {r: [{"event": "start", "t": 0.5}] for r in range(3)}
    at = {0: 5.0, 1: 1.0, 2: 1.2}  # start-up: rank 0 compiled 4 s longer
    _backwards(logs, at, 0, [{r: 0.0 for r in range(3)}] + [{0: 2.0, 1: 3.0, 2: 2.0}] * 3,
               done_each=False)
    for r, evs in logs.items():
        _write_log(job, r, evs)
    late = analyze_job(job)["late_rank"]
    assert late is not None and late["rank"] == 1 and late["collectives"] == 12, late
    assert 2.9 < late["total_s"] < 3.1, late
