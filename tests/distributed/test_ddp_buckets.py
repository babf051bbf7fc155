"""DDP's bucket all-reduces (issued by its C++ reducer from autograd hooks, never through
Python's torch.distributed) are logged as issued and completed, and a hang in one is located
(torchrun + gloo, 2 ranks; ``rank_job.py ddphang``: rank 1 sleeps before its second backward)."""

from __future__ import annotations

import json

import pytest

from tests.distributed.conftest import trace_job
from tests.distributed.test_hang import _alive, _line_of
from tests.distributed.test_ranks import _cli, _info

pytestmark = pytest.mark.slow

# past start-up (nothing compiles) on a loaded 2-core machine
DDP_HANG_TIMEOUT_S = 90


def test_ddp_bucket_all_reduces_are_logged_and_a_hang_in_one_is_located(tmp_path) -> None:
    job = tmp_path / "ddphang"
    proc = trace_job(job, "ddphang", extra=["--timeout", str(DDP_HANG_TIMEOUT_S)])
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


def test_the_logging_hook_never_changes_a_ddp_models_parameters(tmp_path) -> None:
    """``rank_job.py ddpsafe`` on 3 ranks, plain torchrun and traced: a builtin FP16_COMPRESS hook
    registered after construction (DDP's private ``_register_builtin_comm_hook``: it replaces
    the capture's hook, as it would the reducer's default) and ``Join`` with
    ``divide_by_initial_world_size=False`` on uneven inputs (the reducer divides by the ranks
    still joined) leave every parameter bit-identical to the untraced run's; so do static_graph,
    find_unused_parameters, no_sync, gradient_as_bucket_view, bfloat16 parameters and two
    models under one loss, and batched_grad_copy (the reducer divides, not multiplies: at 3
    ranks not the same numbers)."""
    import inspect
    import re
    from collections import Counter

    from torch.nn.parallel import DistributedDataParallel

    from tests.distributed.conftest import plain_job

    batched = "batched_grad_copy" in inspect.signature(DistributedDataParallel.__init__).parameters
    plain = plain_job("ddpsafe", nproc=3)
    job = tmp_path / "ddpsafe"
    traced = trace_job(job, "ddpsafe", nproc=3)
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert traced.returncode == 0, traced.stderr[-3000:]

    def digests(text: str) -> list[str]:
        return sorted(re.findall(r"rank \d: \w+ [0-9a-f]{16}(?: [0-9a-f]{16})?", text))

    assert len(digests(plain.stdout)) == 3 * (10 if batched else 8), plain.stdout
    assert digests(traced.stdout) == digests(plain.stdout)
    # the capture's hook was there (it logged both models' buckets), and yet changed nothing
    events = [json.loads(ln) for ln in
              (job / "job" / "rank_0.progress.jsonl").read_text().splitlines() if ln.strip()]
    buckets = [e for e in events if e.get("event") == "collective" and e.get("ddp")
               and e["ddp"]["bytes"] > 1_000_000]
    small = Counter(e["ddp"]["bytes"] for e in events if e.get("event") == "collective"
                    and e.get("ddp") and e["ddp"]["bytes"] < 1_000_000)
    # one bucket a synced step: static_graph 3, find_unused 3, no_sync 2 (its first step not
    # synced), the two under one loss 2 × 3, batched 3, batched_view 3; bfloat16 3;
    # bucket_view none (at 3 ranks not hooked: the reducer divides it in place)
    assert small == {2176: 3 + 3 + 2 + 2 * 3 + (6 if batched else 0), 1088: 3}, small
    # Net in 1 MB buckets: one bucket at the first step, three once rebuilt; rank 0 trains the
    # FP16_COMPRESS model 2 steps (1 + 3) and the joined one 3 (1 + 3 + 3)
    assert len(buckets) == 11, buckets
