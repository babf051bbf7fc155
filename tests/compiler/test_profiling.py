"""compat's profiling on this torch, without compiling: the eager backward attributed to the FX
nodes whose ops created it (the profiler's sequence_nr and fwd_thread), and compiled autograd
detected (a backward the profile ran would be compiled by Dynamo)."""

from __future__ import annotations

import torch

from tuidebug.compiler import compat

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
