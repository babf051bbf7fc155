"""Gradients judged: a training compile's backward checked against eager and float64.

When the first call of a compiled graph runs under autograd (grad enabled, some input requiring
grad: a parameter Dynamo lifted, an input), the check runs one more forward and backward of each
side on copies of the inputs: the compiled graph, the eager graph, and the eager graph on the
copies upcast to float64 (the reference). Each backward is ``torch.autograd.grad`` of the outputs
that require grad, with the same seeded output gradients, with respect to those copies: it
returns the gradients and never accumulates into a ``.grad``, so the user's training is
untouched (and the RNG state is put back by the caller). Each gradient is judged by
``judge.judge_output``, the forward outputs' rule, and named for what it is the gradient of
(``layers.0.fc1.weight.grad``, ``x.grad``), as the user reads it after a backward.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

import torch

from tuidebug.compiler import compat, judge, wide_reference
from tuidebug.compiler.copies import strided_copy

_SEED = 0
_ASSIGNED = re.compile(r"^\s*([A-Za-z_][\w.]*(?:\[[^\]]*\])?)\s*(?::[^=]+)?=(?!=)")


@dataclass
class GradCall:
    """How the user's first call of a compiled graph ran under autograd (grad enabled, some
    input requiring grad): which of its inputs required grad, and ``run(args)``: the compiled
    graph called once on ``args`` with grad enabled (its outputs carry the graph's backward)."""

    requires_grad: list[bool]
    run: Callable[[list[Any]], Any]


@dataclass
class GraphNames:
    """What the user calls a graph's inputs and outputs (``compat.graph_input_names``,
    ``output_names``)."""

    inputs: list[str]
    outputs: list[str]


def graph_names(gm: Any) -> GraphNames:
    """The names of ``gm``'s inputs and outputs; read them before Dynamo is done with the graph
    (it drops the inputs' sources from their nodes once the backend has compiled it)."""
    try:
        return GraphNames(compat.graph_input_names(gm), output_names(gm))
    except Exception:  # a graph unlike Dynamo's: numbered names
        return GraphNames([], [])


def output_names(gm: Any) -> list[str]:
    """Each output of a graph named by the variable the user's line assigned it to
    (``loss = …`` → ``loss``), an input it returns, else ``output <i>``; a name taken twice
    gets its output's index too."""
    outs = [n for n in gm.graph.nodes if n.op == "output"]
    args = judge.flatten_outputs(outs[0].args[0]) if outs else []
    inputs = dict(zip([n for n in gm.graph.nodes if n.op == "placeholder"],
                      compat.graph_input_names(gm)))
    names: list[str] = []
    for i, a in enumerate(args):
        name = inputs.get(a)
        if name is None and isinstance(a, torch.fx.Node):
            lines = [ln for ln in str(a.meta.get("stack_trace") or "").splitlines()
                     if ln.strip() and not ln.strip().startswith("File ")
                     and set(ln.strip()) - set("~^ ")]  # no caret lines (Python 3.11+)
            m = _ASSIGNED.match(lines[-1]) if lines else None
            name = m.group(1) if m and not m.group(1).startswith("self.") else None
        names.append(name or f"output {i}")
    taken = [n for n in names if names.count(n) > 1 and not n.startswith("output ")]
    return [f"{n} (output {i})" if n in taken else n for i, n in enumerate(names)]


def grad_leaves(inputs: list[Any], grad: GradCall) -> list[Any]:
    """Copies of ``inputs`` (``copies.strided_copy``: a compiled graph asserts its inputs'
    strides) that require grad where the user's call's inputs did."""
    return [strided_copy(x).requires_grad_(True)
            if flag and isinstance(x, torch.Tensor) else x
            for x, flag in zip(inputs, grad.requires_grad)]


def tensors(x: Any) -> list[torch.Tensor]:
    """The tensors of a graph's outputs (a tensor, or lists, tuples and dicts of them)."""
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for item in x for t in tensors(item)]
    if isinstance(x, dict):
        return [t for item in x.values() for t in tensors(item)]
    return []


def seeded(outs: list[torch.Tensor]) -> list[torch.Tensor]:
    """A fixed output gradient per output (seeded normal values; the same every time)."""
    gen = torch.Generator().manual_seed(_SEED)
    return [torch.randn(o.shape, generator=gen).to(device=o.device, dtype=o.dtype) for o in outs]


def _backward(forward: Callable[[list[Any]], Any], leaves: list[Any], flags: list[bool],
              params: list[torch.Tensor], grads: list[torch.Tensor] | None
              ) -> tuple[list[torch.Tensor | None], list[bool], list[torch.Tensor]]:
    """(gradients w.r.t. the leaves that require grad and ``params``, which outputs required
    grad, the output gradients used)."""
    with torch.enable_grad():
        outs = tensors(forward(leaves))
        used = [o.requires_grad for o in outs]
        outs = [o for o in outs if o.requires_grad]
        if grads is None:
            grads = seeded(outs)
        wrt = [x for x, f in zip(leaves, flags) if f] + params
        if not outs:
            return [None] * len(wrt), used, grads
        got = torch.autograd.grad(outs, wrt, grad_outputs=[g.to(o.dtype) for g, o in
                                                           zip(grads, outs)], allow_unused=True)
    return [g.detach() if g is not None else None for g in got], used, grads


def forward_backward(grad: GradCall, inputs: list[Any]) -> None:
    """The compiled graph run forward and backward once on copies of ``inputs`` (the seeded
    output gradients; nothing kept)."""
    _backward(grad.run, grad_leaves(inputs, grad), list(grad.requires_grad), [], None)


def judge_gradients(grad: GradCall, eager: Any, inputs: list[Any], names: list[str],
                    reset_rng: Callable[[], None], tol: float | None,
                    no_reference: str = "") -> dict[str, Any]:
    """The verdict on the gradients: ``{"close", "outputs": [entry per gradient], "detail",
    "reference"}`` (entries as ``judge.judge_output``'s, with ``name``), or ``{"skipped": why}``.
    ``eager``: the FX graph that was compiled; ``inputs``: copies of the user's call's inputs;
    ``names``: one per input; ``reset_rng``: puts the RNG state of the user's call back;
    ``no_reference``: why no float64 reference is sound (a graph that draws random numbers)."""
    if compat.compiled_autograd_on():
        return {"skipped": "compiled autograd is on: a backward run by the check would be "
                           "compiled by Dynamo as a graph of its own"}
    flags = list(grad.requires_grad)
    if len(names) != len(flags):
        names = [f"input {i}" for i in range(len(flags))]
    named = [n for n, f in zip(names, flags) if f]
    params = [(n, p) for n, p in eager.named_parameters() if p.requires_grad]
    named += [n for n, _ in params]
    reset_rng()
    compiled, used, seeds = _backward(grad.run, grad_leaves(inputs, grad), flags,
                                      [p for _, p in params], None)
    if not any(used):
        return {"skipped": "no output of the compiled graph requires grad"}
    reset_rng()
    plain, used_e, _ = _backward(lambda xs: eager(*xs), grad_leaves(inputs, grad), flags,
                                 [p for _, p in params], seeds)
    if used_e != used:
        return {"skipped": f"the eager graph's outputs requiring grad ({sum(used_e)}) are not "
                           f"the compiled graph's ({sum(used)})"}
    reference: list[Any] = [None] * len(compiled)
    apart = [""] * len(compiled)  # why a gradient's float64 run is no float64 reference
    met = wide_reference.Wide()
    why = no_reference
    if why:
        pass
    elif params:
        why = "the graph's own parameters stay in their dtype"
    else:
        try:
            wide = [judge.upcast(x).requires_grad_(True) if f and isinstance(x, torch.Tensor)
                    else judge.upcast(x) for x, f in zip(inputs, flags)]
            reset_rng()

            def forward(xs: list[Any]) -> Any:
                nonlocal met
                out, met = wide_reference.run(eager, xs)
                return out
            reference, _, _ = _backward(forward, wide, flags, [],
                                        [judge.upcast(g) for g in seeds])
            notes = wide_reference.input_notes(eager, met)
            if len(notes) == len(flags):
                apart = [n for n, f in zip(notes, flags) if f]
        except Exception as e:  # an op without float64 support, a dtype fixed inside the graph
            why = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:160] if str(e).strip() else ''}"
    entries = []
    for name, c, e, r, note in zip(named, compiled, plain, reference, apart):
        if c is None and e is None:
            continue
        c = torch.zeros_like(e) if c is None else c
        e = torch.zeros_like(c) if e is None else e
        entry = judge.judge_output(c, e, None if note else r, tol, note or why)
        if note:
            entry["no_fp64"] = note
        entries.append({"name": f"{name}.grad", **entry})
    bad = [o for o in entries if not o["ok"]]
    decided = bad[0] if bad else next((o for o in entries if o["rule"] != "allclose"),
                                      entries[0] if entries else None)
    return {"close": not bad, "rule": decided["rule"] if decided else "none",
            "max_abs": max((o["max_abs"] for o in entries), default=0.0),
            "max_rel": max((o["max_rel"] for o in entries), default=0.0),
            "outputs": entries, "reference": met.label() if not why else f"eager only: {why}",
            "detail": f"{decided['name']}: {decided['detail']}" if decided else "no gradients"}
