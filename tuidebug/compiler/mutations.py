"""Which of a graph's inputs or state tensors the graph changes in place.

An optimizer step compiled (``torch.compile(opt.step)``) returns nothing: what it computes is
written into its inputs and into tensors the graph holds as attributes (``exp_avg.lerp_(grad,
…)``, ``param.addcdiv_(…)``). The eager check compares outputs, so there it compares nothing;
and re-running such a graph eagerly, or the compiled one again to time its kernels, applies the
step a second time to tensors the user's program owns. ``mutated_state`` finds those writes in
the FX graph so that the check can say so instead. Which arguments an op writes is read from
its schema (``compat.written_arguments``), not guessed from its name: ``out=`` variants, a
custom op's ``mutates_args`` and an op whose name ends in ``_`` but writes nothing are right.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

from tuidebug.compiler import compat

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


# methods that return their first argument itself when there is nothing to convert
# (``cache_length.to(x.device)`` on its own device: transformers' static cache): a write into
# their result may be a write into it
MAY_ALIAS = frozenset({"to", "type", "type_as", "contiguous", "cpu", "cuda", "float", "double",
                       "half", "bfloat16", "int", "long", "bool", "short", "char", "byte"})


PY_INPLACE = frozenset({"setitem", "iadd", "isub", "imul", "itruediv", "ifloordiv", "imod",
                        "ipow", "iand", "ior", "ixor", "ilshift", "irshift"})


def _named_inplace(name: str) -> bool:
    """Only for a target without a schema (not an operator torch knows): ``add_``-style names,
    not ``__iand__``-style dunders."""
    return name.endswith("_") and not name.endswith("__")


def _written(node: Any, name: str) -> list[Any]:
    """The values ``node`` writes into: Python's in-place operators (item assignment,
    ``operator.iadd``: their first argument); an operator's written arguments as its schema
    marks them (``compat.written_arguments``: ``copy_``'s self, ``add.out``'s ``out``, a custom
    op's ``mutates_args``, wherever they sit); a target without a schema by its name (a
    trailing ``_``: its first argument; an ``out=`` keyword)."""
    kwargs = node.kwargs if isinstance(node.kwargs, dict) else {}
    if name in PY_INPLACE:
        return list(node.args[:1])
    written = compat.written_arguments(node.target)
    if written is None:
        out = [kwargs["out"]] if kwargs.get("out") is not None else []
        return out or (list(node.args[:1]) if _named_inplace(name) else [])
    values = []
    for w in written:
        if w.name in kwargs:
            values.append(kwargs[w.name])
        elif w.position is not None and w.position < len(node.args):
            values.append(node.args[w.position])
    return [v for v in values if v is not None]


def _roots(arg: Any, depth: int = 0) -> list[Any]:
    """The placeholder and get_attr nodes ``arg`` is (a view of); lists of tensors as the
    ``_foreach_*_`` ops take them."""
    if isinstance(arg, (list, tuple)):
        return [r for a in arg for r in _roots(a, depth)]
    op = getattr(arg, "op", None)
    if op in ("placeholder", "get_attr"):
        return [arg]
    if op in ("call_method", "call_function") and depth < 64 and arg.args \
            and (_name(arg.target) in VIEW_OPS or _name(arg.target) in MAY_ALIAS):
        return _roots(arg.args[0], depth + 1)
    return []


@dataclass
class MutatedState:
    """A graph's in-place writes into tensors it did not make, as ``<tensor>.<op>``:
    ``attributes``: into tensors it holds as attributes (``get_attr``: the program's own, an
    optimizer's state); ``inputs``: into its inputs (placeholders). ``positions``: the
    positions of the inputs written (a re-run of the graph must start from their values before
    the first run, not from what that run left); ``targets``: the targets of the attribute
    tensors written (``written_tensors`` finds them on the graph module)."""

    attributes: list[str]
    inputs: list[str]
    positions: list[int] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)


def mutated_state(gm: Any) -> MutatedState:
    """Each in-place write of the graph into one of its inputs or attribute tensors (or a view,
    or a ``MAY_ALIAS`` result, of one), in graph order: one walk of the graph finds the
    placeholders and the ``get_attr`` nodes written together."""
    graph = getattr(gm, "graph", None)
    nodes = list(getattr(graph, "nodes", []))
    placeholders = {id(n): i for i, n in enumerate(n for n in nodes if n.op == "placeholder")}
    out = MutatedState([], [])
    positions: set[int] = set()
    for node in nodes:
        if node.op not in ("call_function", "call_method"):
            continue
        name = _name(node.target)
        for root in _roots(_written(node, name)):
            entry = f"{root.name}.{name}" if name != "setitem" else f"{root.name}[…] ="
            if root.op == "get_attr":
                where = out.attributes
                if str(root.target) not in out.targets:
                    out.targets.append(str(root.target))
            else:
                where = out.inputs
                if id(root) in placeholders:
                    positions.add(placeholders[id(root)])
            if entry not in where:
                where.append(entry)
    out.positions = sorted(positions)
    return out


def written_tensors(gm: Any, inputs: list[Any], written: list[int], attributes: list[str],
                    names: list[str]) -> list[tuple[str, Any]]:
    """The tensors a call of the graph on ``inputs`` (the call's own, not copies) writes in
    place, each with its name: the inputs at ``written`` (``names``: the graph's input names,
    a global ``pos``, a parameter ``fc1.weight``) and the attribute tensors at ``attributes``
    (their targets)."""
    out = [(names[i] if i < len(names) else f"input {i}", inputs[i]) for i in written
           if i < len(inputs) and hasattr(inputs[i], "data_ptr")]
    for target in attributes:
        value = gm
        for part in target.split("."):
            value = getattr(value, part, None)
        if hasattr(value, "data_ptr"):
            out.append((target, value))
    return out
