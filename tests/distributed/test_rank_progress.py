"""A rank's progress log in one process (a real gloo process group of world size 1, no
torchrun): the group each collective call is numbered in, however the call names it, and who
waits for whom read back from such logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from tuidebug.compiler import compat
from tuidebug.compiler.capture.rank_progress import RankProgress
from tuidebug.trace.jobs.progress import is_member, last_collective, waits


@pytest.fixture
def world_of_one():
    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _events(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines()]


def test_each_call_is_numbered_in_the_group_it_names(world_of_one, tmp_path: Path) -> None:
    """A functional collective given its group by position (a list of ranks, a group's name)
    is numbered in that group, as the classic call on the same group is — not in the default
    group (which made two groups' collectives one sequence: false "waits for" verdicts)."""
    import torch.distributed._functional_collectives as funcol

    log = tmp_path / "rank_0.progress.jsonl"
    sub = dist.new_group([0])
    rp = RankProgress(log, warn=lambda m: None).install()
    try:
        t = torch.ones(2)
        dist.all_reduce(t)
        dist.all_reduce(t, dist.ReduceOp.SUM, sub, False)  # every argument by position
        funcol.all_reduce(t, "sum", sub.group_name).wait()  # the group by name, by position
        funcol.all_reduce(t, "sum", sub).wait()
    finally:
        rp.uninstall()
    calls = [e for e in _events(log) if e["event"] == "collective"]
    # a functional collective returns before it completes (its result is waited for on use)
    assert [e["async"] for e in calls] == [False, False, True, True]
    assert [(e["op"], e["seq"]) for e in calls] == [
        ("all_reduce", 1), ("all_reduce", 1), ("functional.all_reduce", 2),
        ("functional.all_reduce", 3)], calls
    assert calls[0]["group"] == "default" and calls[0]["members"] is None
    assert {e["group"] for e in calls[1:]} == {calls[1]["group"]} != {"default"}
    assert calls[1]["members"] == [0]
    assert last_collective(log)["state"] == "done"


def test_a_ranks_list_given_by_position_is_its_group(world_of_one) -> None:
    import torch.distributed._functional_collectives as funcol

    names = compat.call_arguments(funcol.all_reduce)
    label, members = compat.collective_group("functional.all_reduce", names,
                                             (torch.ones(1), "sum", [0, 2, 1]), {})
    assert (label, members) == ("(ranks 0,1,2)", [0, 1, 2])


def test_send_and_recv_are_numbered_per_pair(world_of_one) -> None:
    t = torch.ones(1)
    send, recv = compat.call_arguments(dist.send), compat.call_arguments(dist.recv)
    assert compat.collective_group("send", send, (t, 3), {}) == ("p2p 0<->3", [0, 3])
    assert compat.collective_group("recv", recv, (t,), {"src": 3}) == ("p2p 0<->3", [0, 3])
    # from any source: this rank's own numbering, no other rank is blamed
    assert compat.collective_group("recv", recv, (t,), {}) == ("p2p rank 0", [0])


def test_a_big_group_costs_a_few_bytes_per_collective(world_of_one, tmp_path: Path) -> None:
    """A group of 4096 ranks (every other one of 8192): its label and members stay short in the
    log (they were written out per call: ~40 KB and ~1 ms per collective), and are read back as
    the same run — kept compact, never expanded (400 ranks of such groups made ``info --json``
    gigabytes) — that names exactly those ranks."""
    ranks = list(range(0, 8192, 2))
    label, members = compat.collective_group("functional.all_reduce", ["self", "reduceOp", "group"],
                                             (torch.ones(1), "sum", ranks), {})
    assert len(label) < 60 and label.startswith("(4096 ranks 0..8190 #"), label
    assert members == {"first": 0, "step": 2, "count": 4096}
    other = compat.collective_group("functional.all_reduce", ["self", "reduceOp", "group"],
                                    (torch.ones(1), "sum", ranks[:-1] + [8191]), {})[0]
    assert other != label  # same size and ends, other ranks: another group
    log = tmp_path / "p.jsonl"
    log.write_text(json.dumps({"event": "collective", "op": "all_reduce", "seq": 1,
                               "group": label, "members": members}) + "\n")
    back = last_collective(log)["members"]
    assert back == members
    assert [r for r in range(8192) if is_member(back, r)] == ranks


def _rank(rank: int, op: str, seq: int, group: str = "default", members=None) -> dict:
    return {"rank": rank, "status": "timed_out", "progress": {
        "phase": "script", "graph": "0_0-inference", "collective": {
            "op": op, "seq": seq, "group": group, "line": None, "members": members,
            "state": "waiting"}}}


def test_who_waits_for_whom() -> None:
    # the two sides of one exchange are no "different collectives"
    w = waits([_rank(0, "send", 2, "p2p 0<->1", [0, 1]), _rank(1, "recv", 2, "p2p 0<->1", [0, 1])])
    assert w["mismatches"] == [], w
    # a rank-dependent order is
    w = waits([_rank(0, "broadcast", 1), _rank(1, "all_reduce", 1)])
    assert [m["kind"] for m in w["mismatches"]] == ["different_collectives"]
    # rank 2 is not in the group ranks 0 and 1 wait in: it is not blamed
    idle = {"rank": 2, "status": "timed_out", "progress": {"phase": "script", "graph": "g",
                                                           "collective": None}}
    w = waits([_rank(0, "all_reduce", 3, "g01", [0, 1]), _rank(1, "all_reduce", 2, "g01", [0, 1]),
               idle])
    [m] = w["mismatches"]
    assert (m["ranks"], m["waits_for"]) == ([0], [1]), m
    w = waits([_rank(0, "all_reduce", 3, "g", None), idle])
    assert w["mismatches"][0]["waits_for"] == [2]  # every rank is in the default group


def test_a_rank_that_issued_the_collective_asynchronously_is_not_blamed(tmp_path: Path) -> None:
    """Rank 0 issued all_reduce #2 with async_op=True and then waited on its work elsewhere:
    rank 1, waiting in #2, waits for rank 2 only (rank 0 was said not to have reached it)."""
    root = tmp_path / "job"
    from tuidebug.trace.jobs.progress import progress_path, rank_progress

    def log(rank: int, events: list[dict]) -> None:
        p = progress_path(root, rank)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("".join(json.dumps(e) + "\n" for e in events))

    def call(seq: int, asyn: bool = False) -> dict:
        return {"event": "collective", "op": "all_reduce", "seq": seq, "group": "default",
                "members": None, "line": "train.py:9", "async": asyn}

    def done(seq: int) -> dict:
        return {"event": "done", "seq": seq, "group": "default"}

    log(0, [call(1), done(1), call(2, asyn=True), done(2)])
    log(1, [call(1), done(1), call(2)])
    log(2, [call(1), done(1)])
    ranks = [{"rank": r, "status": "timed_out", "progress": rank_progress(root, r, None)}
             for r in range(3)]
    w = waits(ranks)
    [m] = w["mismatches"]
    assert (m["ranks"], m["waits_for"]) == ([1], [2]), m
    text = "\n".join(w["lines"])
    assert "rank 0 is in no collective" in text and "issued asynchronously" in text, text
    assert "rank 2 is in no collective" in text and "all_reduce #1 (train.py:9) returned" in text, text


def test_a_restarted_rank_is_judged_by_its_last_attempt(tmp_path: Path) -> None:
    """torchrun --max-restarts: the first attempt was killed in all_reduce #3; the second has
    issued nothing yet. The rank is not said to wait in #3 (its log is appended to)."""
    log = tmp_path / "rank_0.progress.jsonl"
    first = [{"event": "start", "pid": 1}] + [
        e for s in (1, 2, 3) for e in (
            {"event": "collective", "op": "all_reduce", "seq": s, "group": "default"},
            {"event": "done", "seq": s, "group": "default"})][:-1]
    log.write_text("".join(json.dumps(e) + "\n" for e in first))
    assert last_collective(log)["state"] == "waiting"
    with log.open("a") as f:
        f.write(json.dumps({"event": "start", "pid": 2}) + "\n")
    assert last_collective(log) is None
    with log.open("a") as f:
        f.write(json.dumps({"event": "collective", "op": "broadcast", "seq": 1,
                            "group": "default"}) + "\n")
    c = last_collective(log)
    assert (c["op"], c["seq"], c["state"], c["reached"]) == ("broadcast", 1, "waiting",
                                                             {"default": 1})


def test_ddp_steps_are_kept_for_at_most_max_groups_groups(tmp_path: Path) -> None:
    """A log naming many groups, a DDP bucket in each: the per-group DDP step numbers were kept
    for every group (``reached`` stops at MAX_GROUPS); a bucket of a group past the cap has no
    step, and the rank is still said to wait in it."""
    from tuidebug.trace.jobs.progress import MAX_GROUPS

    log = tmp_path / "rank_0.progress.jsonl"
    events = [{"event": "start", "pid": 1}] + [
        {"event": "collective", "op": "all_reduce", "seq": 1, "group": f"g{i}",
         "ddp": {"bucket": 0, "last": True, "bytes": 4}} for i in range(MAX_GROUPS + 40)]
    log.write_text("".join(json.dumps(e) + "\n" for e in events))
    c = last_collective(log)
    assert len(c["ddp_steps"]) == MAX_GROUPS and len(c["reached"]) == MAX_GROUPS, \
        (len(c["ddp_steps"]), len(c["reached"]))
    assert c["group"] == f"g{MAX_GROUPS + 39}" and c["state"] == "waiting", c
    assert "step" not in c["ddp"], c["ddp"]
    ranks = [{"rank": 0, "status": "timed_out", "progress": {"collective": c}},
             {"rank": 1, "status": "timed_out", "progress": {"collective": c}}]
    assert waits(ranks) is not None  # said, no step numbered


@pytest.mark.slow  # traces a script
def test_a_progress_log_that_cannot_be_written_does_not_stop_the_rank(tmp_path: Path) -> None:
    """The rank's capture child cannot open its progress log (here its folder is a file): the
    script runs all the same, and the trace says the collectives were not logged."""
    import os
    import subprocess
    import sys

    from tests.conftest import pythonpath

    (tmp_path / "job").write_text("not a folder")
    script = tmp_path / "s.py"
    script.write_text(f"open({str(tmp_path / 'RAN')!r}, 'w').write('yes')\n")
    proc = subprocess.run(
        [sys.executable, "-m", "tuidebug.compiler.run_script", "--out", str(tmp_path / "t"),
         "--no-check", "--progress", str(tmp_path / "job" / "rank_0.progress.jsonl"),
         str(script)], env=dict(os.environ, PYTHONPATH=pythonpath()), capture_output=True,
        text=True, timeout=300)
    assert (tmp_path / "RAN").read_text() == "yes", proc.stderr[-2000:]
    assert proc.returncode == 12, proc.stderr[-2000:]  # ran; nothing compiled
    warnings = json.loads((tmp_path / "t" / "manifest.json").read_text())["warnings"]
    assert any("collectives are not logged" in w for w in warnings), warnings


def test_events_encoded_from_cached_parts_are_the_events(world_of_one, tmp_path: Path) -> None:
    """The progress events are put together from pieces encoded once per op and group (a
    collective's cost is a few microseconds): each line is still the JSON object it stands for,
    whatever the group's label holds."""
    log = tmp_path / "p.jsonl"
    rp = RankProgress(log, warn=lambda m: None)
    odd = 'group "q\\\\ \u00e9\n (ranks 0)'
    for seq in (1, 2):
        rp.log.append_line(rp.collective_event("all_reduce", odd, [0, 3], seq, seq == 2))
        rp.log.append_line(rp.done_event(odd, seq))
    rp.log.close()
    events = _events(log)
    assert [{k: v for k, v in e.items() if k != "t"} for e in events] == [
        {"event": "collective", "op": "all_reduce", "group": odd, "members": [0, 3], "seq": 1,
         "line": events[0]["line"], "async": False},
        {"event": "done", "group": odd, "seq": 1},
        {"event": "collective", "op": "all_reduce", "group": odd, "members": [0, 3], "seq": 2,
         "line": events[0]["line"], "async": True},
        {"event": "done", "group": odd, "seq": 2}]
    assert all(isinstance(e["t"], float) for e in events)
    assert events[0]["line"].startswith("test_rank_progress.py:")


def test_a_failure_to_make_an_event_never_reaches_the_collective(world_of_one,
                                                                 tmp_path: Path) -> None:
    """An event that cannot be encoded (here a members value json cannot write, as a
    torch we do not know might hand us) is lost from the log; the user's collective runs and
    returns, and its own exception is the one the user sees."""
    rp = RankProgress(tmp_path / "p.jsonl", warn=lambda m: None)

    def broken(*_a, **_k):
        raise RecursionError("cannot encode")

    rp.collective_event = broken  # the encoder fails, whatever the reason
    rp.done_event = broken
    calls = []
    ok = rp._wrap(lambda t, op=None, group=None, async_op=False: calls.append(t) or "done",
                  "all_reduce")
    assert ok(torch.ones(1)) == "done" and len(calls) == 1

    def fails(t, op=None, group=None, async_op=False):
        raise ValueError("the user's own error")

    with pytest.raises(ValueError, match="the user's own error"):
        rp._wrap(fails, "all_reduce")(torch.ones(1))
    rp.log.close()


def test_compiled_collectives_waited_for_asynchronously(tmp_path: Path) -> None:
    """Logs as compiled code leaves them (NCCL: each wait only makes the GPU stream wait, the
    ranks block later where they synchronise): no rank is in a collective call, yet rank 0
    issued all_reduce #3 of its graph, which rank 1 never reached — that is the hang, named
    with the graph, its collective and the lines. A rank stuck in a wait is in it."""
    root = tmp_path / "job"
    from tuidebug.trace.jobs.progress import progress_path, rank_progress

    def log(rank: int, events: list[dict]) -> None:
        p = progress_path(root, rank)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("".join(json.dumps(e) + "\n" for e in events))

    def issued(seq: int) -> list[dict]:
        return [{"event": "collective", "op": "all_reduce", "seq": seq, "group": "default",
                 "members": None, "line": "train.py:17", "async": True,
                 "compiled": {"graph": "0_0-inference", "index": 2, "wrapper_line": 41}},
                {"event": "done", "seq": seq, "group": "default"}]

    def wait(seq: int, waited: bool = True) -> list[dict]:
        w = [{"event": "wait", "seq": seq, "group": "default"}]
        return w + ([{"event": "waited", "seq": seq, "group": "default"}] if waited else [])

    log(0, issued(1) + wait(1) + issued(2) + wait(2) + issued(3) + wait(3))
    log(1, issued(1) + wait(1) + issued(2) + wait(2))
    ranks = [{"rank": r, "status": "timed_out", "progress": rank_progress(root, r, None)}
             for r in range(2)]
    w = waits(ranks)
    [m] = w["mismatches"]
    assert (m["kind"], m["ranks"], m["waits_for"], m["seq"]) == ("issued_ahead", [0], [1], 3), m
    text = "\n".join(w["lines"])
    assert ("its last collective all_reduce #3 of graph 0_0-inference (collective 2 in it, "
            "wrapper line 41, train.py:17) was waited for") in text, text
    # a wait that never returned (gloo: the CPU blocks in it): the rank is in that collective,
    # even when it issued another one after it
    log(0, issued(1) + wait(1) + issued(2) + issued(3) + wait(2, waited=False))
    c = rank_progress(root, 0, None)["collective"]
    assert (c["seq"], c["state"], c["in_wait"], c["compiled"]["index"]) == (2, "waiting", True, 2)
    assert c["reached"] == {"default": 3}


def test_a_rank_whose_last_phase_made_no_graph_is_not_said_compiling_graph_none(
        tmp_path: Path) -> None:
    """Dynamo's start on a frame sets the phase without a graph; a frame it skips or runs
    eagerly sets no later phase. Ranks stuck after that (an H100 DDP bucket hang, 4 GPUs: rank 0
    issued all_reduce #2 asynchronously, rank 1 never did) were 'compiling graph None, phase
    dynamo'; they are said to be after that step, in the compiler or running the script."""
    from tuidebug.trace.jobs.progress import progress_path, rank_progress

    root = tmp_path / "job"
    for rank, seqs in ((0, (1, 2)), (1, (1,))):
        p = progress_path(root, rank)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("".join(json.dumps(e) + "\n" for seq in seqs for e in (
            {"event": "collective", "op": "all_reduce", "seq": seq, "group": "default",
             "members": None, "line": "train.py:9", "async": True},
            {"event": "done", "seq": seq, "group": "default"})))

    def ranks(phase: str, graph: str | None) -> list[dict]:
        out = []
        for r in (0, 1):
            prog = rank_progress(root, r, None)
            prog.update(phase=phase, compile_phase=phase, graph=graph)
            out.append({"rank": r, "status": "timed_out", "progress": prog})
        return out

    w = waits(ranks("dynamo", None))
    assert w is not None and len(w["lines"]) == 2 and w["mismatches"], w
    for line in w["lines"]:
        assert "None" not in line and "compiling graph" not in line, line
        assert "after the compiler's last step (dynamo, no graph made of that frame)" in line
    named = waits(ranks("inductor", "0_0-forward"))
    assert named is not None and all("compiling graph 0_0-forward, phase inductor" in x
                                     for x in named["lines"]), named
