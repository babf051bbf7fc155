"""fx.GraphModule -> the graph snapshot JSON shape of tuidebug.trace.format.graph (one shape everywhere)."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.fx

from tuidebug.compiler import compat
from tuidebug.trace.format.graph import GRAPH_FORMAT
from tuidebug.trace.format.layout import diff_fingerprints, parse_stack_trace  # noqa: F401 (re-exported)

_MAX_REPR = 200


def target_name(node: torch.fx.Node) -> str:
    t = node.target
    if isinstance(t, str):
        return t
    if compat.is_op_overload(t):
        return str(t)
    hop = compat.higher_order_name(t)
    if hop is not None:
        return f"higher_order.{hop}"
    mod = getattr(t, "__module__", None) or ""
    qual = getattr(t, "__qualname__", None) or getattr(t, "__name__", None)
    if qual:
        if mod in ("_operator", "operator"):
            mod = "operator"
        return f"{mod}.{qual}" if mod else str(qual)
    return repr(t)[:_MAX_REPR]


def _value(a: Any) -> Any:
    if isinstance(a, torch.fx.Node):
        return {"node": a.name}
    if a is None or isinstance(a, (bool, int, str)):
        return a
    if isinstance(a, float):
        return a if math.isfinite(a) else {"repr": repr(a)}
    if isinstance(a, (list, tuple)):
        return [_value(x) for x in a]
    if isinstance(a, dict):
        return {str(k): _value(v) for k, v in a.items()}
    if isinstance(a, (torch.dtype, torch.device, torch.memory_format, torch.layout)):
        return {"repr": str(a)}
    return {"repr": repr(a)[:_MAX_REPR]}


def _dim(s: Any) -> Any:
    return s if isinstance(s, int) else str(s)


def tensor_meta(val: Any) -> dict[str, Any] | None:
    if isinstance(val, torch.Tensor):
        meta: dict[str, Any] = {
            "dtype": str(val.dtype).replace("torch.", ""),
            "shape": [_dim(s) for s in val.shape],
            "device": str(val.device),
        }
        try:
            meta["stride"] = [_dim(s) for s in val.stride()]
        except Exception:  # sparse / nested tensors have no strides
            meta["stride"] = None
        if val.requires_grad:
            meta["requires_grad"] = True
        return meta
    if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return {"dtype": type(val).__name__.lower(), "shape": [], "value": str(val)}
    return None


def _module_path(meta: dict[str, Any]) -> tuple[str, str]:
    stack = meta.get("nn_module_stack") or meta.get("fwd_nn_module_stack")  # backward nodes
    if not stack:
        return "", ""
    try:
        path, typ = list(stack.values())[-1]
    except (TypeError, ValueError):
        return "", ""
    path = compat.module_path(str(path))
    tname = getattr(typ, "__name__", None) or str(typ).rsplit(".", 1)[-1].rstrip("'>")
    return path, tname


def graph_to_json(gm: torch.fx.GraphModule | torch.fx.Graph, *, graph_id: str = "",
                  stage: str = "", cache: dict[str, Any] | None = None) -> dict[str, Any]:
    graph = gm.graph if isinstance(gm, torch.fx.GraphModule) else gm
    cache = {} if cache is None else cache
    nodes = []
    for n in graph.nodes:
        val = n.meta.get("val", n.meta.get("example_value"))
        tensor = tensor_meta(val)
        tensors = None
        if tensor is None and isinstance(val, (list, tuple)):
            tensors = [tensor_meta(v) for v in val]
        module, module_type = _module_path(n.meta)
        nodes.append({
            "name": n.name,
            "op": n.op,
            "target": target_name(n),
            "args": _value(list(n.args)),
            "kwargs": _value(dict(n.kwargs)),
            "inputs": [i.name for i in n.all_input_nodes],
            "users": [u.name for u in n.users],
            "tensor": tensor,
            "tensors": tensors,
            "source": parse_stack_trace(n.meta.get("stack_trace"), cache),
            "module": module,
            "module_type": module_type,
        })
    return {"format": GRAPH_FORMAT, "graph": graph_id, "stage": stage, "nodes": nodes}


def fingerprint(gm: torch.fx.GraphModule | torch.fx.Graph) -> dict[str, tuple[Any, ...]]:
    """A cheap per-node signature, to tell whether a pass changed the graph and which nodes."""
    graph = gm.graph if isinstance(gm, torch.fx.GraphModule) else gm
    return {n.name: (n.op, str(n.target), repr(n.args), repr(n.kwargs)) for n in graph.nodes}
