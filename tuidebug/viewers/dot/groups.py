"""Groups for a graph whose nodes carry no module path (an optimizer step, a plain function):
the independent chains hanging off each input, by the input's shape, then by op kind, as
dotted paths that the module collapse (``collapse.plan_collapse``) reads like module paths."""

from __future__ import annotations

from tuidebug.trace.format.graph import Graph

HUB_DEGREE = 16  # a node with more inputs or users than this joins chains (a foreach op, lr, step)
BIG_PIECE = 64  # a piece of more nodes than this is split by op kind as well (one level deeper)
NOTE = "no module paths: grouped by the input each chain of ops starts from, its shape and op kind"


def _part(text: str) -> str:
    """A path level: no dots (they split levels), never all digits (an index joins its parent)."""
    text = text.replace(".", "_") or "_"
    return "_" + text if text.isdigit() else text


def _shape_name(shape: object) -> str:
    if not isinstance(shape, list) or not shape:
        return "scalars"
    return "shape_" + "x".join(str(s) for s in shape)


def derived_groups(graph: Graph) -> dict[str, str]:
    """Node -> ``shape.lead.op`` for every node but the output and the hubs, where ``lead`` is
    the first input of the node's connected piece once hubs are taken out (a parameter's
    update chain in an optimizer step: its param, grad and moments together), ``shape`` the
    lead's shape (a parameter group) and ``op`` the node's op kind (only in pieces of more than
    ``BIG_PIECE`` nodes: a short chain is one box). Collapsed at the deepest level that fits."""
    names = {n.name for n in graph}
    degree: dict[str, int] = {n.name: 0 for n in graph}
    for n in graph:
        ins = [i for i in n.inputs if i in names]
        degree[n.name] = max(degree[n.name], len(ins), len([u for u in n.users if u in names]))
    hub = {n.name for n in graph if n.op == "output" or degree[n.name] > HUB_DEGREE}
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
    lead: dict[str, str] = {}  # piece root -> the first node (placeholder first) of the piece
    for n in sorted(graph, key=lambda n: n.op != "placeholder"):  # stable: graph order kept
        if n.name not in hub:
            lead.setdefault(root(n.name), n.name)
    size: dict[str, int] = {}
    for n in graph:
        if n.name not in hub:
            size[root(n.name)] = size.get(root(n.name), 0) + 1
    out: dict[str, str] = {}
    for n in graph:
        if n.name in hub:
            continue
        first = graph.get(lead[root(n.name)])
        shape = _shape_name((first.tensor or {}).get("shape") if first else None)
        out[n.name] = f"{shape}.{_part(first.name if first else n.name)}"
        if size[root(n.name)] > BIG_PIECE:
            out[n.name] += "." + _part(n.short_target)
    return out
