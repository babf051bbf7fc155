"""The one graph model every part of tuidebug reads: a captured FX graph snapshot.

A snapshot file holds ``{"format": "tuidebug.graph/1", "graph": ID, "stage": NAME, "nodes": [...]}``
where each node is::

    {"name": "addmm", "op": "call_function", "target": "aten.addmm.default",
     "args": [{"node": "primals_2"}, 1.0], "kwargs": {}, "inputs": ["primals_2"],
     "users": ["relu"], "tensor": {"dtype": "float32", "shape": [3, 16], "stride": [16, 1],
     "device": "cpu"}, "tensors": null, "source": {"file": "model.py", "line": 12,
     "fn": "forward", "code": "x = self.fc(x)"}, "module": "blocks.0.fc",
     "module_type": "Linear"}

Node references inside ``args``/``kwargs`` are ``{"node": NAME}``; a value that is not JSON is
``{"repr": TEXT}``. ``tensors`` lists the metas of a node whose value is a tuple of tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

GRAPH_FORMAT = "tuidebug.graph/1"

_VIEW_OPS = {
    "view", "_unsafe_view", "reshape", "permute", "transpose", "t", "expand", "squeeze",
    "unsqueeze", "slice", "select", "as_strided", "alias", "unfold", "split", "split_with_sizes",
    "chunk", "narrow", "diagonal", "view_as", "flatten", "unbind", "reinterpret_tensor",
}


#: the ops of nodes that compute something (not placeholders, outputs or attribute reads)
COMPUTE_OPS = ("call_function", "call_method", "call_module")


@dataclass
class Node:
    name: str
    op: str
    target: str
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)
    users: list[str] = field(default_factory=list)
    tensor: dict[str, Any] | None = None
    tensors: list[dict[str, Any] | None] | None = None
    source: dict[str, Any] | None = None
    module: str = ""
    module_type: str = ""

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Node":
        return cls(
            name=str(d.get("name", "?")),
            op=str(d.get("op", "?")),
            target=str(d.get("target", "")),
            args=list(d.get("args") or []),
            kwargs=dict(d.get("kwargs") or {}),
            inputs=[str(x) for x in d.get("inputs") or []],
            users=[str(x) for x in d.get("users") or []],
            tensor=d.get("tensor"),
            tensors=d.get("tensors"),
            source=d.get("source"),
            module=str(d.get("module") or ""),
            module_type=str(d.get("module_type") or ""),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "op": self.op, "target": self.target, "args": self.args,
            "kwargs": self.kwargs, "inputs": self.inputs, "users": self.users,
            "tensor": self.tensor, "tensors": self.tensors, "source": self.source,
            "module": self.module, "module_type": self.module_type,
        }

    @property
    def short_target(self) -> str:
        """``aten.addmm.default`` -> ``addmm``; placeholders and outputs keep their op."""
        if self.op in ("placeholder", "output", "get_attr"):
            return self.op
        t = self.target
        if t.startswith("aten.") or t.startswith("prims.") or t.startswith("inductor."):
            parts = t.split(".")
            return parts[1] if len(parts) > 1 else t
        return t.rsplit(".", 1)[-1] if "." in t and "<" not in t else t

    @property
    def is_view(self) -> bool:
        return self.op == "call_function" and self.short_target in _VIEW_OPS

    @property
    def is_inplace(self) -> bool:
        base = self.short_target
        return self.op in ("call_function", "call_method") and (
            (base.endswith("_") and not base.endswith("__")) or "copy_" in base  # _foreach_add_, not __iadd__
        )

    def meta_label(self) -> str:
        """``f32[3, 16]`` style summary of the value's dtype and shape."""
        metas = [self.tensor] if self.tensor else [m for m in (self.tensors or []) if m]
        return ", ".join(tensor_label(m) for m in metas)

    def signature(self) -> tuple[Any, ...]:
        """What a pass can change about a node, for diffs."""
        return (self.op, self.target, _freeze(self.args), _freeze(self.kwargs), _freeze(self.tensor))


_DTYPE_SHORT = {
    "float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int64": "i64",
    "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "b8",
    "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2", "complex64": "c64",
}


def tensor_label(meta: dict[str, Any]) -> str:
    dt = str(meta.get("dtype", "?"))
    shape = meta.get("shape")
    shape_s = ", ".join(str(s) for s in shape) if isinstance(shape, list) else str(shape)
    return f"{_DTYPE_SHORT.get(dt, dt)}[{shape_s}]"


def _freeze(x: Any) -> Any:
    if isinstance(x, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in x.items()))
    if isinstance(x, list):
        return tuple(_freeze(v) for v in x)
    return x


class Graph:
    """An FX graph snapshot, in node order."""

    def __init__(self, nodes: Iterable[Node], graph_id: str = "", stage: str = "") -> None:
        self.nodes: list[Node] = list(nodes)
        self.graph_id = graph_id
        self.stage = stage
        self._by_name: dict[str, Node] | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Graph":
        nodes = data.get("nodes")
        if not isinstance(nodes, list):
            raise ValueError("graph snapshot has no 'nodes' list")
        return cls((Node.from_json(n) for n in nodes), str(data.get("graph", "")),
                   str(data.get("stage", "")))

    def to_json(self) -> dict[str, Any]:
        return {"format": GRAPH_FORMAT, "graph": self.graph_id, "stage": self.stage,
                "nodes": [n.to_json() for n in self.nodes]}

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __contains__(self, name: object) -> bool:
        return name in self.by_name

    @property
    def by_name(self) -> dict[str, Node]:
        if self._by_name is None:
            self._by_name = {n.name: n for n in self.nodes}
        return self._by_name

    def get(self, name: str) -> Node | None:
        return self.by_name.get(name)

    def edges(self) -> Iterator[tuple[str, str]]:
        """(producer, consumer) pairs."""
        for n in self.nodes:
            for i in n.inputs:
                if i in self.by_name:
                    yield i, n.name

    def compute_nodes(self) -> list[Node]:
        """Nodes that compute something (not placeholders, outputs or attribute reads)."""
        return [n for n in self.nodes if n.op in COMPUTE_OPS]

    def source_files(self) -> set[str]:
        return {n.source["file"] for n in self.nodes if n.source and n.source.get("file")}


def format_arg(a: Any) -> str:
    """Render one argument of a node as text."""
    if isinstance(a, dict):
        if "node" in a and len(a) == 1:
            return str(a["node"])
        if "repr" in a and len(a) == 1:
            return str(a["repr"])
        return "{" + ", ".join(f"{k}: {format_arg(v)}" for k, v in a.items()) + "}"
    if isinstance(a, list):
        return "[" + ", ".join(format_arg(v) for v in a) + "]"
    return repr(a)


def node_line(n: Node) -> str:
    """One line of FX-like text for a node: ``addmm: f32[3, 16] = addmm(b, x, w)``."""
    meta = n.meta_label()
    lhs = f"{n.name}: {meta}" if meta else n.name
    if n.op == "placeholder":
        return f"{lhs} = placeholder"
    if n.op == "output":
        return f"return {', '.join(format_arg(a) for a in n.args)}"
    args = [format_arg(a) for a in n.args] + [f"{k}={format_arg(v)}" for k, v in n.kwargs.items()]
    return f"{lhs} = {n.target}({', '.join(args)})"
