"""Why a compile happened on one rank only (``trace/jobs/ranks.py``), on jobs written with the
torch-free writer: a graph break the other rank took too (DDP's
``self.logger.set_runtime_stats_and_log()`` in each compile of its forward) is not why the
ranks parted; one the rank-only recompile alone takes is; the user's line whose call
recompiled is named; code resumed after a data-dependent branch that went the other way on
one rank is told by that branch's break."""

from __future__ import annotations

import json
from pathlib import Path

from tests.trace.test_rank_prints import finish_rank
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.jobs.ranks import analyze_job
from tuidebug.viewers.ranks_view import divergence_lines

DDP_BREAK = ("Graph break in user code at /torch/nn/parallel/distributed.py:1757\n"
             "Graph Break Reason: Encountered graph break when attempting to trace "
             "CALL_FUNCTION_EX: a variadic function call, e.g. f(*args):\n\n"
             "Unsupported method call\n  Explanation: Dynamo does not know how to trace "
             "method `set_runtime_stats_and_log` of class `Logger`\n")
ITEM_BREAK = ("Graph break in user code at /job/train.py:21\n"
              "Graph Break Reason: Unsupported Tensor.item() call with "
              "capture_scalar_outputs=False\n")
CALLED = {"file": "/job/train.py", "line": 36, "fn": "<module>", "code": "loss = step(ids)"}


def _rank(job: Path, rank: int, compiles: dict[str, list[str]],
          functions: dict[str, str] | None = None,
          first_lines: dict[str, int | None] | None = None) -> None:
    """Rank ``rank`` of ``job``: each compile ``{id: [its graph breaks]}``, no graph, of
    torch's ``inner`` or of ``functions[id]`` in the user's ``/job/train.py`` (first line 18,
    or ``first_lines[id]``; None: not recorded, as an old trace); a recompile (``0/1``)
    records its reason and the line whose call recompiled."""
    w = TraceWriter(job / f"rank_{rank}", command=["test"])
    for cid, breaks in compiles.items():
        fn = (functions or {}).get(cid)
        metrics: dict[str, object] = {"co_name": fn or "inner",
                                      "co_filename": "/job/train.py" if fn
                                      else "/torch/external_utils.py",
                                      "co_firstlineno": (first_lines or {}).get(
                                          cid, 18 if fn else 67)}
        if metrics["co_firstlineno"] is None:
            del metrics["co_firstlineno"]
        detail: dict[str, object] = {"dynamo_graph_break_reason": breaks, "metrics": metrics}
        if not cid.endswith("/0"):
            detail["recompile_reasons"] = ["0/0: tensor 'args[0]' size mismatch at index 1. "
                                           "expected 8, actual 12"]
            w.write_compile_shapes(cid, {"recompile": {"reasons": detail["recompile_reasons"],
                                                       "values": {}, "called_at": CALLED}})
        w.add_compile(cid, {"graphs": []})
        w.write_compile(cid, detail)
    finish_rank(w, job, rank)


def test_a_break_every_compile_of_the_frame_takes_is_not_why(tmp_path: Path) -> None:
    job = tmp_path / "job"
    _rank(job, 0, {"0/0": [DDP_BREAK]})
    _rank(job, 1, {"0/0": [DDP_BREAK], "0/1": [DDP_BREAK]})
    d = analyze_job(job)["divergence"]
    assert d["kind"] == "compile_only_on_some_ranks" and d["compile_id"] == "0/1", d
    assert d["reason"]["graph_break_reasons"] == [], d["reason"]
    assert d["reason"]["called_at"] == CALLED
    lines = divergence_lines(d)
    assert lines[1] == "  called at train.py:36  loss = step(ids)", lines
    assert not any("graph break" in ln for ln in lines), lines


def test_a_break_in_ddps_own_code_is_not_why_though_the_other_rank_never_took_it(
        tmp_path: Path) -> None:
    """Gradient accumulation: rank 0's only compile of DDP's forward was under ``no_sync``
    (DDP skips its logger there), and rank 1 recompiled for its ragged last batch in a step
    that syncs, breaking at DDP's logger. The recompile's reason is the size; the logger's
    break (torch's, taken by every syncing compile) was listed beside it as a break only rank
    1 took."""
    job = tmp_path / "job"
    _rank(job, 0, {"0/0": []})
    _rank(job, 1, {"0/0": [], "0/1": [DDP_BREAK]})
    d = analyze_job(job)["divergence"]
    assert d["kind"] == "compile_only_on_some_ranks" and d["compile_id"] == "0/1", d
    assert d["reason"]["recompile_reasons"] and d["reason"]["graph_break_reasons"] == [], d
    assert not any("graph break" in ln for ln in divergence_lines(d)), divergence_lines(d)


def test_a_break_only_the_recompile_takes_is_named(tmp_path: Path) -> None:
    job = tmp_path / "job"
    _rank(job, 0, {"0/0": [DDP_BREAK]})
    _rank(job, 1, {"0/0": [DDP_BREAK], "0/1": [DDP_BREAK, ITEM_BREAK]})
    r = analyze_job(job)["divergence"]["reason"]
    assert [b["where"] for b in r["graph_break_reasons"]] == ["/job/train.py:21"], r


def _disabled(address: str) -> str:
    """A break at a ``torch.compiler.disable``-d function, named as Dynamo names it: by its
    address, another in each process."""
    return ("Graph break in user code at /job/train.py:12\n"
            "Graph Break Reason: Encountered graph break when attempting to trace CALL: a "
            "function call, e.g. f(x, y):\n\nSkip calling `torch.compiler.disable()`d function\n"
            f"  Explanation: Skip calling function `<function log_step at {address}>` since it "
            "was wrapped with `torch.compiler.disable` (reason: None)\n")


def test_a_break_both_ranks_took_is_not_why_though_its_text_names_an_address(
        tmp_path: Path) -> None:
    """Both ranks broke at the same disabled function before rank 1 alone recompiled; Dynamo
    prints the function with its address, which differs per process: the break was listed as
    one only rank 1 took (a DDP job's ragged last batch said so of the capture's own wrapper).
    Compared by line and words."""
    job = tmp_path / "job"
    _rank(job, 0, {"0/0": [_disabled("0x7fcb4c03ff60")]}, functions={"0/0": "step"})
    _rank(job, 1, {"0/0": [_disabled("0x7fca7782bf60")], "0/1": []},
          functions={"0/0": "step", "0/1": "step"})
    d = analyze_job(job)["divergence"]
    assert d["kind"] == "compile_only_on_some_ranks" and d["compile_id"] == "0/1", d
    assert d["reason"]["graph_break_reasons"] == [], d["reason"]
    assert not any("graph break" in ln for ln in divergence_lines(d)), divergence_lines(d)


def test_advise_on_a_job_names_the_ranks_that_recompiled_alone(tmp_path: Path) -> None:
    """``advise JOB`` reads the lowest rank's trace. A ragged last batch on rank 1 recompiled
    there only, and ``advise`` said "no recompile" of the job: it now names the ranks that made
    the compile and the command that reads theirs. Not said where the ranks agree, nor where
    the rank was asked for."""
    import os
    import subprocess
    import sys

    from tests.conftest import pythonpath

    def advise(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tuidebug.cli", "advise", *args],
                              env=dict(os.environ, PYTHONPATH=pythonpath()), text=True,
                              capture_output=True, timeout=120, stdin=subprocess.DEVNULL)

    job = tmp_path / "job"
    _rank(job, 0, {"0/0": []}, functions={"0/0": "step"})
    _rank(job, 1, {"0/0": [], "0/1": []}, functions={"0/0": "step", "0/1": "step"})
    out = advise(str(job))
    assert out.returncode == 0, out.stderr
    assert (f"rank(s) 1 compiled 0/1, which rank 0 did not (where the ranks first diverge): "
            f"tuidebug advise {job} --rank 1") in out.stderr, out.stderr
    assert "which rank" not in advise(str(job), "--rank", "0").stderr
    same = tmp_path / "same"
    for r in (0, 1):
        _rank(same, r, {"0/0": []}, functions={"0/0": "step"})
    agree = advise(str(same))
    assert agree.returncode == 0 and "is a distributed job" in agree.stderr, agree.stderr
    assert "which rank" not in agree.stderr, agree.stderr


BRANCH_BREAK = ("Graph break in user code at /job/train.py:19\n"
                "Graph Break Reason: Data-dependent branching\n"
                "  Explanation: Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`)."
                "\n")
LOGGER_BREAK = ("Graph break in user code at /lib/modeling_utils.py:4769\n"
                "Graph Break Reason: Encountered graph break when attempting to trace CALL: a "
                "function call, e.g. f(x, y):\n\nlogging.Logger method not supported\n")


RESUME = "torch_dynamo_resume_in_forward_at_19"


def test_a_rank_that_took_another_branch_is_told_by_the_break_it_resumed_after(
        tmp_path: Path) -> None:
    """Rank 1 alone has a 0 in its batch: ``if (ids == 0).any():`` breaks the graph on both
    ranks, and each resumes in the code of the branch it took (Dynamo makes a resume function
    per way out, all of one name and first line). Rank 1 compiled two of them (frames 5 and
    13: two code objects in one process), rank 0 one: rank 1 ran code rank 0 never did. The
    divergence is the break at train.py:19 that both resumed after, not the library's logger
    break both took further on."""
    job = tmp_path / "job"
    _rank(job, 0, {"4/0": [BRANCH_BREAK], "5/0": [LOGGER_BREAK]},
          {"4/0": "forward", "5/0": RESUME})
    _rank(job, 1, {"4/0": [BRANCH_BREAK], "5/0": [LOGGER_BREAK], "13/0": [LOGGER_BREAK]},
          {"4/0": "forward", "5/0": RESUME, "13/0": RESUME})
    d = analyze_job(job)["divergence"]
    assert d["compile_id"] == "13/0" and d["diverging_ranks"] == [1], d
    r = d["reason"]
    assert r["graph_break_reasons"] == [] and r["restart_reasons"] == [], r
    after = r["resumed_after"]
    assert (after["where"], after["summary"], after["other_path"], after["code_objects"]) == (
        "train.py:19", "Data-dependent branching", True, [2, 1]), after
    assert divergence_lines(d)[1:] == [
        "  resumed after the graph break at train.py:19: Data-dependent branching",
        "    rank(s) 0 resumed there too, in other code (another branch taken, or another call "
        "path to it): rank(s) 1 compiled 2 resume functions there, rank(s) 0 1"]


def test_the_same_code_under_other_frame_ids_is_no_other_branch(tmp_path: Path) -> None:
    """Frame ids are numbered per process, in the order each rank first compiled a code object:
    rank 1 compiled a helper first (its frame 5) and the one resume function later (frame 13);
    rank 0 compiled that resume function as frame 5. Same code (file, name, first line), one
    code object each: no "another branch" (it was said before, frame 13 not being rank 0's
    frame 5)."""
    job = tmp_path / "job"
    _rank(job, 0, {"4/0": [BRANCH_BREAK], "5/0": [LOGGER_BREAK]},
          {"4/0": "forward", "5/0": RESUME})
    _rank(job, 1, {"4/0": [BRANCH_BREAK], "5/0": [], "13/0": [LOGGER_BREAK]},
          {"4/0": "forward", "5/0": "helper", "13/0": RESUME})
    d = analyze_job(job)["divergence"]
    assert d["compile_id"] == "13/0" and d["diverging_ranks"] == [1], d
    after = d["reason"]["resumed_after"]
    assert (after["other_resumed"], after["other_path"]) == (True, False), after
    lines = divergence_lines(d)
    assert lines[-1] == "    rank(s) 0 resumed there too", lines
    assert not any("another branch" in ln for ln in lines), lines


def test_code_with_another_first_line_is_other_code(tmp_path: Path) -> None:
    """Rank 0's function of that name starts at another line: other code, said with its line."""
    job = tmp_path / "job"
    _rank(job, 0, {"4/0": [BRANCH_BREAK], "5/0": [LOGGER_BREAK]},
          {"4/0": "forward", "5/0": RESUME}, {"5/0": 40})
    _rank(job, 1, {"4/0": [BRANCH_BREAK], "5/0": [], "13/0": [LOGGER_BREAK]},
          {"4/0": "forward", "5/0": "helper", "13/0": RESUME}, {"13/0": 19})
    after = analyze_job(job)["divergence"]["reason"]["resumed_after"]
    assert (after["other_path"], after["other_lines"]) == (True, [40]), after


def test_a_trace_without_first_lines_says_less(tmp_path: Path) -> None:
    """An old trace records no first line: the code is compared by file and name, so another
    first line on the other rank claims nothing; two code objects against one still do."""
    job = tmp_path / "job"
    _rank(job, 0, {"4/0": [BRANCH_BREAK], "5/0": [LOGGER_BREAK]},
          {"4/0": "forward", "5/0": RESUME}, {"5/0": None})
    _rank(job, 1, {"4/0": [BRANCH_BREAK], "5/0": [], "13/0": [LOGGER_BREAK]},
          {"4/0": "forward", "5/0": "helper", "13/0": RESUME}, {"13/0": 40})
    after = analyze_job(job)["divergence"]["reason"]["resumed_after"]
    assert (after["other_resumed"], after["other_path"]) == (True, False), after
    job2 = tmp_path / "job2"
    _rank(job2, 0, {"4/0": [BRANCH_BREAK], "5/0": [LOGGER_BREAK]},
          {"4/0": "forward", "5/0": RESUME}, {"5/0": None})
    _rank(job2, 1, {"4/0": [BRANCH_BREAK], "5/0": [LOGGER_BREAK], "13/0": [LOGGER_BREAK]},
          {"4/0": "forward", "5/0": RESUME, "13/0": RESUME}, {"5/0": None, "13/0": None})
    after = analyze_job(job2)["divergence"]["reason"]["resumed_after"]
    assert (after["other_path"], after["code_objects"]) == (True, [2, 1]), after


def test_a_recompile_of_resumed_code_is_no_other_branch(tmp_path: Path) -> None:
    """Rank 1 alone recompiles the resume function (``5/1``, a size guard): both ranks resumed
    after the break in the same code; no "another branch taken" above its recompile reason."""
    job = tmp_path / "job"
    _rank(job, 0, {"4/0": [BRANCH_BREAK], "5/0": []}, {"4/0": "forward", "5/0": RESUME})
    _rank(job, 1, {"4/0": [BRANCH_BREAK], "5/0": [], "5/1": []},
          {"4/0": "forward", "5/0": RESUME, "5/1": RESUME})
    d = analyze_job(job)["divergence"]
    assert d["compile_id"] == "5/1" and d["diverging_ranks"] == [1], d
    after = d["reason"]["resumed_after"]
    assert (after["other_path"], after["other_resumed"]) == (False, True), after
    lines = divergence_lines(d)
    assert lines[2:5] == [
        "  resumed after the graph break at train.py:19: Data-dependent branching",
        "    rank(s) 0 resumed there too",
        "  recompiled: 0/0: tensor 'args[0]' size mismatch at index 1. expected 8, actual 12"], \
        lines
    assert not any("another branch" in ln for ln in lines), lines


def test_a_restart_is_dropped_only_for_a_break_at_its_own_line(tmp_path: Path) -> None:
    """A restart reason whose words match a break the other rank took elsewhere (the same
    Tensor.item() break at another line) is still why this rank compiled."""
    job = tmp_path / "job"
    there = ITEM_BREAK.replace("train.py:21", "train.py:50")
    _rank(job, 0, {"0/0": [there]})
    w = TraceWriter(job / "rank_1", command=["test"])
    for cid, restarts in (("0/0", []), ("1/0", [ITEM_BREAK])):
        w.add_compile(cid, {"graphs": []})
        w.write_compile(cid, {"dynamo_graph_break_reason": [there] if cid == "0/0" else [],
                              "metrics": {"co_name": "f", "co_filename": "/job/train.py",
                                          "co_firstlineno": 18, "restart_reasons": restarts}})
    finish_rank(w, job, 1)
    d = analyze_job(job)["divergence"]
    assert d["compile_id"] == "1/0" and d["diverging_ranks"] == [1], d
    got = d["reason"]["restart_reasons"]
    assert [(s["where"], s["summary"]) for s in got] == [
        ("/job/train.py:21", "Unsupported Tensor.item() call with capture_scalar_outputs=False")], got


def test_compiled_elsewhere_is_said_only_of_a_rank_that_lacks_the_compile(
        tmp_path: Path) -> None:
    """Three groups: ranks 1, 2 recompiled once (0/1), rank 3 never did, rank 0 recompiled
    twice (0/1, 0/2). The first divergence is 0/1, made by ranks 1, 2 and not rank 3. Reading
    rank 0 (which made 0/1 as well) said "rank(s) 1, 2 compiled 0/1, which rank 0 did not";
    said of rank 3 only."""
    from tuidebug.viewers.ranks_view import compiled_elsewhere_line

    job = tmp_path / "job"
    fn = {"0/0": "step", "0/1": "step", "0/2": "step"}
    _rank(job, 0, {"0/0": [], "0/1": [], "0/2": []}, functions=fn)
    for r in (1, 2):
        _rank(job, r, {"0/0": [], "0/1": []}, functions=fn)
    _rank(job, 3, {"0/0": []}, functions=fn)
    for r in range(4):  # a world of 4
        rec = job / "job" / f"rank_{r}.json"
        rec.write_text(json.dumps({**json.loads(rec.read_text()), "world_size": 4}))
    d = analyze_job(job)["divergence"]
    assert d["kind"] == "compile_only_on_some_ranks" and d["compile_id"] == "0/1", d
    assert compiled_elsewhere_line(d, 0, "tuidebug advise J") is None
    assert compiled_elsewhere_line(d, 1, "tuidebug advise J") is None
    assert compiled_elsewhere_line(d, 3, "tuidebug advise J") == (
        "rank(s) 1-2 compiled 0/1, which rank 3 did not (where the ranks first diverge): "
        "tuidebug advise J --rank 1"), d
