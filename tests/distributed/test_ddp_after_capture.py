"""A DDP model built while a rank's capture logs bucket all-reduces (``compat.ddp_reducer``), used
after that capture ended and in a second one, behaves as without tuidebug (a real gloo process
group of world size 1, no torchrun)."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from tests.distributed.test_rank_progress import world_of_one  # noqa: F401 - a fixture
from tuidebug.compiler.capture.rank_progress import RankProgress


def _model() -> DDP:
    torch.manual_seed(0)
    return DDP(torch.nn.Linear(4, 4))


def _step(model: DDP) -> list[torch.Tensor]:
    model.zero_grad()
    model(torch.arange(8.0).reshape(2, 4)).square().sum().backward()
    return [p.grad.clone() for p in model.parameters()]


def _buckets(path: Path) -> list[dict]:
    events = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    return [e for e in events if e.get("event") == "collective" and e.get("ddp")]


def test_a_model_hooked_by_a_capture_is_the_scripts_after_it(world_of_one,  # noqa: F811
                                                             tmp_path: Path) -> None:
    """After the capture ended, the script registers its own comm hook on a model the capture
    hooked: it runs, and the gradients are the untraced model's (on main the capture's undo
    put torch's registration back while the reducer still held the capture's hook, and the
    reducer refused a second one: RuntimeError). A second capture logs the model's buckets
    (on main the model's hook kept logging to the first capture's closed log). Once no hooked
    model is left and no capture runs, torch's own registration functions are back."""
    original = dist._register_comm_hook
    first = RankProgress(tmp_path / "first.jsonl", warn=lambda m: None).install()
    try:
        model = _model()
        assert dist._register_comm_hook is not original
        _step(model)
    finally:
        first.uninstall()
    assert _buckets(tmp_path / "first.jsonl"), "the capture's hook logged nothing"
    seen: list[int] = []

    def theirs(state, bucket):  # type: ignore[no-untyped-def]
        seen.append(bucket.index())
        return default_hooks.allreduce_hook(state, bucket)

    model.register_comm_hook(None, theirs)
    plain = _model()
    plain.register_comm_hook(None, theirs)
    expected = _step(plain)
    seen.clear()
    got = _step(model)
    assert seen == [0]  # the script's hook ran for the model's one bucket
    assert len(got) == len(expected) > 0
    assert all(torch.equal(a, b) for a, b in zip(got, expected))

    second = RankProgress(tmp_path / "second.jsonl", warn=lambda m: None).install()
    try:
        again = _step(model)
    finally:
        second.uninstall()
    assert len(again) == len(expected)
    assert all(torch.equal(a, b) for a, b in zip(again, expected))
    assert len(_buckets(tmp_path / "second.jsonl")) == 1

    assert dist._register_comm_hook is not original  # the model still needs it
    del model
    gc.collect()
    assert dist._register_comm_hook is original


def test_a_bucket_is_logged_before_the_backward_returns(world_of_one) -> None:  # noqa: F811
    """A bucket's ``done`` is logged in the future the reducer waits for. Logged in a callback
    beside it, it could still be pending on gloo's thread once the backward returned: a DDP
    job (a compiled model with dropout, 2 gloo ranks) then hung at exit under ``tuidebug
    trace``, where untraced it ended — ``main()`` returned, freeing the model (the last
    reference to its process group, after ``destroy_process_group``), and the group's
    destructor joined gloo's thread holding the GIL that the callback waited for. Here the
    all-reduce completes on another thread a moment after it was issued (as with two ranks;
    the script's own hook, which the capture's wraps), and the log is written slowly (a loaded
    machine): the callback beside it was certain to be pending."""
    import threading
    import time

    from tuidebug.compiler.compat import ddp_reducer

    done: list[str] = []

    def on_done(token: str) -> None:
        time.sleep(0.3)
        done.append(token)

    def theirs(state, bucket):  # type: ignore[no-untyped-def]
        value = default_hooks.allreduce_hook(state, bucket).wait()
        later: torch.futures.Future = torch.futures.Future()
        threading.Timer(0.1, later.set_result, (value,)).start()
        return later

    undo = ddp_reducer.install(lambda *_: "bucket", on_done, lambda _msg: None)
    try:
        model = _model()
        model.register_comm_hook(None, theirs)
        got = _step(model)
        assert done == ["bucket"], done
    finally:
        undo()
    plain = _model()  # built after the capture: not hooked
    plain.register_comm_hook(None, theirs)
    expected = _step(plain)
    assert len(got) == len(expected) == 2
    assert all(torch.equal(a, b) for a, b in zip(got, expected))  # the value passed on
    del model
    gc.collect()


def test_a_hooked_models_group_outlives_the_model(world_of_one) -> None:  # noqa: F811
    """The Python object of a hooked model's process group is kept until the script exits, so
    that freeing the model after ``destroy_process_group`` never leaves the reducer holding the
    group's last reference: its destructor (joining gloo's thread, where the hook's callbacks
    still need the GIL once more) would run from the reducer's with the GIL held — a rank hung
    at exit (``rank_job.py ddpexit``; the hang is a race, this is what prevents it). A model
    built untraced keeps torch's own order."""
    import weakref

    from tuidebug.compiler.compat import ddp_reducer

    def freed(hooked: bool) -> bool:
        group = dist.new_group([0])
        undo = ddp_reducer.install(lambda *_: None, lambda _t: None, lambda _m: None) \
            if hooked else (lambda: None)
        try:
            model = DDP(torch.nn.Linear(4, 4), process_group=group)
            _step(model)
        finally:
            undo()
        alive = weakref.ref(group)
        dist.destroy_process_group(group)
        del model, group
        gc.collect()
        return alive() is None

    assert freed(hooked=False)
    assert not freed(hooked=True)
