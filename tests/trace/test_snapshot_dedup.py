"""A snapshot whose nodes repeat an earlier one's is stored once: its stage entry names the
earlier file and holds its own changes (docs/trace-format.md). The reader follows the entry
inside the trace only, keeps each stage's own changes, and old traces read as before. Also:
each compile's shapes beside a brief of them (``compiles/<id>.shapes-brief.json``), which is
what ``info`` reads."""

from __future__ import annotations

import json
from pathlib import Path

from tuidebug.trace.format import schema
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.queries.dynamic import compile_dynamic
from tuidebug.trace.queries.stages import stage_diff

NODES_A = [{"name": "x", "op": "placeholder", "target": "x", "args": [], "kwargs": {}},
           {"name": "relu", "op": "call_function", "target": "aten.relu", "args": [],
            "kwargs": {}, "inputs": ["x"]}]
NODES_B = NODES_A + [{"name": "neg", "op": "call_function", "target": "aten.neg",
                      "args": [], "kwargs": {}, "inputs": ["relu"]}]


def _trace(root: Path, graphs: list[list[dict]], *, dedup: bool = True,
           entry_changes: bool = True, shapes: dict | None = None) -> Path:
    """A trace of one graph whose stages have the node lists ``graphs``, written as capture
    writes them (``dedup``: with the writer's ``seen``; ``entry_changes``: a shared file's
    stage carries its changes in its entry)."""
    w = TraceWriter(root, command=["test"])
    w.add_graph("0_0-inference", kind="inference", compile_id="0/0")
    g = w.graph("0_0-inference")
    seen: dict[str, str] | None = {} if dedup else None
    stages, prev = [], None
    for i, nodes in enumerate(graphs):
        names = {n["name"] for n in nodes}
        before = {n["name"] for n in prev} if prev is not None else set()
        changes = {"added": sorted(names - before), "removed": sorted(before - names),
                   "changed": []}
        name = f"stage{i}"
        fname = g.write_stage(i, name, {"graph": g.graph_id, "stage": name, "nodes": nodes,
                                        "changes": changes}, seen=seen)
        entry = {"index": i, "name": name, "kind": "stage", "subsystem": None,
                 "duration_s": None, "changed": bool(any(changes.values())), "file": fname,
                 "nodes": len(nodes), "counts": {k: len(v) for k, v in changes.items()}}
        if entry_changes and fname != f"stages/{i:03d}-{name}.json":
            entry["changes"] = changes
        stages.append(entry)
        prev = nodes
    g.write_meta(kind="inference", compile_id="0/0", status="ok", stages=stages,
                 phase_starts={}, kernels=0, fusion={})
    w.add_compile("0/0", {"graphs": ["0_0-inference"]})
    if shapes is not None:
        w.write_compile_shapes("0/0", shapes)
    w.finish(schema.STATUS_OK)
    return root


def test_a_repeated_snapshot_is_stored_once_and_read_with_its_own_changes(tmp_path: Path) -> None:
    root = _trace(tmp_path / "t", [NODES_A, NODES_B, NODES_A])
    files = sorted(p.name for p in (root / "graphs" / "0_0-inference" / "stages").iterdir())
    assert files == ["000-stage0.json.gz", "001-stage1.json.gz"]  # stage 2 repeats stage 0
    t = Trace(root)
    g = t.graph("0_0-inference")
    assert [s.file for s in g.stages] == ["stages/000-stage0.json", "stages/001-stage1.json",
                                          "stages/000-stage0.json"]
    assert not t.problems
    # the graph is read once for both stages; each stage has its own changes
    assert g.stage_graph(2) is g.stage_graph(0)
    assert [n.name for n in g.stage_graph(2).nodes] == ["x", "relu"]
    assert g.stage_changes(g.stages[0]) == {"added": ["relu", "x"], "removed": [], "changed": []}
    assert g.stage_changes(g.stages[2]) == {"added": [], "removed": ["neg"], "changed": []}
    d = stage_diff(g, g.stages[1], g.stages[2], g.stage_graph(1), g.stage_graph(2))
    assert d.removed == ["neg"] and d.added == []
    # a stage is found by the file name it would have had
    assert g.find_stage("002-stage2") is g.stages[2]
    assert g.find_stage("000-stage0") is g.stages[0]


def test_without_dedup_every_snapshot_has_its_file(tmp_path: Path) -> None:
    root = _trace(tmp_path / "t", [NODES_A, NODES_B, NODES_A], dedup=False)
    files = sorted(p.name for p in (root / "graphs" / "0_0-inference" / "stages").iterdir())
    assert files == ["000-stage0.json.gz", "001-stage1.json.gz", "002-stage2.json.gz"]
    g = Trace(root).graph("0_0-inference")
    assert g.stage_changes(g.stages[2]) == {"added": [], "removed": ["neg"], "changed": []}


def test_a_shared_file_without_changes_of_its_own_changed_nothing(tmp_path: Path) -> None:
    """An imported log names the previous file for an unchanged graph, with no changes in its
    entry: the file's changes are the first stage's, not this one's (they were shown as this
    stage's before)."""
    root = _trace(tmp_path / "t", [NODES_A, NODES_B, NODES_B], entry_changes=False)
    g = Trace(root).graph("0_0-inference")
    assert g.stages[2].file == g.stages[1].file
    assert g.stage_changes(g.stages[1])["added"] == ["neg"]
    assert g.stage_changes(g.stages[2]) == {"added": [], "removed": [], "changed": []}


def _edit_meta(root: Path, edit) -> None:  # type: ignore[no-untyped-def]
    path = root / "graphs" / "0_0-inference" / "meta.json"
    meta = json.loads(path.read_text())
    edit(meta["stages"])
    path.write_text(json.dumps(meta))


def test_a_reference_out_of_the_trace_or_to_nothing_is_a_problem(tmp_path: Path) -> None:
    root = _trace(tmp_path / "t", [NODES_A, NODES_B, NODES_A])
    (tmp_path / "outside.json").write_text(json.dumps({"nodes": NODES_B}))

    def hostile(stages: list[dict]) -> None:
        stages[1]["file"] = "../../../outside.json"
        stages[2]["file"] = "stages/999-gone.json"
    _edit_meta(root, hostile)
    t = Trace(root)
    g = t.graph("0_0-inference")
    assert g.stage_graph(1) is None and g.stage_graph(2) is None
    assert g.stage_graph(0) is not None  # the rest still reads
    problems = [str(p) for p in t.problems]
    assert any("outside.json" in p for p in problems), problems
    assert any("999-gone.json" in p and "missing" in p for p in problems), problems


def test_capture_entries_with_wrong_types_are_dropped(tmp_path: Path) -> None:
    root = _trace(tmp_path / "t", [NODES_A, NODES_B, NODES_A])

    def hostile(stages: list[dict]) -> None:
        stages[2]["changes"] = {"added": [1, {"x": 2}], "removed": "neg"}
    _edit_meta(root, hostile)
    t = Trace(root)
    g = t.graph("0_0-inference")
    # the wrongly typed changes are reported and dropped: the stage reads as changing nothing
    assert g.stage_changes(g.stages[2]) == {"added": [], "removed": [], "changed": []}
    assert t.problems


def _shapes() -> dict:
    guard = {"kind": "TENSOR_MATCH", "source": "L['x']", "code": "check(x)", "expr": None,
             "user_line": {"file": "m.py", "line": 3, "fn": "f", "code": "y = x"}}
    return {"symbols": [{"name": "s0", "source": "L['x'].size()[0]", "sources": [],
                         "kind": "backed", "hint": 4, "user_line": None}],
            "guards": [guard] * 5 + [{**guard, "kind": "SHAPE_ENV", "expr": "s0 > 1"}],
            "specializations": [], "guard_tree": True, "recompile": None, "cut": 0}


def test_info_reads_the_brief_of_a_compiles_shapes(tmp_path: Path) -> None:
    root = _trace(tmp_path / "t", [NODES_A], shapes=_shapes())
    brief = json.loads((root / "compiles" / "0_0.shapes-brief.json").read_text())
    assert "guards" not in brief and brief["guard_counts"] == {"kept": 6, "shape": 1}
    with_brief = compile_dynamic(Trace(root), "0/0")
    assert with_brief["guards"] == {"count": 6, "shape": 1, "kept": 6}
    assert [s["name"] for s in with_brief["symbols"]] == ["s0"]
    # a trace made before the brief: the same answer, from the whole file (its guards counted,
    # not read one by one), whether or not the whole shapes were read before
    (root / "compiles" / "0_0.shapes-brief.json").unlink()
    assert compile_dynamic(Trace(root), "0/0") == with_brief
    t = Trace(root)
    assert len(t.compile_shapes("0/0")["guards"]) == 6
    assert compile_dynamic(t, "0/0") == with_brief
    # a wrongly typed user line of a symbol is cleaned on that path too
    shapes = _shapes()
    shapes["symbols"][0]["user_line"] = {"file": "m.py", "line": "three"}
    (root / "compiles" / "0_0.shapes.json").write_text(json.dumps(shapes))
    assert Trace(root).compile_shapes_brief("0/0")["symbols"][0]["user_line"] is None
    assert Trace(root).compile_shapes("0/0")["symbols"][0]["user_line"] is None
