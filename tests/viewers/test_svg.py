"""SVG export (``tuidebug svg``) on real compiled traces: parse the SVG and check what is drawn."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import pythonpath

from tuidebug.trace.format.graph import Graph, Node
from tuidebug.trace.format.reader import Trace
from tuidebug.viewers.dot import (CLUSTER_STYLE, DIFF_STYLE, KIND_STYLE, DotOptions, Overlay,
                                  build_dot)
from tuidebug.viewers.svg import (Attempt, LayoutFailed, ViewerError, export, export_svg,
                                  kernel_overlay, run_layout)

ROOT = Path(__file__).resolve().parents[2]
NS = {"svg": "http://www.w3.org/2000/svg"}


# -- reading an SVG that Graphviz wrote ----------------------------------------------------------

class Svg:
    def __init__(self, path: Path) -> None:
        self.root = ET.parse(path).getroot()
        self.groups = {}
        for g in self.root.iter("{http://www.w3.org/2000/svg}g"):
            title = g.find("svg:title", NS)
            if title is not None and g.get("class") in ("node", "cluster", "edge"):
                self.groups.setdefault(g.get("class"), {})[title.text] = g

    def nodes(self) -> dict[str, ET.Element]:
        return self.groups.get("node", {})

    def clusters(self) -> dict[str, ET.Element]:
        return self.groups.get("cluster", {})

    def edges(self) -> list[tuple[str, str]]:
        return [tuple(t.split("->", 1)) for t in self.groups.get("edge", {})]

    @staticmethod
    def shape(g: ET.Element) -> ET.Element:
        return next(e for e in g.iter() if e.tag.endswith(("path", "polygon", "ellipse")))

    def fill(self, name: str) -> str:
        return self.shape(self.nodes()[name]).get("fill")

    def texts(self, g: ET.Element) -> str:
        return " ".join(t.text or "" for t in g.iter("{http://www.w3.org/2000/svg}text"))

    @staticmethod
    def bbox(g: ET.Element) -> tuple[float, float, float, float]:
        s = Svg.shape(g)
        raw = s.get("d") or s.get("points") or ""
        nums = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", raw)]
        xs, ys = nums[0::2], nums[1::2]
        return min(xs), min(ys), max(xs), max(ys)

    def inside(self, node: str, cluster: str) -> bool:
        x0, y0, x1, y1 = self.bbox(self.nodes()[node])
        cx0, cy0, cx1, cy1 = self.bbox(self.clusters()[cluster])
        return cx0 <= x0 and cy0 <= y0 and x1 <= cx1 and y1 <= cy1


def tooltip(g: ET.Element) -> str:
    return g.find(".//svg:a", NS).get("{http://www.w3.org/1999/xlink}title")


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = dict(os.environ if env is None else env, PYTHONPATH=pythonpath())
    return subprocess.run([sys.executable, "-m", "tuidebug.cli", "svg", *args], env=e,
                          capture_output=True, text=True, timeout=300)


def forward(trace_dir: Path):
    return next(g for g in Trace(trace_dir).graphs if g.kind == "forward")


# -- the plain graph -----------------------------------------------------------------------------

def test_every_node_drawn_with_target_and_meta(transformer_trace: Path, tmp_path: Path) -> None:
    rec = forward(transformer_trace)
    graph = rec.final_graph()
    assert len(graph) < 400  # under the budget: nothing collapsed
    out = export_svg(transformer_trace, rec.id, out=tmp_path / "g.svg")
    svg = Svg(out)
    drawn = {t for t in svg.nodes() if not t.startswith("@")}
    assert drawn == {n.name for n in graph}
    mm = next(n for n in graph if n.target.startswith("aten.addmm"))
    text = svg.texts(svg.nodes()[mm.name])
    assert "addmm" in text and mm.meta_label() in text  # op and dtype[shape]
    assert svg.nodes()[mm.name].get("id") == f"node:{mm.name}"


def test_kinds_are_visually_distinct_and_legend(transformer_trace: Path, tmp_path: Path) -> None:
    rec = forward(transformer_trace)
    graph = rec.final_graph()
    svg = Svg(export_svg(transformer_trace, rec.id, out=tmp_path / "g.svg"))
    ph = next(n for n in graph if n.op == "placeholder")
    view = next(n for n in graph if n.is_view)
    compute = next(n for n in graph if n.target == "aten.mul.Tensor")
    assert svg.fill(ph.name) == KIND_STYLE["placeholder"]["fillcolor"]
    assert svg.fill("output") == KIND_STYLE["output"]["fillcolor"]
    assert svg.fill(compute.name) == KIND_STYLE["compute"]["fillcolor"]
    assert svg.shape(svg.nodes()[view.name]).get("stroke-dasharray")  # dashed border
    assert not svg.shape(svg.nodes()[compute.name]).get("stroke-dasharray")
    legend = svg.nodes()["@legend"]
    for word in ("legend", "placeholder", "output", "view", "compute"):
        assert word in svg.texts(legend)


def test_inplace_ops_drawn_apart(tmp_path: Path) -> None:
    g = Graph([Node("x", "placeholder", "x", users=["add_"], tensor={"dtype": "float32", "shape": [4]}),
               Node("add_", "call_function", "aten.add_.Tensor", inputs=["x"], users=["output"]),
               Node("output", "output", "output", inputs=["add_"])], "g", "s")
    res = build_dot(g)
    dot_file = tmp_path / "g.dot"
    dot_file.write_text(res.dot.source)
    run_layout(dot_file, tmp_path / "g.svg", [Attempt("dot", [], 30)])
    svg = Svg(tmp_path / "g.svg")
    shape = svg.shape(svg.nodes()["add_"])
    assert shape.get("stroke") == KIND_STYLE["inplace"]["color"]
    assert "in-place" in svg.texts(svg.nodes()["@legend"])
    assert svg.fill("x") == KIND_STYLE["placeholder"]["fillcolor"]


def test_long_edges_into_output_become_a_stub(transformer_trace: Path, tmp_path: Path) -> None:
    rec = forward(transformer_trace)
    graph = rec.final_graph()
    out_inputs = graph.get("output").inputs
    assert len(out_inputs) > DotOptions().max_fanin
    svg = Svg(export_svg(transformer_trace, rec.id, out=tmp_path / "g.svg"))
    real = {a for a, b in svg.edges() if b == "output"} - {"@stub_in/output"}
    assert len(real) <= DotOptions().max_fanin
    tip = tooltip(svg.nodes()["@stub_in/output"])
    assert all(name in tip for name in set(out_inputs) - real)  # the stub names the rest
    # the block input feeding the residual add far below: a stub at each end, no long edge
    x = next(n for n in graph if n.op == "placeholder" and len(n.tensor["shape"]) == 3)
    residual = next(u for u in x.users if graph.get(u).target == "aten.add.Tensor")
    assert len(x.users) <= DotOptions().max_fanout  # cut for its length, not its fan-out
    assert (x.name, residual) not in svg.edges()
    assert residual in tooltip(svg.nodes()[f"@stub_out/{x.name}"])
    assert x.name in tooltip(svg.nodes()[f"@stub_in/{residual}"])
    fx_edges = [e for e in svg.edges() if not any(x.startswith("@") for x in e)]
    assert len(fx_edges) < sum(1 for _ in graph.edges())


# -- kernels ---------------------------------------------------------------------------------------

def test_kernel_clusters_named_after_kernels(transformer_trace: Path, tmp_path: Path) -> None:
    rec = forward(transformer_trace)
    graph = rec.final_graph()
    svg = Svg(export_svg(transformer_trace, rec.id, kernels=True, out=tmp_path / "k.svg"))
    kernel_of, kind, _ = kernel_overlay(rec, graph)
    generated = {k for k in kernel_of.values() if kind.get(k) != "extern"}
    extern = {k for k in kernel_of.values() if kind.get(k) == "extern"}
    assert generated and extern
    clusters = svg.clusters()
    for k in generated | extern:
        assert f"cluster_{k}" in clusters, k
        assert k in svg.texts(clusters[f"cluster_{k}"])
    drawn = [(node, k) for node, k in kernel_of.items() if node in graph]
    assert drawn, kernel_of
    for node, k in drawn:  # each FX node sits inside its kernel's cluster
        assert svg.inside(node, f"cluster_{k}"), (node, k)
    g_k, e_k = sorted(generated)[0], sorted(extern)[0]
    assert svg.shape(clusters[f"cluster_{g_k}"]).get("stroke") == CLUSTER_STYLE["kernel"]["color"]
    ext = svg.shape(clusters[f"cluster_{e_k}"])
    assert ext.get("stroke") == CLUSTER_STYLE["extern"]["color"] and ext.get("stroke-dasharray")
    legend = svg.texts(svg.nodes()["@legend"])
    assert "generated kernel" in legend and "extern call" in legend


def test_kernel_view_of_failed_compile(failing_trace: Path, tmp_path: Path) -> None:
    rec = Trace(failing_trace).graphs[0]
    assert rec.status != "ok"
    svg = Svg(export_svg(failing_trace, kernels=True, out=tmp_path / "f.svg"))
    names = {k.name for k in rec.kernels if k.kind != "extern"}
    reused = [k for k in rec.kernels if len(k.handles or []) > 1]
    assert names and reused  # the planted bug's MLP reuses one kernel for several layers
    for n in names:  # one cluster per kernel, or per call (its handle) when it is called more
        assert any(t in (f"cluster_{n}",) or t.startswith(f"cluster_{n}:") for t in svg.clusters())
    for k in reused:
        assert all(f"cluster_{h}" in svg.clusters() for h in k.handles)


def test_kernel_view_without_provenance_says_so(mlp_trace: Path, copy_trace, tmp_path: Path) -> None:
    t = copy_trace(mlp_trace)
    for p in (t / "graphs").glob("*/provenance.json*"):  # plain or compressed (.gz)
        p.unlink()
    with pytest.raises(ViewerError, match="no kernel provenance"):
        export_svg(t, kernels=True, out=tmp_path / "x.svg")


# -- diffs -------------------------------------------------------------------------------------------

def _pass_with_all_changes(rec):
    snaps = rec.snapshots()
    for s in snaps[1:]:
        if s.kind == "pass" and s.added and s.removed and s.modified:
            return s
    pytest.fail("no pass that added, removed and changed nodes")


def test_pass_diff_colours(transformer_trace: Path, tmp_path: Path) -> None:
    rec = forward(transformer_trace)
    stage = _pass_with_all_changes(rec)
    ch = rec.stage_changes(stage)
    out = export_svg(transformer_trace, rec.id, diff=True, pass_index=stage.index,
                     out=tmp_path / "d.svg")
    svg = Svg(out)
    for status in ("added", "removed", "changed"):
        assert ch[status]
        for name in ch[status]:
            assert svg.fill(name) == DIFF_STYLE[status]["fillcolor"], (status, name)
    removed_only = set(ch["removed"])  # they exist only in the earlier snapshot
    before = rec.stage_graph([s for s in rec.snapshots() if s.index < stage.index][-1])
    assert removed_only <= {n.name for n in before}
    after = rec.stage_graph(stage)
    untouched = [n.name for n in after if n.name not in set(ch["added"]) | set(ch["changed"])]
    assert untouched and all(svg.fill(n) == DIFF_STYLE["same"]["fillcolor"] for n in untouched)
    legend = svg.texts(svg.nodes()["@legend"])
    assert all(s in legend for s in ("added", "removed", "changed"))


def test_diff_between_two_stages_cli(transformer_trace: Path, tmp_path: Path) -> None:
    rec = forward(transformer_trace)
    snaps = rec.snapshots()
    a, b = next(s for s in snaps if s.name == "aot_joint"), snaps[-1]
    out = tmp_path / "ab.svg"
    proc = cli(str(transformer_trace), "--graph", rec.id, "--diff", Path(a.file).stem,
               Path(b.file).stem, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    svg = Svg(out)
    ga, gb = rec.stage_graph(a), rec.stage_graph(b)
    gone = next(n.name for n in ga if n.name not in gb)
    new = [n.name for n in gb if n.name not in ga]
    assert new, "the two stages compared add no node"
    assert svg.fill(gone) == DIFF_STYLE["removed"]["fillcolor"]
    assert all(svg.fill(n) == DIFF_STYLE["added"]["fillcolor"] for n in new)


# -- large graphs --------------------------------------------------------------------------------

def test_depth_collapses_modules(transformer_trace: Path, tmp_path: Path) -> None:
    rec = forward(transformer_trace)
    graph = rec.final_graph()
    e = export(transformer_trace, rec.id, depth=1, out=tmp_path / "c.svg")
    svg = Svg(e.svg)
    box = svg.nodes()["@module/blocks.0"]
    members = [n.name for n in graph if n.module.startswith("blocks.0")]
    assert members and not any(m in svg.nodes() for m in members)
    count = int(re.search(r"(\d+) nodes", svg.texts(box)).group(1))
    assert count >= len(members)
    assert e.dot.shown < len(graph) and e.dot.depth == 1


def test_budget_collapses_automatically(transformer_trace: Path, tmp_path: Path) -> None:
    rec = forward(transformer_trace)
    n = len(rec.final_graph())
    e = export(transformer_trace, rec.id, budget=n // 3, out=tmp_path / "b.svg")
    assert e.dot.depth is not None and e.dot.shown <= n // 3
    assert any(t.startswith("@module/") for t in Svg(e.svg).nodes())
    full = export(transformer_trace, rec.id, budget=n // 3, collapse=False, out=tmp_path / "f.svg")
    assert full.dot.depth is None and full.dot.shown == n


def test_joint_graph_forward_and_backward_apart(transformer_trace: Path, tmp_path: Path) -> None:
    rec = forward(transformer_trace)
    joint = next(s for s in rec.snapshots() if s.name == "aot_joint")
    svg = Svg(export_svg(transformer_trace, rec.id, stage=joint.name, out=tmp_path / "j.svg"))
    assert {"cluster_forward", "cluster_backward"} <= set(svg.clusters())
    assert svg.inside("tangents_1", "cluster_backward")
    g = rec.stage_graph(joint)
    first_op = next(n.name for n in g if n.op == "call_function")
    assert svg.inside(first_op, "cluster_forward")
    side = {name: ("b" if svg.inside(name, "cluster_backward") else "f")
            for name in svg.nodes() if name in g}
    crossing = [(a, b) for a, b in svg.edges() if a in side and b in side and side[a] != side[b]]
    assert not crossing  # saved activations reach the backward through stubs only


def test_fallback_when_dot_runs_out_of_time(tmp_path: Path) -> None:
    nodes = [Node(f"n{i}", "call_function", "aten.add.Tensor",
                  inputs=[f"n{j}" for j in (i - 1, i // 2, i // 3) if 0 <= j < i])
             for i in range(1500)]
    res = build_dot(Graph(nodes, "big"), opts=DotOptions(collapse=False, long_span=10 ** 6,
                                                         max_fanout=99, max_fanin=99))
    dot_file = tmp_path / "big.dot"
    dot_file.write_text(res.dot.source)
    r = run_layout(dot_file, tmp_path / "big.svg", [Attempt("dot", [], 0.2),
                                                     Attempt("sfdp", ["-Gsplines=false"], 300)])
    assert r.engine == "sfdp" and "no layout in" in r.tries[0]
    assert Svg(tmp_path / "big.svg").nodes()
    with pytest.raises(LayoutFailed) as info:
        run_layout(dot_file, tmp_path / "none.svg", [Attempt("dot", [], 0.2)])
    assert str(dot_file) in str(info.value) and dot_file.exists()


# -- errors and boundaries -------------------------------------------------------------------------

def test_missing_dot_writes_dot_file_and_says_how_to_install(mlp_trace: Path, tmp_path: Path) -> None:
    env = dict(os.environ, PATH=str(tmp_path / "empty-bin"))
    out = tmp_path / "m.svg"
    proc = cli(str(mlp_trace), "-o", str(out), env=env)
    assert proc.returncode != 0
    assert "apt-get install graphviz" in proc.stderr and "brew install graphviz" in proc.stderr
    assert not out.exists()
    dot_text = out.with_suffix(".dot").read_text()
    assert dot_text.startswith("digraph") and "output" in dot_text


@pytest.mark.parametrize("args, words", [
    (["--graph", "nope"], ["no graph 'nope'", "valid graphs"]),
    (["--stage", "nope"], ["no stage 'nope'", "valid stages"]),
    (["--pass", "999", "--diff"], ["no pass 999", "valid passes"]),
    (["--diff", "only-one"], ["--diff takes two stages"]),
])
def test_unknown_ids_list_the_valid_ones(mlp_trace: Path, tmp_path: Path, args, words) -> None:
    proc = cli(str(mlp_trace), *args, "-o", str(tmp_path / "x.svg"))
    assert proc.returncode == 2, proc.stderr
    for w in words:
        assert w in proc.stderr
    if "valid graphs" in words:
        assert all(g.id in proc.stderr for g in Trace(mlp_trace).graphs)
    if "valid stages" in words:
        rec = Trace(mlp_trace).graphs[0]
        assert all(Path(s.file).stem in proc.stderr for s in rec.snapshots())


def test_cli_writes_svg(mlp_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "k.svg"
    proc = cli(str(mlp_trace), "--kernels", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out}" in proc.stdout
    assert any(t.startswith("cluster_") for t in Svg(out).clusters())


def test_viewers_never_import_torch(mlp_trace: Path, tmp_path: Path) -> None:
    code = ("import sys\n"
            "from tuidebug.viewers.svg import export_svg\n"
            f"export_svg({str(mlp_trace)!r}, kernels=True, out={str(tmp_path / 'x.svg')!r})\n"
            "import tuidebug.cli.viewing\n"
            "bad = [m for m in ('torch', 'textual') if m in sys.modules]\n"
            "assert not bad, bad\n")
    proc = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=pythonpath()),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "x.svg").exists()
