"""Graph reduction: a captured FX graph snapshot + what to keep -> a small standalone program.

The minifier never executes anything from the trace. It reads the ATen-level graph Inductor
received (the ``aot_inference`` / ``aot_forward`` / ``aot_backward`` snapshot, plain JSON) and
builds :class:`Program` objects from subsets of its compute nodes: a kept node whose producer was
removed reads that value from a new input with the producer's recorded dtype, shape, stride and
device; kept nodes that nothing kept uses become outputs.

A :class:`Spec` names one candidate; it is hashable, so the minifier can cache results by it.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field, replace
from typing import Any, Iterable

from tuidebug.trace.format.graph import Graph, Node

GETITEM = "operator.getitem"
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Unsupported(Exception):
    """The graph (or a node of it) cannot be turned into a standalone program."""


@dataclass(frozen=True)
class Input:
    """A tensor the program takes as an argument, built by the repro: seeded random values, or
    all zeros / all ones (``fill``)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    device: str
    fill: str = "random"


@dataclass(frozen=True)
class Op:
    """One ATen call of the program; args use ``{"node": NAME}`` references like the snapshot."""

    name: str
    target: str
    args: Any
    kwargs: Any
    source: str = ""


@dataclass
class Program:
    """A straight-line function: inputs -> ops -> outputs, plus the Inductor config it needs."""

    inputs: list[Input]
    ops: list[Op]
    outputs: list[str]
    flags: dict[str, Any] = field(default_factory=dict)

    @property
    def size(self) -> int:
        """Compute nodes (every ATen call and tuple index), the number the minifier reduces."""
        return len(self.ops)


@dataclass(frozen=True)
class Spec:
    """One candidate: the compute nodes kept plus the simplifications applied.

    ``keep``: names of kept units (compute nodes; a tuple-valued node's ``getitem`` users follow
    it automatically). ``flags``: names of the config flags kept. ``contiguous``: inputs whose
    stride is replaced by a contiguous one. ``merged``: inputs replaced by an earlier input with
    the same meta. ``shrunk``: dimension sizes replaced by 1 in every input that has them (one
    size at a time for all inputs, so inputs that must agree on a size still do). ``fill``:
    ``(input, "zeros" | "ones")`` inputs built with that value instead of random ones.
    ``constants``: ``(node, arg)`` scalar arguments replaced by ``1.0`` (float) or ``1`` (int).
    """

    keep: frozenset[str]
    flags: frozenset[str]
    contiguous: frozenset[str] = frozenset()
    merged: frozenset[str] = frozenset()
    constants: frozenset[tuple[str, str]] = frozenset()
    shrunk: frozenset[int] = frozenset()
    fill: frozenset[tuple[str, str]] = frozenset()

    def with_(self, **kw: Any) -> "Spec":
        return replace(self, **{k: frozenset(v) for k, v in kw.items()})


def _meta_ok(meta: dict[str, Any] | None) -> bool:
    if not meta or not isinstance(meta.get("shape"), list):
        return False
    stride = meta.get("stride")
    return (all(isinstance(s, int) for s in meta["shape"])
            and isinstance(stride, list) and len(stride) == len(meta["shape"])
            and all(isinstance(s, int) for s in stride)
            and isinstance(meta.get("dtype"), str) and _IDENT.match(meta["dtype"]) is not None)


def contiguous_stride(shape: Iterable[int]) -> tuple[int, ...]:
    out: list[int] = []
    acc = 1
    for n in reversed(list(shape)):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


def dense_stride_like(shape: tuple[int, ...], stride: tuple[int, ...]) -> tuple[int, ...]:
    """Dense strides for ``shape`` with the dimension order of ``stride`` (outermost = largest
    stride): a contiguous input stays contiguous, a transposed one stays transposed."""
    order = sorted(range(len(shape)), key=lambda d: (-stride[d], d))
    out = [0] * len(shape)
    acc = 1
    for d in reversed(order):
        out[d] = acc
        acc *= max(shape[d], 1)
    return tuple(out)


def _refs(value: Any) -> Iterable[str]:
    if isinstance(value, dict):
        if "node" in value and len(value) == 1:
            yield str(value["node"])
        else:
            for v in value.values():
                yield from _refs(v)
    elif isinstance(value, list):
        for v in value:
            yield from _refs(v)


class Reducer:
    """Builds candidate programs from one captured graph."""

    def __init__(self, graph: Graph, flags: dict[str, Any],
                 exclude: Iterable[str] = ()) -> None:
        self.graph = graph
        self.flags = dict(flags)
        self.excluded = set(exclude)
        self.nodes: list[Node] = [n for n in graph.nodes if n.op in ("placeholder", "get_attr",
                                                                    "call_function")]
        self.by_name = {n.name: n for n in self.nodes}
        symbolic = [n.name for n in self.nodes if n.op == "placeholder" and not _meta_ok(n.tensor)]
        if symbolic:
            raise Unsupported(
                f"graph inputs without static tensor shapes ({', '.join(symbolic[:5])}): dynamic "
                "shapes and non-tensor inputs are not supported by the minifier yet")
        compute = [n for n in self.nodes if n.op == "call_function"]
        #: the units delta debugging works on: compute nodes, except tuple indexing
        self.units: list[str] = [n.name for n in compute
                                 if n.target != GETITEM and n.name not in self.excluded]
        self.order = {n.name: i for i, n in enumerate(self.nodes)}
        self._getitems: dict[str, list[str]] = {}
        for n in compute:
            if n.target == GETITEM and n.inputs:
                self._getitems.setdefault(n.inputs[0], []).append(n.name)
        # graph outputs: kept even when something kept uses them
        out = next((n for n in graph.nodes if n.op == "output"), None)
        self.graph_outputs = set(_refs(out.args)) if out else set()

    @property
    def compute_count(self) -> int:
        return sum(1 for n in self.nodes if n.op == "call_function")

    def full_spec(self) -> Spec:
        return Spec(frozenset(self.units), frozenset(self.flags))

    def sort(self, names: Iterable[str]) -> list[str]:
        return sorted(names, key=lambda n: self.order.get(n, 1 << 30))

    def build(self, spec: Spec) -> Program | None:
        """The program for ``spec``, or None when nothing is left to compute."""
        keep = set(spec.keep) - self.excluded
        for k in list(keep):
            keep.update(self._getitems.get(k, ()))
        inputs: dict[str, Input] = {}
        ops: list[Op] = []
        kept: set[str] = set()
        used: set[str] = set()
        for n in self.nodes:
            if n.name not in keep or n.op != "call_function":
                continue
            if n.target == GETITEM and (not n.inputs or n.inputs[0] not in kept):
                continue
            ok = True
            for r in dict.fromkeys(_refs([n.args, n.kwargs])):
                if r in kept:
                    continue
                src = self.by_name.get(r)
                if src is None or not _meta_ok(src.tensor):
                    ok = False  # a tuple-valued or non-tensor producer was removed
                    break
                if r not in inputs:
                    inputs[r] = self._input(src, spec)
            if not ok:
                continue
            args, kwargs = n.args, n.kwargs
            if spec.constants:
                args, kwargs = _simplify_constants(n.name, args, kwargs, spec.constants)
            ops.append(Op(n.name, n.target, args, kwargs, _source(n)))
            kept.add(n.name)
            used.update(_refs([n.args, n.kwargs]))
        outputs = [o.name for o in ops
                   if _meta_ok(self.by_name[o.name].tensor)
                   and (o.name not in used or o.name in self.graph_outputs)]
        if not outputs:
            return None
        # liveness from the outputs: what nothing needs (e.g. a tuple-valued node whose getitems
        # were all removed) is dead code that Dynamo would drop anyway
        live = set(outputs)
        for o in reversed(ops):
            if o.name in live:
                live.update(_refs([o.args, o.kwargs]))
        ops = [o for o in ops if o.name in live]
        inputs = {k: v for k, v in inputs.items() if k in live}
        merged = _merge_inputs(list(inputs.values()), spec.merged)
        rename = {name: target for name, target in merged.items() if name != target}
        final_inputs = [i for i in inputs.values() if i.name not in rename]
        if rename:
            ops = [replace(o, args=_rename(o.args, rename), kwargs=_rename(o.kwargs, rename))
                   for o in ops]
        flags = {k: v for k, v in self.flags.items() if k in spec.flags}
        return Program(final_inputs, ops, outputs, flags)

    def _input(self, node: Node, spec: Spec) -> Input:
        meta = node.tensor or {}
        shape = tuple(int(s) for s in meta["shape"])
        stride = tuple(int(s) for s in meta["stride"])
        if node.name in spec.contiguous:
            stride = contiguous_stride(shape)
        if spec.shrunk and any(n in spec.shrunk for n in shape):
            shape = tuple(1 if n in spec.shrunk else n for n in shape)
            stride = dense_stride_like(shape, stride)  # the dimension order of the old stride
        fill = next((f for name, f in spec.fill if name == node.name), "random")
        return Input(node.name, str(meta["dtype"]), shape, stride,
                     str(meta.get("device", "cpu")), fill)

    # -- what simplifications apply to a program ---------------------------------------------------
    def noncontiguous_inputs(self, spec: Spec) -> list[str]:
        prog = self.build(spec)
        if prog is None:
            return []
        return [i.name for i in prog.inputs
                if i.name not in spec.contiguous and i.stride != contiguous_stride(i.shape)]

    def mergeable_inputs(self, spec: Spec) -> list[str]:
        """Inputs that have the same meta as an earlier input (could share its tensor)."""
        prog = self.build(spec)
        if prog is None:
            return []
        seen: set[tuple[Any, ...]] = set()
        out = []
        for i in prog.inputs:
            key = (i.dtype, i.shape, i.stride, i.device, i.fill)
            if key in seen:
                out.append(i.name)
            seen.add(key)
        return out

    def shrinkable_sizes(self, spec: Spec) -> list[int]:
        """Dimension sizes (above 1) of the program's inputs, largest first."""
        prog = self.build(spec)
        if prog is None:
            return []
        sizes = {n for i in prog.inputs for n in i.shape if n > 1}
        return sorted(sizes - set(spec.shrunk), reverse=True)

    def random_inputs(self, spec: Spec) -> list[str]:
        """Inputs still built from random values (could be all zeros or all ones)."""
        prog = self.build(spec)
        return [i.name for i in prog.inputs if i.fill == "random"] if prog else []

    def simplifiable_constants(self, spec: Spec) -> list[tuple[str, str]]:
        """Scalar arguments other than 0, 1 and -1, float or int (not bool), as
        ``(node, "args.N" | "kwargs.K")``."""
        prog = self.build(spec)
        if prog is None:
            return []
        out = []
        for o in prog.ops:
            for i, a in enumerate(o.args if isinstance(o.args, list) else []):
                if _simplifiable(a):
                    out.append((o.name, f"args.{i}"))
            for k, a in (o.kwargs.items() if isinstance(o.kwargs, dict) else ()):
                if _simplifiable(a):
                    out.append((o.name, f"kwargs.{k}"))
        return [c for c in out if c not in spec.constants]


def _simplifiable(a: Any) -> bool:
    return isinstance(a, (float, int)) and not isinstance(a, bool) and a not in (0, 1, -1)


def _simple(a: Any) -> Any:
    """What a simplifiable scalar is replaced by: 1.0 for a float, 1 for an int."""
    return 1.0 if isinstance(a, float) else 1


def _simplify_constants(name: str, args: Any, kwargs: Any,
                        constants: frozenset[tuple[str, str]]) -> tuple[Any, Any]:
    mine = {where for node, where in constants if node == name}
    if not mine:
        return args, kwargs
    args = [_simple(a) if f"args.{i}" in mine and _simplifiable(a) else a
            for i, a in enumerate(args)]
    kwargs = {k: _simple(a) if f"kwargs.{k}" in mine and _simplifiable(a) else a
              for k, a in kwargs.items()}
    return args, kwargs


def _merge_inputs(inputs: list[Input], merged: frozenset[str]) -> dict[str, str]:
    """Map each merged input to the first earlier input with the same meta."""
    first: dict[tuple[Any, ...], str] = {}
    out: dict[str, str] = {}
    for i in inputs:
        key = (i.dtype, i.shape, i.stride, i.device, i.fill)
        if i.name in merged and key in first:
            out[i.name] = first[key]
        else:
            first.setdefault(key, i.name)
    return out


def _rename(value: Any, rename: dict[str, str]) -> Any:
    if isinstance(value, dict):
        if "node" in value and len(value) == 1:
            return {"node": rename.get(str(value["node"]), value["node"])}
        return {k: _rename(v, rename) for k, v in value.items()}
    if isinstance(value, list):
        return [_rename(v, rename) for v in value]
    return value


def _source(n: Node) -> str:
    src = n.source or {}
    if not src.get("file"):
        return ""
    file = str(src["file"]).rsplit("/", 1)[-1]
    code = str(src.get("code") or "")
    return f"{file}:{src.get('line', '?')}  {code}".strip()


def is_identifier(name: str) -> bool:
    return bool(_IDENT.match(name)) and not keyword.iskeyword(name)
