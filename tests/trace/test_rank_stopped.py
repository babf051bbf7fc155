"""A job stopped at ``--timeout`` where no rank is in a collective the progress log records:
``torch.compile(DDP(GPT-2))``, rank 1 asleep before its second step, rank 0 blocked in DDP's
forward (``reducer._rebuild_buckets()``, a broadcast issued in C++, not logged). ``info`` said
only "ranks agree, and every rank ended timed_out", though each rank's stack was dumped: where
each rank is must be said, and rank 0's place named as torch.distributed code, not "outside any
collective". Logs and stack dumps written as the capture writes them (no torch).

A job whose rank raised and whose other ranks were stopped (``killed``) is no hang: ``info``
said "hung: ranks stopped, none in a collective…" in bold red for an ordinary exception."""

from __future__ import annotations

import json
from pathlib import Path

from tuidebug.trace.jobs.progress import progress_path, rank_progress, stacks_path, waits
from tuidebug.viewers.ranks_view import stopped_text, wait_headings

SITE = "/venv/lib/python3.11/site-packages/torch"
RANK0 = f"""Thread 0x00007f0bb7aff6c0 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 331 in wait
  File "/venv/lib/python3.11/site-packages/tqdm/_monitor.py", line 69 in run

Current thread 0x00007f0bed070b80 (most recent call first):
  File "{SITE}/nn/parallel/distributed.py", line 1775 in _pre_forward
  File "{SITE}/nn/parallel/distributed.py", line 1886 in forward
  File "{SITE}/nn/modules/module.py", line 1789 in _call_impl
  File "{SITE}/_dynamo/external_utils.py", line 69 in inner
  File "{SITE}/_dynamo/eval_frame.py", line 1166 in compile_wrapper
  File "/job/train.py", line 42 in <module>
  File "<frozen runpy>", line 88 in _run_code
  File "/x/tuidebug/compiler/run_script.py", line 195 in <module>
"""
RANK1 = """Current thread 0x00007f9c0b240b80 (most recent call first):
  File "/job/train.py", line 38 in <module>
  File "<frozen runpy>", line 88 in _run_code
  File "/x/tuidebug/compiler/run_script.py", line 195 in <module>
"""


def _stopped_ranks(root: Path, statuses: dict[int, str]) -> list[dict]:
    ranks = []
    for rank, stack in ((0, RANK0), (1, RANK1)):
        log = progress_path(root, rank)
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("".join(json.dumps(e) + "\n" for e in (
            {"event": "start", "t": 1.0},
            {"event": "collective", "op": "all_reduce", "group": "default", "members": None,
             "seq": 1, "line": "train.py:43", "async": True,
             "ddp": {"bucket": 0, "last": True, "bytes": 449536}, "t": 2.0},
            {"event": "done", "group": "default", "seq": 1, "t": 2.1})))
        stacks_path(log).write_text(stack)
        ranks.append({"rank": rank, "status": statuses[rank],
                      "progress": rank_progress(root, rank, None)})
    return ranks


def test_where_each_rank_is_when_none_is_in_a_logged_collective(tmp_path: Path) -> None:
    w = waits(_stopped_ranks(tmp_path / "job", {0: "timed_out", 1: "timed_out"}))
    assert w is not None and w["mismatches"] == [] and w["waiting"] == {}, w
    assert len(w["lines"]) == 2, w["lines"]
    zero, one = w["lines"]
    assert zero.startswith("rank 0 is at train.py:42 (<module>), in torch.distributed code "
                           "(distributed.py:1775 (_pre_forward)), in no collective the log "
                           "records"), zero
    assert "outside any collective" not in zero and "innermost" not in zero, zero
    assert one.startswith("rank 1 is at train.py:38 (<module>), outside any collective"), one
    assert stopped_text(w) == ("ranks stopped, none in a collective the progress log records; "
                               "where each rank is:")
    assert w["hung"] and wait_headings(w) == ("hung: ", "bold red", [stopped_text(w)])


def test_a_rank_that_raised_is_no_hang(tmp_path: Path) -> None:
    """Rank 1 raised (failed); the launcher stopped rank 0 (killed), which carries progress:
    where it was is said, under a neutral heading, not "hung"."""
    ranks = _stopped_ranks(tmp_path / "job", {0: "killed", 1: "failed"})
    w = waits(ranks)
    assert w is not None and not w["hung"], w
    assert len(w["lines"]) == 1 and w["lines"][0].startswith("rank 0 is at train.py:42"), w
    label, style, texts = wait_headings(w)
    assert label == "stopped: " and "red" not in style, (label, style)
    assert texts == ["rank 1 failed; rank(s) 0 stopped by the launcher when another rank "
                     "ended; where each rank was:"], texts
    assert not any("hung" in t for t in texts), texts
