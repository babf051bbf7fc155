"""What the numerics check needs of Dynamo's and Inductor's objects, as plain data: the
source each input of a Dynamo graph was read from (a parameter's path in the model, an
argument's name)."""

from __future__ import annotations

from typing import Any


def graph_input_sources(gm: Any) -> list[str | None]:
    """Per placeholder of a Dynamo graph, in order, the source Dynamo read it from
    (``L['self']._modules['fc1']._parameters['weight']``, ``L['x']``), or None where Dynamo
    recorded none (a graph not made by Dynamo, a torch that keeps it elsewhere)."""
    out: list[str | None] = []
    for node in getattr(getattr(gm, "graph", None), "nodes", ()):
        if node.op != "placeholder":
            continue
        source = getattr(node.meta.get("grapharg"), "source", None)
        try:
            out.append(str(source.name) if source is not None else None)
        except Exception:  # a source whose name needs more than this graph
            out.append(None)
    return out
