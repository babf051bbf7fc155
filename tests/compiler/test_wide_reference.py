"""The float64 reference is float64: a graph's casts to narrower floats are kept in float64
(and said), and what still computes in a narrower float is found and named, never judged
against as if it were float64.

A GPT-2 training step (transformers' loss casts ``logits.float()``) showed ``logits.grad``
with an exact 0 against a reference labelled float64 that had computed the loss and its
backward in float32, and ``loss`` with a bare "—". FX graphs here (no compiler run): the
check's own code, the real reference run, the real judge and the rows ``info`` prints."""

from __future__ import annotations

import operator

import torch
from rich.console import Console
from torch import fx, nn

from tuidebug.compiler import accuracy
from tuidebug.viewers.summary_view import accuracy_renderables


class CastingLoss(nn.Module):
    """A head whose loss casts as transformers' ForCausalLMLoss does (``logits.float()``),
    beside a softmax given ``dtype=torch.float32`` and a constant made in the default dtype."""

    def forward(self, logits: torch.Tensor, labels: torch.Tensor):
        loss = nn.functional.cross_entropy(logits.float(), labels)
        probs = torch.softmax(logits, -1, dtype=torch.float32)
        return loss, probs * torch.ones(logits.shape[-1]).cumsum(0)


def _check(gm: fx.GraphModule, *args: torch.Tensor) -> dict:
    records: list[dict] = []
    with torch.enable_grad():
        accuracy.checked(gm, gm, records.append)(*args)
    (r,) = records
    return r


def _rendered(check: dict) -> str:
    console = Console(width=200, record=True, color_system=None)
    for part in accuracy_renderables("0/0", check):
        console.print(part)
    return console.export_text()


def test_casts_are_kept_in_float64_so_the_loss_and_its_gradient_have_a_reference() -> None:
    gm = fx.symbolic_trace(CastingLoss())
    logits = torch.randn(16, 50, requires_grad=True)
    labels = torch.randint(0, 50, (16,))
    r = _check(gm, logits, labels)
    assert r["close"] is True, r
    assert r["reference"].startswith("float64, the model's casts to a narrower float kept in "
                                     "float64: FX node float_1 and 1 more"), r["reference"]
    outs = r["outputs"]
    assert len(outs) == 2 and all("no_fp64" not in o for o in outs), outs
    for o in outs:  # float32 arithmetic against true float64: an error, not an exact 0
        assert o["err_eager"] > 0 and o["err_compiled"] > 0, o
    grads = r["gradients"]
    assert grads["reference"] == r["reference"], grads
    (g,) = grads["outputs"]
    assert g["name"].endswith(".grad") and "no_fp64" not in g, g
    assert g["err_eager"] > 0 and g["err_compiled"] > 0, g
    said = _rendered(r)
    assert "—" not in said and "no float64 reference" not in said, said
    assert logits.grad is None  # the user's tensors untouched


def _narrow_graph() -> fx.GraphModule:
    """``x * exp(c)`` with ``c`` a float32 constant the graph holds as an attribute (read in
    float64), ``exp(x.type("torch.FloatTensor"))`` (a cast the reference does not keep wide:
    it computes in float32 there) and ``u * 2`` (float64 throughout)."""
    root = nn.Module()
    root.register_buffer("c", torch.linspace(0.1, 1.7, 8))
    g = fx.Graph()
    x, u = g.placeholder("x"), g.placeholder("u")
    held = g.call_function(operator.mul, (x, g.call_method("exp", (g.get_attr("c"),))))
    cast = g.call_method("exp", (g.call_method("type", (x, "torch.FloatTensor")),))
    g.output((held, cast, g.call_function(operator.mul, (u, 2.0))))
    return fx.GraphModule(root, g)


def test_what_still_computes_in_float32_is_named_and_not_judged_as_float64() -> None:
    x, u = torch.randn(4, 8, requires_grad=True), torch.randn(4, 8, requires_grad=True)
    r = _check(_narrow_graph(), x, u)
    assert r["close"] is True and r["reference"] == "float64", r
    held, cast, v = r["outputs"]
    assert held["err_eager"] > 0 and "no_fp64" not in held, held
    assert cast["err_compiled"] is None and cast["rule"] == "allclose", cast
    assert cast["no_fp64"] == "the float64 run computed it in a narrower float at FX node type_1"
    assert v["err_eager"] is not None and "no_fp64" not in v, v
    gx, gu = r["gradients"]["outputs"]
    assert gx["name"] == "x.grad" and gx["err_compiled"] is None, gx
    assert gx["no_fp64"] == ("its backward in the float64 run used values computed in a "
                             "narrower float at FX node type_1"), gx
    assert gu["name"] == "u.grad" and gu["err_eager"] is not None and "no_fp64" not in gu, gu
    said = _rendered(r)
    rows = {ln.split("  ")[2]: ln for ln in said.splitlines() if ln.strip().endswith(" ok")}
    assert sorted(rows) == ["output 0", "output 1", "output 2", "u.grad", "x.grad"], said
    assert rows["output 1"].count("—¹") == 2 and rows["x.grad"].count("—²") == 2, said
    assert "—" not in rows["output 0"] + rows["output 2"] + rows["u.grad"], said
    assert "—¹ no float64 reference: the float64 run computed it in a narrower float at FX " \
           "node type_1" in said, said
    assert "—² no float64 reference: its backward in the float64 run used values computed " \
           "in a narrower float at FX node type_1" in said, said
    # the verdict's line gives each its own reason
    assert "no float64 reference for output 1: the float64 run computed it in a narrower " \
           "float at FX node type_1; for x.grad: its backward" in " ".join(said.split()), said
