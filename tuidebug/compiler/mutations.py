"""Which of a graph's inputs or state tensors the graph changes in place.

An optimizer step compiled (``torch.compile(opt.step)``) returns nothing: what it computes is
written into its inputs and into tensors the graph holds as attributes (``exp_avg.lerp_(grad,
…)``, ``param.addcdiv_(…)``). The eager check compares outputs, so there it compares nothing;
and re-running such a graph eagerly, or the compiled one again to time its kernels, applies the
step a second time to tensors the user's program owns. ``mutated_state`` finds those writes in
the FX graph (public ``torch.fx`` only) so that the check can say so instead.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

# methods and functions that return a view of their first argument: writing into the view
# writes into the tensor it was taken from
VIEW_OPS = frozenset({
    "view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze",
    "transpose", "t", "T", "mT", "permute", "expand", "expand_as", "narrow", "select", "slice",
    "as_strided", "unfold", "diagonal", "detach", "__getitem__", "getitem", "real", "imag",
    "view_as_real", "view_as_complex", "movedim", "swapaxes", "swapdims", "split", "chunk",
    "unbind", "tensor_split", "alias"})


def _name(target: Any) -> str:
    if isinstance(target, str):
        return target
    if target is operator.getitem:
        return "getitem"
    if target is operator.setitem:
        return "setitem"
    name = getattr(target, "__name__", "") or ""
    return name.split(".")[0] if "." in name else name


def _is_inplace(name: str) -> bool:
    """``add_``, ``_foreach_mul_``, ``copy_``, item assignment; not ``__iand__``-style dunders
    (Dynamo writes those as the operator functions, checked by name too)."""
    return name == "setitem" or (name.endswith("_") and not name.endswith("__")) or \
        name in ("iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "iand", "ior",
                 "ixor", "ilshift", "irshift")


def _roots(arg: Any, depth: int = 0) -> list[Any]:
    """The placeholder and get_attr nodes ``arg`` is (a view of); lists of tensors as the
    ``_foreach_*_`` ops take them."""
    if isinstance(arg, (list, tuple)):
        return [r for a in arg for r in _roots(a, depth)]
    op = getattr(arg, "op", None)
    if op in ("placeholder", "get_attr"):
        return [arg]
    if op in ("call_method", "call_function") and depth < 64 and arg.args \
            and _name(arg.target) in VIEW_OPS:
        return _roots(arg.args[0], depth + 1)
    return []


@dataclass
class MutatedState:
    """A graph's in-place writes into tensors it did not make, as ``<tensor>.<op>``:
    ``attributes``: into tensors it holds as attributes (``get_attr``: the program's own, an
    optimizer's state); ``inputs``: into its inputs (placeholders)."""

    attributes: list[str]
    inputs: list[str]


def mutated_state(gm: Any) -> MutatedState:
    """Each in-place write of the graph into one of its inputs or attribute tensors (or a view
    of one), in graph order."""
    graph = getattr(gm, "graph", None)
    out = MutatedState([], [])
    for node in getattr(graph, "nodes", []):
        if node.op not in ("call_function", "call_method"):
            continue
        name = _name(node.target)
        written = list(node.args[:1]) if _is_inplace(name) else []
        out_arg = node.kwargs.get("out") if isinstance(node.kwargs, dict) else None
        if out_arg is not None:
            written = [out_arg]
        for root in _roots(written):
            entry = f"{root.name}.{name}" if name != "setitem" else f"{root.name}[…] ="
            where = out.attributes if root.op == "get_attr" else out.inputs
            if entry not in where:
                where.append(entry)
    return out
