"""compat's profiling on this torch: the eager backward attributed to the FX nodes whose ops
created it (the profiler's sequence_nr and fwd_thread), compiled autograd detected (a backward
the profile ran would be compiled by Dynamo), what runs before each run not counted; and one
compile: a backward profiled from the inputs the user's call found."""

from __future__ import annotations

import pytest
import torch

from tuidebug.compiler import compat

pytestmark = pytest.mark.slow  # runs torch and its profiler in this process

PREFIX = "tuidebug.n/"


def test_eager_backward_is_attributed_to_the_node_that_created_it() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU(), torch.nn.LayerNorm(16))
    gm = torch.fx.symbolic_trace(model)
    x = torch.randn(8, 16, requires_grad=True)
    wrt = [x, *model.parameters()]
    interp = compat.NodeRanges(gm, PREFIX)
    state: dict = {}

    def forward() -> None:
        state["out"] = interp.run(x)

    def backward() -> None:
        out = state.pop("out")
        torch.autograd.grad([out], wrt, grad_outputs=[torch.ones_like(out)])

    runs = 3
    prof = compat.profiled(backward, runs, (PREFIX,), torch.device("cpu"), before_run=forward, backward_of=PREFIX)
    assert prof["backward_from"] == "sequence_nr"
    back = prof["backward"]
    # Linear: AddmmBackward0 and TBackward0 (the weight's transpose); GELU; LayerNorm
    assert set(back) == {PREFIX + "_0", PREFIX + "_1", PREFIX + "_2"}
    assert [back[PREFIX + n]["count"] for n in ("_0", "_1", "_2")] == [2, 1, 1]
    assert all(r["cpu_us"] > 0 for r in back.values())
    assert all(x.grad is None and p.grad is None for p in model.parameters())
    # the forward ran before each backward, unclocked: its own ranges are not rows of the
    # backward's profile (the backward's functions are still matched to them, above)
    assert not set(prof["ranges"]) & {PREFIX + "_0", PREFIX + "_1", PREFIX + "_2"}


def test_what_runs_before_each_run_is_not_counted() -> None:
    """``before_run`` (the copy that puts back an input the graph writes, the forward before a
    timed backward) runs in the same profiler session as the runs, unclocked: none of its
    ranges or ops is a row of the profile, and each range of the run is counted once per run
    (it was a row, with the run's own range counted twice per run)."""
    x, kept, cache = torch.randn(64), torch.randn(64), torch.zeros(64)

    def restore() -> None:
        with torch.profiler.record_function(PREFIX + "restore"):
            cache.copy_(kept)
        with torch.profiler.record_function(PREFIX + "run"):  # the same label as the run's
            cache.add_(1)

    def run() -> None:
        with torch.profiler.record_function(PREFIX + "run"):
            cache.mul_(x)

    runs = 4
    prof = compat.profiled(run, runs, (PREFIX,), torch.device("cpu"), before_run=restore)
    assert set(prof["ranges"]) == {PREFIX + "run"}, prof["ranges"]
    assert prof["ranges"][PREFIX + "run"]["count"] == 1
    assert prof["device_kernels"] == {}  # the CPU: no device, nothing of the restore either


CACHE_STEP = """
import torch

cache = torch.zeros(2, 8)  # the user's call leaves one row free
pos = torch.zeros(1, dtype=torch.long)
w = torch.randn(8, requires_grad=True)


@torch.compile
def step(x, w, cache, pos):
    y = (x * w).sin()
    cache.index_copy_(0, pos, x.view(1, 8))  # past its 2 rows, index out of bounds
    pos.add_(1)
    return y.sum() + cache.sum()


step(torch.randn(8), w, cache, pos).backward()
print("POS", int(pos))
"""


def test_the_backward_is_profiled_from_the_inputs_the_call_found(tmp_path) -> None:
    """A training step that writes into its inputs (a cache it indexes by a position it
    advances): the backward's profile runs the forward before each timed backward, and each
    forward starts from the inputs as the user's call found them. Run from what the last one
    left, the cache was indexed past its end: the backward was not profiled (index out of
    bounds). The whole call's timing puts back what the call writes before each run, from
    where the user's call left it: one row from the cache's end, where the eager step's first
    run did two forwards with no put-back between (not_measured: index 2 is out of bounds)."""
    import json

    from tests.conftest import trace_script

    out, proc = trace_script(tmp_path, "cache_step", CACHE_STEP, "--profile", "3")
    assert "POS 1" in proc.stdout  # the user's own call advanced their position once
    (c,) = json.loads((out / "profile.json").read_text())["compiles"].values()
    assert "note" not in c, c["note"]
    back = c["backward"]
    assert "note" not in back, back["note"]
    assert back["kernels"] and all(k["calls"] == 1 for k in back["kernels"]), back["kernels"]
    assert back["eager"]["wall_s"] > 0 and back["eager_nodes"]
    assert all(k["calls"] == 1 for k in c["kernels"]), c["kernels"]
    # the whole call too: re-run from what the user's call left, its writes put back before
    # each run (before: the copies advanced, index 4 out of bounds, a warning and no figure)
    manifest = json.loads((out / "manifest.json").read_text())
    assert not any("whole call" in w for w in manifest["warnings"]), manifest["warnings"]
    (call,) = json.loads((out / "profile.json").read_text())["calls"]
    assert "not_measured" not in call, call["not_measured"]
    assert call["training"] is True and call["restored"] == ["argument 2", "argument 3"], call
    assert call["rounds"] >= 10 and call["compiled"]["median_s"] > 0
    assert call["eager"]["median_s"] > 0 and call["ledger"], call


def test_compiled_autograd_is_detected() -> None:
    import torch._dynamo.config

    assert compat.compiled_autograd_on() is False
    # the config's own patch: monkeypatch.setattr recorded the old value as unset (a
    # ConfigModule keeps values in ``_config``) and its undo deleted the option, hiding it
    # from every later read in the process
    with torch._dynamo.config.patch(compiled_autograd=True):
        assert compat.compiled_autograd_on() is True
        from tuidebug.compiler.accuracy import GradCall
        from tuidebug.compiler.capture.profile_backward import profile_backward

        ran: list = []
        out = profile_backward(None, "0/0", 0, torch.nn.Linear(2, 2),
                               GradCall([True], ran.append), [torch.randn(2)], 2, 1, PREFIX,
                               restore=lambda: None, device=torch.device("cpu"))
    assert out["note"].startswith("the backward graph was not profiled: compiled autograd is on")
    assert ran == []  # nothing ran
    assert compat.compiled_autograd_on() is False
    assert torch._dynamo.config.compiled_autograd is False  # still an option after the test


def test_a_backward_that_cannot_run_is_a_note_not_an_error() -> None:
    """What the capture records when a compile's backward cannot be profiled: a call that
    raises, outputs that need no gradient — each a note; nothing raised into the user's call."""
    from tuidebug.compiler.accuracy import GradCall
    from tuidebug.compiler.capture.profile_backward import profile_backward

    gm = torch.fx.symbolic_trace(torch.nn.Linear(4, 4))
    x = torch.randn(2, 4)

    def boom(args: list) -> None:
        raise RuntimeError("boom\nsecond line")

    out = profile_backward(None, "0/0", 0, gm, GradCall([True], boom), [x], 2, 1, PREFIX,
                           restore=lambda: None, device=torch.device("cpu"))
    assert out == {"note": "the backward graph was not profiled: it failed: RuntimeError: boom"}
    out = profile_backward(None, "0/0", 0, gm, GradCall([True], lambda a: gm(*a).detach()), [x],
                           2, 1, PREFIX, restore=lambda: None, device=torch.device("cpu"))
    assert out == {"note": "the backward graph was not profiled: no output of the compiled "
                           "graph requires grad"}
    assert x.grad is None and all(p.grad is None for p in gm.parameters())
