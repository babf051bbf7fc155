"""The float64 reference run: a graph run eagerly on its inputs upcast to float64, kept wide.

Run as it is, a graph that casts inside (transformers' loss: ``logits.float()`` before
``cross_entropy``; ``softmax(x, dtype=torch.float32)``; a constant made ``dtype=torch.float32``)
computes that part of its "float64" run in float32: the loss came back float32, and the
gradient of the logits float64 in dtype but computed in float32 — compiled and eager agreed
with it to the last bit, and the check showed an exact 0 against a reference that was no
float64 one. Here, as in the kernel-level reference (``compat.numerics.NodeValues``), every
cast of a floating-point tensor to a narrower float, and every ``dtype=`` naming one, is kept
in float64 (complex128), and said (``Wide.kept``: where the model casts). What still computes
in a narrower float (a tensor made in the default dtype, a parameter the graph holds as an
attribute) is found per FX node (``Wide.narrow``): each output that depends on it, and each
input whose gradient flows through it, is told apart (``output_notes``, ``input_notes``) and
judged without a float64 reference, the line named.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

from tuidebug.trace.format.layout import parse_stack_trace
from tuidebug.trace.queries.graph_breaks import SourceLine

_CASTS = frozenset({"float", "half", "bfloat16"})  # methods casting to a fixed narrower float
_BITCASTS = frozenset({"view", "view_as_real", "view_as_complex"})  # reinterpret bits: kept
_MAX_CODE = 80


def _wide(dtype: Any) -> Any:
    """float64/complex128 for a narrower floating (complex) dtype, else None."""
    if not isinstance(dtype, torch.dtype) or dtype in (torch.float64, torch.complex128):
        return None
    if dtype.is_complex:
        return torch.complex128
    return torch.float64 if dtype.is_floating_point else None


def _floats(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x] if x.is_floating_point() or x.is_complex() else []
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _floats(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _floats(v)]
    return []


def _tensors(x: list[Any]) -> bool:
    return any(isinstance(v, torch.Tensor) or isinstance(v, (list, tuple)) and _tensors(list(v))
               for v in x)


def where(node: Any, cache: dict[str, Any]) -> str:
    """``loss_utils.py:56 (logits = logits.float())``: the user's line of an FX node (its
    stack trace), else the node's name."""
    meta = getattr(node, "meta", None) or {}
    src = parse_stack_trace(meta.get("stack_trace"), cache)
    if not src:
        return f"FX node {getattr(node, 'name', '?')}"
    code = " ".join(src["code"].split())
    code = code if len(code) <= _MAX_CODE else code[:_MAX_CODE - 1] + "…"
    at = SourceLine(src["file"], src["line"], src["fn"], code).where
    return f"{at} ({code})" if code else at


@dataclass
class Wide:
    """What the float64 run met: ``kept``, each cast to a narrower float it kept in float64
    (where, in the order met); ``narrow``: the FX nodes that still computed in a narrower
    float (node name → where)."""

    kept: list[str] = field(default_factory=list)
    narrow: dict[str, str] = field(default_factory=dict)

    def label(self) -> str:
        """``float64``, with the casts kept wide named: the reference's honest name."""
        if not self.kept:
            return "float64"
        n = len(self.kept)
        return (f"float64, the model's cast{'s' if n > 1 else ''} to a narrower float kept in "
                f"float64: {self.kept[0]}" + (f" and {n - 1} more" if n > 1 else ""))


def _in_place(name: str) -> bool:
    """``add_``, ``__iadd__``, ``__setitem__``: an op that writes into its first argument."""
    if name.startswith("__"):
        return name.startswith("__i") and name not in ("__init__", "__index__", "__int__",
                                                        "__invert__") or name == "__setitem__"
    return name.endswith("_")


def _up(x: Any) -> Any:
    """A tensor in a narrower float read in float64 (complex128); lists and tuples of them."""
    if isinstance(x, torch.Tensor):
        return x.to(_wide(x.dtype)) if _wide(x.dtype) is not None else x
    if isinstance(x, (list, tuple)) and any(isinstance(v, (torch.Tensor, list, tuple))
                                            for v in x):
        return type(x)(_up(v) for v in x)
    return x


class _KeptWide(TorchFunctionMode):
    def __init__(self, wide: Wide) -> None:
        super().__init__()
        self.wide, self.node, self._cache = wide, None, {}

    def _met(self, narrowing: bool) -> None:
        at = where(self.node, self._cache) if self.node is not None else "the graph"
        if narrowing:
            if at not in self.wide.kept:
                self.wide.kept.append(at)
        elif self.node is not None:
            self.wide.narrow.setdefault(self.node.name, at)

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None
                           ) -> Any:
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", "")
        src = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if name in _CASTS and src is not None and not src.is_complex():
            if src.is_floating_point():  # a float made narrower: the model's cast, said
                self._met(True)
            return src.to(torch.float64, copy=True)  # an integer one: its values, in float64
        # as they are: an op that writes in place (into a tensor of its dtype), a bitcast,
        # a property (``.T``, ``.dtype``), autocast (it leaves float64 tensors alone anyway)
        keep = name in _BITCASTS or _in_place(name) or name == "__get__" or "autocast" in name
        changed = False
        if not keep:
            args, changed = _widened(name, list(args))
            for k, v in list(kwargs.items()):
                if _wide(v) is not None:
                    kwargs[k], changed = _wide(v), True
            if changed and _floats(list(args) + list(kwargs.values())) and \
                    not (name.startswith("new_") or name.endswith("_like")):  # no values cast
                self._met(True)
            # a float32 tensor the graph holds (a buffer, a constant) is read in float64
            args, kwargs = _up(args), {k: _up(v) for k, v in kwargs.items()}
        out = func(*args, **kwargs)
        if not keep and not changed and isinstance(out, torch.Tensor) and \
                "dtype" not in kwargs and out.dtype == torch.get_default_dtype() and \
                _wide(out.dtype) and not _tensors(list(args) + list(kwargs.values())):
            try:  # a factory in the default dtype (torch.ones(4), torch.tensor(0.5)): float64
                return func(*args, **kwargs, dtype=_wide(out.dtype))
            except (TypeError, RuntimeError):  # takes no dtype: as it is
                pass
        if name != "__get__" and not changed and any(_wide(t.dtype) for t in _floats(out)) \
                and _floats(list(args) + list(kwargs.values())):
            self._met(False)  # computed in a narrower float after all: located
        return out


def _widened(name: str, args: list[Any]) -> tuple[tuple[Any, ...], bool]:
    """``args`` with each narrower float dtype made float64; ``x.to(other)`` and
    ``x.type_as(other)`` of a narrower ``other`` to its device in float64."""
    changed = False
    for i, a in enumerate(args):
        if _wide(a) is not None:
            args[i], changed = _wide(a), True
        elif i == 1 and name in ("to", "type_as") and isinstance(a, torch.Tensor) and \
                _wide(a.dtype) is not None and _floats(args[:1]):
            if name == "type_as":
                return (args[0], torch.empty((), dtype=_wide(a.dtype), device=a.device)), True
            return (args[0], a.device, _wide(a.dtype), *args[2:]), True
    return tuple(args), changed


class _Run(torch.fx.Interpreter):
    def __init__(self, gm: Any, mode: _KeptWide) -> None:
        super().__init__(gm)
        self.mode = mode

    def run_node(self, n: Any) -> Any:
        self.mode.node = n
        return super().run_node(n)


def run(gm: Callable[..., Any], args: list[Any]) -> tuple[Any, Wide]:
    """``gm(*args)`` (``args`` already upcast), casts kept wide, node by node for an FX graph
    (so what it met is located); what it met."""
    wide = Wide()
    mode = _KeptWide(wide)
    with mode:
        if isinstance(gm, torch.fx.GraphModule):
            return _Run(gm, mode).run(*args), wide
        return gm(*args), wide


def _upstream(graph: Any, wide: Wide) -> dict[Any, str]:
    """Per FX node: where the first node it depends on (itself included) computed in a
    narrower float in the float64 run ("": none)."""
    up: dict[Any, str] = {}
    for n in graph.nodes:
        up[n] = wide.narrow.get(n.name) or next(
            (up[a] for a in n.all_input_nodes if up.get(a)), "")
    return up


def output_notes(gm: Any, wide: Wide) -> list[str]:
    """Per output of ``gm`` (flattened as ``judge.flatten_outputs``): why the float64 run gives
    no float64 reference for it (it depends on a node computed in a narrower float), or ""."""
    graph = getattr(gm, "graph", None)
    if graph is None or not wide.narrow:
        return []
    up = _upstream(graph, wide)
    returned = next((n.args[0] for n in graph.nodes if n.op == "output" and n.args), None)

    def flat(x: Any) -> list[Any]:
        return [y for v in x for y in flat(v)] if isinstance(x, (list, tuple)) else [x]
    return [f"the float64 run computed it in a narrower float at {up[x]}"
            if isinstance(x, torch.fx.Node) and up.get(x) else "" for x in flat(returned)]


def input_notes(gm: Any, wide: Wide) -> list[str]:
    """Per input (placeholder) of ``gm``: why its gradient from the float64 run is no float64
    one: the backward goes through a node whose value depends on one computed in a narrower
    float (every value on the way back from the outputs to the input is used), or ""."""
    graph = getattr(gm, "graph", None)
    if graph is None or not wide.narrow:
        return []
    up = _upstream(graph, wide)
    down: dict[Any, str] = {}
    nodes = list(graph.nodes)
    for n in reversed(nodes):
        down[n] = next((down[u] or up[u] for u in n.users
                        if u.op != "output" and (down[u] or up[u])), "")
    return [f"its backward in the float64 run used values computed in a narrower float at "
            f"{down[n]}" if down[n] else "" for n in nodes if n.op == "placeholder"]
