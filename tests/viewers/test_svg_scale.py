"""SVG export of bigger graphs on real traces: diffs that keep their colours when cut down or
collapsed, removed nodes on their side of a joint graph, foreach in-place ops, kernels under
--depth, progressive collapse, titles and warnings. Every check parses the SVG Graphviz wrote."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.viewers.test_svg import NS, Svg, cli, forward, tooltip
from tuidebug.trace.format.graph import Node
from tuidebug.trace.format.reader import Trace
from tuidebug.viewers import svg as svg_mod
from tuidebug.viewers.dot import DIFF_STYLE, KIND_STYLE, backward_nodes
from tuidebug.viewers.dot.labels import group_status
from tuidebug.viewers.svg import Attempt, LayoutFailed, export, kernel_overlay

FILL_STATUS = {s["fillcolor"]: name for name, s in DIFF_STYLE.items()}


def _status(ch: dict[str, list[str]]) -> dict[str, str]:
    return {n: st for st in ("added", "removed", "changed") for n in ch[st]}


def _joint_passes(rec) -> list:
    """Snapshots of passes run on the joint graph (between aot_joint and the partition)."""
    joint = next(s.index for s in rec.stages if s.name == "aot_joint")
    split = next(s.index for s in rec.stages if s.index > joint and s.name.startswith("aot_"))
    return [s for s in rec.snapshots() if s.kind == "pass" and joint < s.index < split]


def _before(rec, stage):
    return [s for s in rec.snapshots() if s.index < stage.index][-1]


def _box_members(g) -> list[str]:
    """The FX nodes a collapsed box lists in its tooltip (the first dozen)."""
    names = tooltip(g).split(" nodes: ", 1)[1]
    return [x for x in names.replace(", …", "").split(", ") if x]


def _title(svg: Svg) -> str:
    graph = next(g for g in svg.root.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "graph")
    texts = graph.findall("svg:text", NS) + graph.findall("svg:g/svg:a/svg:text", NS)  # the label
    return " ".join(t.text or "" for t in texts)


# -- diffs at scale ---------------------------------------------------------------------------

def test_big_joint_diff_draws_the_changes_alone(transformer4_trace: Path, tmp_path: Path) -> None:
    """Context that does not fit: the changes alone, uncollapsed and in their colours, with
    stubs naming their hidden neighbours (before: collapsed into yellow module boxes)."""
    rec = forward(transformer4_trace)
    stage = max(_joint_passes(rec), key=lambda s: s.added + s.removed + s.modified)
    ch = rec.stage_changes(stage)
    status = _status(ch)
    assert ch["added"] and ch["removed"]
    e = export(transformer4_trace, rec.id, diff=True, pass_index=stage.index, budget=len(status),
               out=tmp_path / "d.svg")
    assert e.dot.total > 2 * len(status)  # a cut-down diff, not the whole union graph
    assert e.dot.depth is None and e.dot.shown == len(status)
    svg = Svg(e.svg)
    for name, st in status.items():
        assert svg.fill(name) == DIFF_STYLE[st]["fillcolor"], (name, st)
    fills = {svg.fill(t) for t in svg.nodes() if not t.startswith("@")}
    assert DIFF_STYLE["removed"]["fillcolor"] in fills and DIFF_STYLE["added"]["fillcolor"] in fills
    # forward and backward apart even when cut down, the pieces stacked, not in one long row
    bwd = backward_nodes(rec.stage_graph(_before(rec, stage)))
    for r in ch["removed"]:
        assert svg.inside(r, "cluster_backward" if r in bwd else "cluster_forward"), r
    width, height = (float(svg.root.get(k).rstrip("pt")) for k in ("width", "height"))
    assert width < 4 * height, (width, height)
    gone = ch["removed"][0]  # a removed node's inputs that are not drawn are named on a stub
    hidden = [i for i in rec.stage_graph(_before(rec, stage)).get(gone).inputs if i not in status]
    assert hidden
    tip = tooltip(svg.nodes()[f"@stub_in/{gone}"])
    assert tip.startswith("from: ") and set(hidden) <= set(tip[len("from: "):].split(", "))


def test_collapsed_diff_keeps_added_and_removed_apart(transformer4_trace: Path, tmp_path: Path) -> None:
    """Collapsed to modules, a box never mixes statuses: removed stay red, added green."""
    rec = forward(transformer4_trace)
    stage = max(_joint_passes(rec), key=lambda s: s.added + s.removed + s.modified)
    status = _status(rec.stage_changes(stage))
    e = export(transformer4_trace, rec.id, diff=True, pass_index=stage.index,
               budget=len(status) // 8, out=tmp_path / "c.svg")
    assert e.dot.depth is not None and e.dot.shown <= len(status) // 8
    svg = Svg(e.svg)
    boxes = {t: g for t, g in svg.nodes().items() if t.startswith("@module/")}
    box_fills = {svg.fill(t) for t in boxes}
    assert DIFF_STYLE["removed"]["fillcolor"] in box_fills
    assert DIFF_STYLE["added"]["fillcolor"] in box_fills
    for t, g in boxes.items():
        members = {status.get(m, "same") for m in _box_members(g)}
        assert members == {FILL_STATUS[svg.fill(t)]}, (t, members)
    # every change is drawn once, in a box of its status or alone in its colour
    counted = 0
    for t, g in boxes.items():
        if FILL_STATUS[svg.fill(t)] != "same":
            counted += int(re.search(r"(\d+) nodes?", svg.texts(g)).group(1))
    counted += sum(1 for t in svg.nodes() if t in status and svg.fill(t) == DIFF_STYLE[status[t]]["fillcolor"])
    assert counted == len(status)


def test_box_colour_is_its_one_change() -> None:
    """A box that mixes one kind of change with untouched nodes (a kernel box) takes that
    change's colour; only a mix of changes is "changed"."""
    nodes = [Node(x, "call_function", "aten.add.Tensor") for x in "abc"]
    assert group_status(nodes, {"a": "removed"}) == "removed"
    assert group_status(nodes, {"a": "added", "b": "same"}) == "added"
    assert group_status(nodes, {"a": "added", "b": "removed"}) == "changed"
    assert group_status(nodes, {}) == "same"


def test_removed_backward_nodes_drawn_in_the_backward(transformer_trace: Path, tmp_path: Path) -> None:
    """A pass on the joint graph that removed backward nodes: they sit in cluster_backward
    (before: in the forward, as no surviving node listed them as users)."""
    rec = forward(transformer_trace)
    checked = 0
    for stage in _joint_passes(rec):
        before = rec.stage_graph(_before(rec, stage))
        bwd = backward_nodes(before)  # where they were, in the graph they come from
        removed = rec.stage_changes(stage)["removed"]
        if not any(r in bwd for r in removed):
            continue
        e = export(transformer_trace, rec.id, diff=True, pass_index=stage.index,
                   out=tmp_path / f"j{stage.index}.svg")
        svg = Svg(e.svg)
        assert {"cluster_forward", "cluster_backward"} <= set(svg.clusters())
        for r in removed:
            assert svg.fill(r) == DIFF_STYLE["removed"]["fillcolor"]
            side = "cluster_backward" if r in bwd else "cluster_forward"
            assert svg.inside(r, side), (stage.index, stage.name, r, side)
            checked += r in bwd
    assert checked >= 10  # the pattern matcher's removed weight transposes among them


def test_diff_of_a_pass_that_changed_nothing(transformer4_trace: Path, tmp_path: Path) -> None:
    """Over the budget with nothing changed: the graph, greyed and collapsed (before: empty)."""
    rec = forward(transformer4_trace)
    joint = next(s.index for s in rec.snapshots() if s.name == "aot_joint")
    idle = next(s for s in rec.stages if s.file is None and s.index > joint)
    e = export(transformer4_trace, rec.id, diff=True, pass_index=idle.index, out=tmp_path / "n.svg")
    svg = Svg(e.svg)
    assert e.dot.total > 400 and 0 < e.dot.shown <= 400
    assert f"pass {idle.index} {idle.name} changed nothing" in _title(svg)
    drawn = [t for t in svg.nodes() if not t.startswith("@")]
    assert drawn and all(svg.fill(t) == DIFF_STYLE["same"]["fillcolor"] for t in drawn)


# -- in-place ---------------------------------------------------------------------------------

def test_foreach_inplace_ops_styled_inplace(inplace_trace: Path, tmp_path: Path) -> None:
    """``_foreach_add_`` (an SGD step, and called directly) is in-place; ``_foreach_add`` not."""
    seen = {"inplace": 0, "functional": 0}
    for rec in Trace(inplace_trace).graphs:
        for stage in rec.snapshots():
            g = rec.stage_graph(stage)
            ops = [n for n in g if n.short_target.startswith("_foreach_")]
            if not ops:
                continue
            svg = Svg(svg_mod.export_svg(inplace_trace, rec.id, stage=Path(stage.file).stem,
                                         out=tmp_path / f"{rec.id}-{stage.index}.svg"))
            for n in ops:
                stroke = svg.shape(svg.nodes()[n.name]).get("stroke")
                if n.short_target.endswith("_"):
                    seen["inplace"] += 1
                    assert stroke == KIND_STYLE["inplace"]["color"], (rec.id, stage.name, n.target)
                    assert "in-place" in svg.texts(svg.nodes()["@legend"])
                else:
                    seen["functional"] += 1
                    assert stroke != KIND_STYLE["inplace"]["color"], (rec.id, stage.name, n.target)
    assert seen["inplace"] >= 2 and seen["functional"] >= 1, seen


# -- kernels and depth ------------------------------------------------------------------------

def test_kernels_with_depth_keep_kernel_boxes(transformer_trace: Path, tmp_path: Path) -> None:
    """--kernels --depth N: each kernel is a box (before: every kernel cluster was dropped while
    the legend still listed kernels)."""
    rec = forward(transformer_trace)
    graph = rec.final_graph()
    e = export(transformer_trace, rec.id, kernels=True, depth=1, out=tmp_path / "kd.svg")
    assert e.dot.kernels_collapsed and e.dot.depth == 1
    svg = Svg(e.svg)
    kernel_of, kind, _ = kernel_overlay(rec, graph)
    assert kernel_of
    for k in set(kernel_of.values()):
        box = svg.nodes().get("@kernel/" + k.replace(":", "#"))
        assert box is not None, k
        style = KIND_STYLE["extern" if kind.get(k) == "extern" else "kernel"]
        assert svg.fill("@kernel/" + k.replace(":", "#")) == style["fillcolor"], k
    legend = svg.texts(svg.nodes()["@legend"])
    assert "generated kernel" in legend and "extern call" in legend
    plain = Svg(export(transformer_trace, rec.id, depth=1, out=tmp_path / "d.svg").svg)
    assert "generated kernel" not in plain.texts(plain.nodes()["@legend"])


# -- collapse, titles, warnings ---------------------------------------------------------------

def test_auto_collapse_is_progressive_and_fits(transformer4_trace: Path, tmp_path: Path) -> None:
    """531 nodes with a budget of 400: just enough modules collapsed (before: 43 boxes), the
    budget kept, and every FX node drawn exactly once, alone or counted in a box."""
    rec = next(g for g in Trace(transformer4_trace).graphs if g.kind == "backward")
    graph = rec.final_graph()
    assert len(graph) > 400
    e = export(transformer4_trace, rec.id, out=tmp_path / "b.svg")
    assert 300 < e.dot.shown <= 400
    svg = Svg(e.svg)
    boxes = [g for t, g in svg.nodes().items() if t.startswith("@module/")]
    alone = [t for t in svg.nodes() if t in graph]
    assert boxes and alone
    in_boxes = sum(int(re.search(r"(\d+) nodes?", svg.texts(g)).group(1)) for g in boxes)
    assert in_boxes + len(alone) == len(graph)


def test_pass_title_names_the_pass(transformer_trace: Path, tmp_path: Path) -> None:
    rec = forward(transformer_trace)
    first = rec.snapshots()[0].index
    idle = next(s for s in rec.stages if s.file is None and s.index > first)
    title = _title(Svg(export(transformer_trace, rec.id, pass_index=idle.index, out=tmp_path / "i.svg").svg))
    assert f"pass {idle.index} {idle.name} (changed nothing; graph as of" in title
    busy = next(s for s in rec.snapshots() if s.kind == "pass")
    title = _title(Svg(export(transformer_trace, rec.id, pass_index=busy.index, out=tmp_path / "b.svg").svg))
    assert f"after pass {busy.index} {busy.name}" in title


def test_ambiguous_stage_name_warns(transformer_trace: Path, tmp_path: Path) -> None:
    rec = forward(transformer_trace)
    same = [s.index for s in rec.stages if s.name == "pattern_matcher"]
    assert len(same) > 1
    proc = cli(str(transformer_trace), "--graph", rec.id, "--stage", "pattern_matcher",
               "-o", str(tmp_path / "p.svg"))
    assert proc.returncode == 0, proc.stderr
    assert f"matches {len(same)} passes" in proc.stderr and "--pass N" in proc.stderr
    proc = cli(str(transformer_trace), "--graph", rec.id, "--pass", str(same[0]), "-o", str(tmp_path / "q.svg"))
    assert "warning" not in proc.stderr


def test_long_placeholder_names_are_clipped(transformer_trace: Path, tmp_path: Path) -> None:
    rec = forward(transformer_trace)
    dynamo = rec.snapshots()[0]
    long = [n.name for n in rec.stage_graph(dynamo) if n.op == "placeholder" and len(n.name) > 40]
    assert long
    svg = Svg(svg_mod.export_svg(transformer_trace, rec.id, stage=Path(dynamo.file).stem,
                                 out=tmp_path / "dyn.svg"))
    for name in long:
        text = svg.texts(svg.nodes()[name])
        assert name not in text and "…" in text and name[-12:] in text
        assert name in tooltip(svg.nodes()[name])


def test_layout_failure_with_full_suggests_dropping_it(transformer_trace: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(svg_mod, "attempts", lambda shown, total: [Attempt("dot", [], 0.001)])
    rec = forward(transformer_trace)
    with pytest.raises(LayoutFailed, match="drop --full"):
        export(transformer_trace, rec.id, budget=20, collapse=False, out=tmp_path / "f.svg")
    with pytest.raises(LayoutFailed) as info:
        export(transformer_trace, rec.id, budget=20, out=tmp_path / "g.svg")
    assert "--full" not in str(info.value)
