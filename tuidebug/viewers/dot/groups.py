"""Groups for a graph whose nodes carry no module path (an optimizer step, a plain function):
the independent chains hanging off each input, by the input's shape, then by op kind, as
dotted paths that the module collapse (``collapse.plan_collapse``) reads like module paths."""

from __future__ import annotations

from dataclasses import dataclass

from tuidebug.trace.format.graph import Graph, Node

HUB_DEGREE = 16  # a node with more inputs or users than this joins chains (a foreach op, lr, step)
BIG_PIECE = 64  # a piece of more nodes than this is split by op kind as well (one level deeper)
NOTE = "no module paths: grouped by the input each chain of ops starts from, its shape and op kind"


def is_foreach(n: Node) -> bool:
    """A foreach op (``aten._foreach_mul.Scalar``): one node working on a list of tensors."""
    return "._foreach_" in n.target or n.target.startswith("_foreach_")


@dataclass
class Pieces:
    """A graph's connected pieces once its hubs (the output, foreach ops, nodes of more than
    ``HUB_DEGREE`` inputs or users: a shared ``lr``) are taken out."""

    hubs: set[str]
    lead: dict[str, str]  # node -> the first node of its piece (a placeholder first)
    members: dict[str, list[str]]  # lead -> the piece's nodes, in graph order


def pieces(graph: Graph) -> Pieces:
    names = {n.name for n in graph}
    degree: dict[str, int] = {n.name: 0 for n in graph}
    for n in graph:
        ins = [i for i in n.inputs if i in names]
        degree[n.name] = max(degree[n.name], len(ins), len([u for u in n.users if u in names]))
    hub = {n.name for n in graph
           if n.op == "output" or degree[n.name] > HUB_DEGREE or is_foreach(n)}
    parent = {n: n for n in names}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for n in graph:
        if n.name in hub:
            continue
        for i in n.inputs:
            if i in names and i not in hub:
                a, b = root(i), root(n.name)
                if a != b:
                    parent[b] = a
    first: dict[str, str] = {}  # piece root -> its lead
    for n in sorted(graph, key=lambda n: n.op != "placeholder"):  # stable: graph order kept
        if n.name not in hub:
            first.setdefault(root(n.name), n.name)
    lead = {n.name: first[root(n.name)] for n in graph if n.name not in hub}
    members: dict[str, list[str]] = {}
    for n in graph:
        if n.name not in hub:
            members.setdefault(lead[n.name], []).append(n.name)
    return Pieces(hub, lead, members)


def _part(text: str) -> str:
    """A path level: no dots (they split levels), never all digits (an index joins its parent)."""
    text = text.replace(".", "_") or "_"
    return "_" + text if text.isdigit() else text


def _shape_name(shape: object) -> str:
    if not isinstance(shape, list) or not shape:
        return "scalars"
    return "shape_" + "x".join(str(s) for s in shape)


def derived_groups(graph: Graph, split: Pieces | None = None) -> dict[str, str]:
    """Node -> ``shape.lead.op`` for every node but the hubs, where ``lead`` is the first input
    of the node's piece (a parameter's update chain in an optimizer step: its param, grad and
    moments together), ``shape`` the lead's shape (a parameter group) and ``op`` the node's op
    kind (only in pieces of more than ``BIG_PIECE`` nodes: a short chain is one box).
    Collapsed at the deepest level that fits."""
    split = split or pieces(graph)
    out: dict[str, str] = {}
    for name, lead in split.lead.items():
        first = graph.get(lead)
        shape = _shape_name((first.tensor or {}).get("shape") if first else None)
        out[name] = f"{shape}.{_part(lead)}"
        if len(split.members[lead]) > BIG_PIECE:
            n = graph.get(name)
            out[name] += "." + _part(n.short_target if n else name)
    return out
