"""Drawings that stay readable at any size, torch-free on graphs built with the graph model: a
graph without module paths (an optimizer step) collapses by its chains of ops, and a long row of
boxes wraps so the canvas fits a screen. The layout checks run Graphviz and read its SVG."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bench.svg_scaling import ADAMW, optimizer_graph
from tests.viewers.test_dot import drawn
from tuidebug.trace.format.graph import Graph, Node
from tuidebug.viewers.dot import DotOptions, build_dot
from tuidebug.viewers.dot.groups import derived_groups

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' not installed")


def canvas(dot_source: str, tmp_path: Path) -> tuple[float, float]:
    """Width and height in points of the SVG that ``dot`` draws."""
    src = tmp_path / "g.dot"
    src.write_text(dot_source)
    svg = subprocess.run(["dot", "-Tsvg", str(src)], capture_output=True, text=True, check=True,
                         timeout=120).stdout
    w, h = (float(re.search(rf'{k}="([0-9.]+)pt"', svg).group(1)) for k in ("width", "height"))
    return w, h


def row_of_modules(count: int, ops: int) -> Graph:
    """``count`` independent modules side by side (a backward's per-layer boxes): each a chain
    of ``ops`` nodes from its own input."""
    nodes: list[Node] = []
    for i in range(count):
        prev = f"x{i}"
        nodes.append(Node(prev, "placeholder", prev, users=[f"op{i}_0"], module=f"layers.{i}.fc"))
        for j in range(ops):
            name = f"op{i}_{j}"
            nodes[-1].users[:] = [name]  # a node is a tuple: its lists change in place
            nodes.append(Node(name, "call_function", "aten.mul.Tensor", inputs=[prev],
                              module=f"layers.{i}.fc"))
            prev = name
    return Graph(nodes, "row", "synthetic")


def test_an_optimizer_graph_without_module_paths_groups_by_parameter() -> None:
    graph = optimizer_graph(4)  # 44 parameters, each its own AdamW chain
    assert not any(n.module for n in graph)
    groups = derived_groups(graph)
    params = {n.name for n in graph if n.op == "placeholder" and n.name[0] == "p"}
    assert len(params) == 44
    assert {"lr", "step", "output"}.isdisjoint(groups)  # shared inputs join no chain
    checked = 0
    for n in graph:  # each group is one parameter's chain: its param, grad, moments and update
        if n.name in groups:
            index = re.search(r"\d+$", n.name.split("_")[-1]).group(0)
            assert groups[n.name].split(".")[1] == f"p{index}", (n.name, groups[n.name])
            checked += 1
    assert checked == len(graph) - 3


def test_an_optimizer_graph_draws_its_alike_chains_once() -> None:
    """44 parameters updated by the same ops: their chain is drawn once, each box standing for
    that node of all 44 (``×44``); the shared ``lr`` and ``step`` once, apart."""
    graph = optimizer_graph(4)
    res = build_dot(graph)
    per_param = len(ADAMW) + 4  # its ops, and its param, grad and moments
    assert res.shown == per_param + 3, res.shown  # and lr, step, output
    assert any("44 params updated alike" in note for note in res.notes), res.notes
    singles, _ = drawn(res.dot.source)
    assert singles == {"lr", "step", "output"}
    labels = [line for line in res.dot.source.splitlines() if 'id="alike:' in line]
    assert len(labels) == per_param, len(labels)
    for line in labels:
        assert "×44" in line, line
    stubs = re.findall(r'label="([⇢⇠][^"]*)"', res.dot.source)  # a long edge's far end: its box
    assert len(stubs) == res.stubs > 0 and all(s.endswith("×44") for s in stubs), stubs


@needs_dot
def test_an_optimizer_graph_draws_within_a_screen(tmp_path: Path) -> None:
    w, h = canvas(build_dot(optimizer_graph(4)).dot.source, tmp_path)
    assert max(w / h, h / w) <= 3, (w, h)


@needs_dot
def test_a_long_row_of_module_boxes_wraps(tmp_path: Path) -> None:
    graph = row_of_modules(80, 6)
    res = build_dot(graph, opts=DotOptions(depth=2))
    assert res.shown == 80  # one box per module
    w, h = canvas(res.dot.source, tmp_path)
    assert max(w / h, h / w) <= 3, (w, h)


def chain_of_modules(count: int, ops: int) -> Graph:
    """``count`` modules one after the other (a deep model's layers), ``ops`` nodes each."""
    nodes = [Node("x", "placeholder", "x")]
    for i in range(count):
        for j in range(ops):
            name = f"op{i}_{j}"
            nodes[-1].users[:] = [name]  # a node is a tuple: its lists change in place
            nodes.append(Node(name, "call_function", "aten.mul.Tensor", inputs=[nodes[-1].name],
                              module=f"layers.{i}.fc"))
    return Graph(nodes, "chain", "synthetic")


@needs_dot
def test_a_tall_chain_of_module_boxes_folds_into_columns(tmp_path: Path) -> None:
    res = build_dot(chain_of_modules(150, 3), opts=DotOptions(depth=2))
    assert res.shown == 150  # a box per module (the input joins the first)
    assert res.stubs > 0  # the edges between bands
    w, h = canvas(res.dot.source, tmp_path)
    assert max(w / h, h / w) <= 3, (w, h)


def reordered_updates(count: int) -> Graph:
    """``count`` parameters updated alike, each piece listing its inputs in another order
    (Dynamo reads a parameter's state at first use in one loop turn, all at once in another)."""
    nodes: dict[str, Node] = {}

    def add(name: str, op: str, target: str, inputs: list[str]) -> None:
        nodes[name] = Node(name, op, target, inputs=inputs, tensor={"dtype": "float32", "shape": [4]})
        for i in inputs:
            nodes[i].users.append(name)

    for i in range(count):
        ins = [(f"p{i}", "get_attr", f"state_{i}_param"), (f"g{i}", "placeholder", f"g{i}")]
        for name, op, target in ins if i % 2 == 0 else ins[::-1]:
            add(name, op, target, [])
        add(f"a{i}", "call_function", "aten.mul.Tensor", [f"g{i}"])
        add(f"b{i}", "call_function", "aten.add.Tensor", [f"p{i}", f"a{i}"])
        add(f"c{i}", "call_function", "aten.copy_.default", [f"p{i}", f"b{i}"])
    return Graph(list(nodes.values()), "reordered", "synthetic")


def test_alike_updates_listed_in_other_orders_are_drawn_once() -> None:
    res = build_dot(reordered_updates(6))
    boxes = [line for line in res.dot.source.splitlines() if 'id="alike:' in line]
    assert len(boxes) == 5 and all("×6" in b for b in boxes), boxes  # p, g, mul, add, copy_
    assert any("6 params updated alike" in note for note in res.notes), res.notes
    # the parameter (written in place) and the gradient keep their boxes apart
    assert sum("param ×6" in b for b in boxes) == 1 and sum("input ×6" in b for b in boxes) == 1
