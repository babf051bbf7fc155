"""A graph that writes in place into its inputs or its attribute tensors (an optimizer step) is
not re-run by the eager check, and the check says why instead of "match" (issue 30: the
compiled AdamW step was called a match with no output compared, while the float64 re-run had
failed — and the re-run had stepped the optimizer's state a second time)."""

from __future__ import annotations

import torch
from torch import fx, nn

from tuidebug.compiler import accuracy
from tuidebug.compiler.mutations import mutated_state


class StateStep(nn.Module):
    """An optimizer-like step: state held as a buffer, updated in place; returns nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("exp_avg", torch.zeros(4))

    def forward(self, p: torch.Tensor, g: torch.Tensor) -> None:
        self.exp_avg.lerp_(g, 0.1)
        p.view(-1).add_(self.exp_avg, alpha=-0.5)


class InPlaceInside(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        y.relu_()  # a tensor the graph made: re-running is harmless, outputs are compared
        return y


class WritesInput(nn.Module):
    def forward(self, x: torch.Tensor) -> None:
        x.copy_(torch.ones_like(x))


def test_writes_into_attributes_and_inputs_are_found() -> None:
    m = mutated_state(fx.symbolic_trace(StateStep()))
    assert m.attributes == ["exp_avg.lerp_"]
    assert m.inputs == ["p.add_"]  # through the view
    inside = mutated_state(fx.symbolic_trace(InPlaceInside()))
    assert inside.attributes == [] and inside.inputs == []
    assert mutated_state(fx.symbolic_trace(WritesInput())).inputs == ["x.copy_"]


def test_a_step_on_state_runs_once_and_is_not_called_a_match() -> None:
    gm = fx.symbolic_trace(StateStep())
    records: list[dict] = []
    run = accuracy.checked(gm, gm, records.append)
    p, g = torch.ones(4), torch.full((4,), 2.0)
    run(p, g)
    (r,) = records
    assert "close" not in r and r["skipped"].startswith("not compared: the graph writes in place")
    assert "exp_avg.lerp_" in r["skipped"] and r["mutated"] == ["exp_avg.lerp_", "p.add_"]
    # the program's state was stepped once, as without the check
    assert torch.allclose(gm.exp_avg, torch.full((4,), 0.2))
    assert torch.allclose(p, torch.full((4,), 0.9))


def test_a_graph_whose_effect_is_writing_its_inputs_says_so() -> None:
    gm = fx.symbolic_trace(WritesInput())
    records: list[dict] = []
    accuracy.checked(gm, gm, records.append)(torch.zeros(3))
    assert records[0]["skipped"].startswith("not compared: the graph returns nothing")


def test_a_graph_writing_only_what_it_made_is_still_judged() -> None:
    gm = fx.symbolic_trace(InPlaceInside())
    records: list[dict] = []
    accuracy.checked(gm, gm, records.append)(torch.randn(8))
    assert records[0]["close"] is True and records[0]["reference"] == "float64"
