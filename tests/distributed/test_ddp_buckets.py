"""DDP's bucket all-reduces (issued by its C++ reducer from autograd hooks, never through
Python's torch.distributed) are logged without changing the model (torchrun + gloo, 3 ranks).
A hang in one, located, is in tests/distributed/test_hangs.py (with the other jobs that wait on
their ``--timeout``)."""

from __future__ import annotations

import json

import pytest

from tests.distributed.conftest import trace_job

pytestmark = pytest.mark.slow


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
