"""The FX text parser on what FX prints for Python operators: ``x += 1;  t = x`` (an in-place
operator node, as Dynamo records ``step_t += 1`` of an optimizer step), ``-x``, ``1 - t ** 2``,
``x[(Ellipsis, slice(1, None, None))]`` and a get_attr's ``self.w``. Each printed graph is the
real printer's (Dynamo's graph, ``torch.fx.symbolic_trace``); its parse must find the module's
own nodes, the line-based fast path must read each statement as the ast reading does, and the
index the lazy import keeps must count the same nodes. Before, ``t += 1`` was "truncated or
corrupt" (its node dropped, a warning at import) and ``-x`` sent the 24-layer model's graphs to
a whole parse at import."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tuidebug.trace.format import fxtext

pytestmark = pytest.mark.slow


def _f(x: torch.Tensor, t: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    t += 1
    y = -x
    z = 1 - t ** 2
    return y * z + w, x[..., 1:], 0.5 ** t, ~(x > 0)


class _WithAttr(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.w - 2


def _printed_graphs() -> list[torch.fx.GraphModule]:
    graphs: list[torch.fx.GraphModule] = []

    def keep(gm: torch.fx.GraphModule, inputs: Any) -> Any:
        graphs.append(gm)
        return gm.forward

    torch.compiler.reset()
    torch.compile(_f, backend=keep)(torch.randn(3, 4), torch.tensor(1.0), torch.randn(4))
    torch.compiler.reset()
    graphs.append(torch.fx.symbolic_trace(_WithAttr()))
    return graphs


def _target(n: torch.fx.Node) -> str:
    t = n.target
    if getattr(t, "__module__", None) in ("_operator", "operator"):
        return f"operator.{t.__name__}"  # type: ignore[union-attr]
    return str(t)


def test_operators_fx_prints_parse_to_the_module_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    gms = _printed_graphs()
    assert len(gms) == 2
    targets: set[str] = set()
    for gm in gms:
        text = gm.print_readable(print_output=False, include_stride=True, include_device=True)
        parsed = fxtext.parse_graph(text)
        assert parsed.problems == [] and parsed.bad_lines == [], parsed.problems
        want = list(gm.graph.nodes)
        got = {n["name"]: n for n in parsed.nodes}
        assert [n["name"] for n in parsed.nodes] == [n.name for n in want]
        for w in want:
            n = got[w.name]
            assert n["op"] == w.op, w.name
            assert n["inputs"] == [a.name for a in w.all_input_nodes], w.name
            assert sorted(n["users"]) == sorted(u.name for u in w.users), w.name
            if w.op in ("call_function", "get_attr"):
                assert n["target"] == _target(w), w.name
                targets.add(n["target"])
        index = fxtext.index_graph(text)
        assert index is not None and index.nodes == len(parsed.nodes)
        # the fast path reads each statement as the ast reading does
        monkeypatch.setattr(fxtext, "fast_statement", lambda *a: False)
        assert fxtext.parse_graph(text).nodes == parsed.nodes
        monkeypatch.undo()
    assert {"operator.iadd", "operator.neg", "operator.pow", "operator.sub", "operator.getitem",
            "operator.invert", "w"} <= targets, targets
