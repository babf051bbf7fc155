"""A snapshot whose nodes are all plain (``graph.plain_nodes``) is read without checking each
node's shape and without building each node field by field: the graph, the changes and the
problems reported are exactly those of the careful reading (``shapes.check`` then
``Graph.from_json``), for the committed traces' snapshots and for damaged ones."""

from __future__ import annotations

import copy
import itertools
import random
from pathlib import Path

from tuidebug.trace.format import graph, layout, schema, shapes
from tuidebug.trace.format.graph import NODE_FIELDS, PLAIN_CLASSES, Graph, Node, plain_nodes
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.writer import TraceWriter

NODE = {"name": "relu", "op": "call_function", "target": "aten.relu.default",
        "args": [{"node": "x"}], "kwargs": {}, "inputs": ["x"], "users": ["output"],
        "tensor": {"dtype": "float32", "shape": [3], "stride": [1], "device": "cpu"},
        "tensors": None, "source": {"file": "m.py", "line": 3}, "module": "fc",
        "module_type": "Linear"}


def _careful(data: object, messages: list[str]) -> Graph | None:
    """What the reader did before: the whole file checked, then each node built."""
    checked = shapes.check("snapshot", copy.deepcopy(data), messages.append)
    if not isinstance(checked, dict):
        return None
    try:
        return Graph.from_json(checked)
    except (ValueError, TypeError, AttributeError):
        return None


def test_plain_classes_are_what_the_shape_allows() -> None:
    """Every plain node is valid for the snapshot's shape as it is (``check`` returns it,
    reporting nothing) and ``from_json`` makes the same node of it: each combination of the
    classes ``PLAIN_CLASSES`` allows."""
    samples = {str: "s", list: ["a"], dict: {"k": 1}, type(None): None}
    tried = 0
    for classes in itertools.product(*(sorted(c, key=str) for c in PLAIN_CLASSES)):
        node = {f: samples[c] for f, c in zip(NODE_FIELDS, classes)}
        messages: list[str] = []
        data = {"nodes": [node]}
        assert shapes.check("snapshot", data, messages.append) is data and not messages
        made = plain_nodes([node])
        assert made is not None and made == [Node.from_json(node)], node
        tried += 1
    assert tried == 8  # tensor, tensors and source: each null or not


def test_the_writers_snapshots_are_plain_and_read_as_before(transformer_trace: Path) -> None:
    read = 0
    for g in Trace(transformer_trace).graphs:
        for s in g.snapshots():
            if layout.is_fx_text(s.file):
                continue
            data = g.trace._files.json(g.dir / s.file)  # parsed, not checked
            nodes = plain_nodes(copy.deepcopy(data["nodes"]))
            assert nodes is not None, path  # the fast path is the one taken
            careful = _careful(data, [])
            assert careful is not None
            assert nodes == careful.nodes
            assert [n.to_json() for n in nodes] == data["nodes"]  # in the file's order
            read += 1
    assert read >= 5


def _write(root: Path, nodes: list[object]) -> Trace:
    """A trace of one graph with one snapshot of ``nodes``, as capture writes it."""
    w = TraceWriter(root, command=["test"])
    w.add_graph("g", kind="inference", compile_id="0/0")
    g = w.graph("g")
    fname = g.write_stage(0, "dynamo", {"graph": "g", "stage": "dynamo", "nodes": nodes})
    g.write_meta(kind="inference", compile_id="0/0", status="ok", phase_starts={}, kernels=0,
                 fusion={}, stages=[{"index": 0, "name": "dynamo", "kind": "stage",
                                     "file": fname, "nodes": len(nodes)}])
    w.add_compile("0/0", {"graphs": ["g"]})
    w.finish(schema.STATUS_OK)
    return Trace(root)


def test_damaged_nodes_read_as_the_careful_reading(tmp_path: Path) -> None:
    """A node of the wrong shape anywhere (a field of another class, missing, added, moved,
    null, a non-string among a node's users, a node that is no object): the graph and the
    problems are those of the careful reading, and ``plain_nodes`` says it is not plain."""
    good = [dict(NODE, name=f"n{i}") for i in range(40)]
    rnd = random.Random(30)
    damages = [
        lambda n: n.__setitem__("op", 3),
        lambda n: n.__setitem__("op", None),
        lambda n: n.__setitem__("target", None),
        lambda n: n.__setitem__("args", None),
        lambda n: n.__setitem__("kwargs", []),
        lambda n: n.__setitem__("users", ["a", 1]),
        lambda n: n.__setitem__("inputs", [None]),
        lambda n: n.__setitem__("tensor", "f32"),
        lambda n: n.__setitem__("tensors", {}),
        lambda n: n.__setitem__("module", None),
        lambda n: n.__setitem__("name", True),
        lambda n: n.pop("module_type"),
        lambda n: n.pop("name"),
        lambda n: n.__setitem__("extra", 1),
        lambda n: n.update({"op": n.pop("op")}),  # the same fields, another order
    ]
    compared = 0
    for i, damage in enumerate(damages):
        nodes = copy.deepcopy(good)
        damage(nodes[rnd.randrange(len(nodes))])
        assert plain_nodes(copy.deepcopy(nodes)) is None, i
        expected: list[str] = []
        careful = _careful({"graph": "g", "stage": "dynamo", "nodes": nodes}, expected)
        t = _write(tmp_path / str(i), nodes)
        g = t.graphs[0]
        got = g.stage_graph(g.snapshots()[0])
        assert (got.nodes if got else None) == (careful.nodes if careful else None), i
        snapshot = f"{schema.GRAPHS_DIR}/g/{g.snapshots()[0].file}"
        assert [p.message for p in t.problems if p.file == snapshot] == expected, i
        compared += 1
    for not_a_node in (None, 3, "n", []):  # an item that is no object: dropped, reported
        nodes = copy.deepcopy(good) + [not_a_node]
        assert plain_nodes(copy.deepcopy(nodes)) is None
        compared += 1
    assert compared == len(damages) + 4


def test_a_node_is_a_tuple_of_its_fields_with_fresh_defaults() -> None:
    a, b = Node("x", "placeholder", "x"), Node("y", "placeholder", "y")
    assert a.args == [] and a.args is not b.args and a.kwargs is not b.kwargs
    assert a.users is not b.users and a.module == "" and a.tensor is None
    n = Node.from_json(NODE)
    assert n.to_json() == NODE and list(n.to_json()) == list(NODE_FIELDS)
    assert graph.node_line(n) == "relu: f32[3] = aten.relu.default(x)"
