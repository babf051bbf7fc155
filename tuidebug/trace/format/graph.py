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

from itertools import chain, repeat
from typing import Any, Iterable, Iterator, NamedTuple

GRAPH_FORMAT = "tuidebug.graph/1"

_VIEW_OPS = {
    "view", "_unsafe_view", "reshape", "permute", "transpose", "t", "expand", "squeeze",
    "unsqueeze", "slice", "select", "as_strided", "alias", "unfold", "split", "split_with_sizes",
    "chunk", "narrow", "diagonal", "view_as", "flatten", "unbind", "reinterpret_tensor",
}


#: the ops of nodes that compute something (not placeholders, outputs or attribute reads)
COMPUTE_OPS = ("call_function", "call_method", "call_module")


class _NodeFields(NamedTuple):
    name: str
    op: str
    target: str
    args: list[Any]
    kwargs: dict[str, Any]
    inputs: list[str]
    users: list[str]
    tensor: dict[str, Any] | None
    tensors: list[dict[str, Any] | None] | None
    source: dict[str, Any] | None
    module: str
    module_type: str


#: a node's fields, in the order the writer writes them (``Node.to_json``)
NODE_FIELDS: tuple[str, ...] = _NodeFields._fields


class Node(_NodeFields):
    """One node of a snapshot: a tuple of its fields (``NODE_FIELDS``), read by name. A tuple,
    not a class with a dict or slots: a 5.6k-node snapshot's nodes are made from their parsed
    objects by C-level calls (``plain_nodes``), where calling a constructor per node took as
    long as checking them."""

    __slots__ = ()

    def __new__(cls, name: str, op: str, target: str, args: list[Any] | None = None,
                kwargs: dict[str, Any] | None = None, inputs: list[str] | None = None,
                users: list[str] | None = None, tensor: dict[str, Any] | None = None,
                tensors: list[dict[str, Any] | None] | None = None,
                source: dict[str, Any] | None = None, module: str = "",
                module_type: str = "") -> "Node":
        return super().__new__(cls, name, op, target, [] if args is None else args,
                               {} if kwargs is None else kwargs, [] if inputs is None else inputs,
                               [] if users is None else users, tensor, tensors, source, module,
                               module_type)

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
        return dict(zip(NODE_FIELDS, self))

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


_NONE = type(None)
_STR, _LIST, _DICT = frozenset((str,)), frozenset((list,)), frozenset((dict,))
_DICT_OR_NONE, _LIST_OR_NONE = frozenset((dict, _NONE)), frozenset((list, _NONE))
#: per field of ``NODE_FIELDS``, the classes a plain node's value has: what the snapshot's
#: shape allows (``shapes.SHAPES["snapshot"]``) and ``Node.from_json`` keeps as it is (no null
#: where it makes a string or an empty list of it)
PLAIN_CLASSES: tuple[frozenset[type], ...] = (
    _STR, _STR, _STR, _LIST, _DICT, _LIST, _LIST, _DICT_OR_NONE, _LIST_OR_NONE, _DICT_OR_NONE,
    _STR, _STR)
_LISTS_OF_NAMES = (NODE_FIELDS.index("inputs"), NODE_FIELDS.index("users"))


def plain_nodes(nodes: Any) -> list[Node] | None:
    """``Node.from_json`` of each item of a snapshot's ``nodes`` list — None unless every item
    is plain: an object with exactly the fields of ``NODE_FIELDS``, in that order (as the
    writer writes them), each of its ``PLAIN_CLASSES`` (exact classes, what ``json`` makes),
    ``inputs`` and ``users`` lists of strings (a subclass of ``str`` passes as ``shapes`` lets it). Such a list is valid for the snapshot's shape
    as it is, so ``shapes.check`` would change and report nothing in it; checked and made by
    C-level calls a field at a time, no Python step per node (a 5.6k-node snapshot: a
    quarter of checking its shape and making its nodes one by one). The nodes hold the
    parsed lists and objects themselves: ``nodes`` is the caller's, read for this alone."""
    if nodes.__class__ is not list:
        return None
    if not nodes:
        return []
    if set(map(type, nodes)) != {dict} or set(map(tuple, nodes)) != {NODE_FIELDS}:
        return None
    built = list(map(tuple.__new__, repeat(Node), map(dict.values, nodes)))
    columns = list(zip(*built))
    try:
        for column, classes in zip(columns, PLAIN_CLASSES):
            if classes is _STR:
                "".join(column)  # a TypeError at anything but a string, quicker than a set
            elif not set(map(type, column)) <= classes:
                return None
        "".join(chain.from_iterable(chain.from_iterable(columns[i] for i in _LISTS_OF_NAMES)))
    except TypeError:
        return None
    return built  # type: ignore[return-value]


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
