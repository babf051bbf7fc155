"""compat's profiling on this torch, without compiling: the eager backward attributed to the FX
nodes whose ops created it (the profiler's sequence_nr and fwd_thread), and compiled autograd
detected (a backward the profile ran would be compiled by Dynamo)."""

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
    prof = compat.profiled(backward, runs, (PREFIX,), before_run=forward, backward_of=PREFIX)
    assert prof["backward_from"] == "sequence_nr"
    back = prof["backward"]
    # Linear: AddmmBackward0 and TBackward0 (the weight's transpose); GELU; LayerNorm
    assert set(back) == {PREFIX + "_0", PREFIX + "_1", PREFIX + "_2"}
    assert [back[PREFIX + n]["count"] for n in ("_0", "_1", "_2")] == [2, 1, 1]
    assert all(r["cpu_us"] > 0 for r in back.values())
    assert all(x.grad is None and p.grad is None for p in model.parameters())
    # the forward's own ranges are measured as ever
    assert {PREFIX + "_0", PREFIX + "_1", PREFIX + "_2"} <= set(prof["ranges"])


def test_compiled_autograd_is_detected(monkeypatch) -> None:
    import torch._dynamo.config

    assert compat.compiled_autograd_on() is False
    monkeypatch.setattr(torch._dynamo.config, "compiled_autograd", True)
    assert compat.compiled_autograd_on() is True
    from tuidebug.compiler.accuracy import GradCall
    from tuidebug.compiler.capture.profile_backward import profile_backward

    ran: list = []
    out = profile_backward(None, "0/0", 0, torch.nn.Linear(2, 2), GradCall([True], ran.append),
                           [torch.randn(2)], 2, 1, PREFIX)
    assert out["note"].startswith("the backward graph was not profiled: compiled autograd is on")
    assert ran == []  # nothing ran


def test_a_backward_that_cannot_run_is_a_note_not_an_error() -> None:
    """What the capture records when a compile's backward cannot be profiled: a call that
    raises, outputs that need no gradient — each a note; nothing raised into the user's call."""
    from tuidebug.compiler.accuracy import GradCall
    from tuidebug.compiler.capture.profile_backward import profile_backward

    gm = torch.fx.symbolic_trace(torch.nn.Linear(4, 4))
    x = torch.randn(2, 4)

    def boom(args: list) -> None:
        raise RuntimeError("boom\nsecond line")

    out = profile_backward(None, "0/0", 0, gm, GradCall([True], boom), [x], 2, 1, PREFIX)
    assert out == {"note": "the backward graph was not profiled: it failed: RuntimeError: boom"}
    out = profile_backward(None, "0/0", 0, gm, GradCall([True], lambda a: gm(*a).detach()), [x],
                           2, 1, PREFIX)
    assert out == {"note": "the backward graph was not profiled: no output of the compiled "
                           "graph requires grad"}
    assert x.grad is None and all(p.grad is None for p in gm.parameters())
