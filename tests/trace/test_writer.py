"""The one write path: what TraceWriter and GraphWriter write is what the reader reads back,
under the names docs/trace-format.md gives; a disk that refuses a write stops the writing with
one warning and leaves every earlier file whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuidebug.trace.format import compressed, schema
from tuidebug.trace.format.error_record import ErrorRecord
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.writer import TraceWriter

WRAPPER = '''
cpp_fused_relu_0 = async_compile.cpp_pybinding(['float*'], r\'\'\'
extern "C" void kernel(float* out_ptr0) { out_ptr0[0] = 1.0f; }
\'\'\')

def call(args):
    # Topologically Sorted Source Nodes: [relu], Original ATen: [aten.relu]
    cpp_fused_relu_0(buf0)
'''


def _graph_trace(root: Path) -> TraceWriter:
    w = TraceWriter(root, command=["test"])
    w.add_graph("0_0-inference", kind="inference", compile_id="0/0")
    g = w.graph("0_0-inference")
    nodes = [{"name": "x", "op": "placeholder", "target": "x", "args": [], "kwargs": {}},
             {"name": "relu", "op": "call_function", "target": "aten.relu", "args": ["x"],
              "kwargs": {}}]
    stages = []
    for i, name in enumerate(["dynamo", "post_grad/x"]):
        fname = g.write_stage(i, name, {"graph": g.graph_id, "stage": name, "nodes": nodes,
                                        "changes": {"added": [], "removed": [], "changed": []}})
        stages.append({"index": i, "name": name, "kind": "stage", "subsystem": None,
                       "duration_s": 0.5, "changed": i == 0, "file": fname, "nodes": 2,
                       "counts": {"added": 0, "removed": 0, "changed": 0}})
    g.write_ir("post", [{"name": "buf0", "members": ["buf0"]}], "buf0: SchedulerNode\n")
    g.write_fusion([{"action": "rejected", "node1": "buf0", "node2": "buf1", "reason": "ü"}])
    index = g.write_output_code(WRAPPER)
    g.append_autotune({"op": "mm", "inputs": [], "choices": [], "winner": None})
    g.write_timings({"cpp_fused_relu_0": {"compile_s": 0.25}}, {})
    g.write_error(ErrorRecord(phase="codegen", type="E", message="m", traceback=""))
    g.write_runnable("print('repro')\n")
    g.write_meta(kind="inference", compile_id="0/0", status="failed", stages=stages,
                 phase_starts={"dynamo": 0.0, "codegen": 1.0}, end=3.0, kernels=len(index),
                 fusion={"fused": 0, "rejected": 1}, cudagraphs={"enabled": False})
    w.add_compile("0/0", {"graphs": ["0_0-inference"]})
    w.write_compile("0/0", {"graphs": ["0_0-inference"], "guards": "g"})
    w.write_config({"values": {"a": 1}, "changed": {}, "set_by_tuidebug": []})
    w.write_runtime({"checks": {}})
    w.finish(schema.STATUS_FAILED)
    return w


def test_graph_writer_files_read_back(tmp_path: Path) -> None:
    _graph_trace(tmp_path / "t")
    t = Trace(tmp_path / "t")
    assert not t.problems
    g = t.graph("0_0-inference")
    assert [s.file for s in g.stages] == ["stages/000-dynamo.json", "stages/001-post_grad_x.json"]
    assert [n.name for n in g.stage_graph(1).nodes] == ["x", "relu"]
    written = json.loads((g.dir / "meta.json").read_text())
    assert list(written) == ["id", "kind", "compile_id", "status", "stages", "phase_times_s",
                             "phase_starts_s", "kernels", "fusion", "cudagraphs"]
    assert g.meta.phase_times_s == {"dynamo": 1.0, "codegen": 2.0}  # end closes the last
    assert g.meta.extra == {} and g.meta.kernels == 1 and g.meta.id == "0_0-inference"
    assert g.ir_post["graph"] == "0_0-inference" and g.ir_text("post") == "buf0: SchedulerNode\n"
    assert g.fusion == [{"action": "rejected", "node1": "buf0", "node2": "buf1", "reason": "ü"}]
    assert [k.name for k in g.kernels] == ["cpp_fused_relu_0"]
    assert "extern" in g.code(g.kernel("cpp_fused_relu_0").file)
    assert g.autotune[0]["op"] == "mm"
    assert g.timings["cpp_fused_relu_0"]["compile_s"] == 0.25
    assert g.error is not None and g.error.phase == "codegen" and g.error.graph is None
    assert (g.dir / "repro" / "fx_graph_runnable.py").read_text() == "print('repro')\n"
    assert t.compiles["0/0"]["guards"] == "g"
    assert json.loads(compressed.read_bytes(tmp_path / "t" / "compiles" / "0_0.json", 1 << 20)
                      )["id"] == "0/0"
    assert t.config["values"] == {"a": 1} and t.runtime == {"checks": {}}
    # atomic writes leave no temporary files behind
    assert not [p for p in (tmp_path / "t").rglob(".*.tmp")]


def test_refused_write_warns_once_and_stops(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = TraceWriter(tmp_path / "t")
    w.add_graph("g", kind="inference", compile_id="0/0")
    g = w.graph("g")
    g.write_error(ErrorRecord(phase="dynamo"))
    (g.dir / "repro").write_text("a file where the writer needs a directory")
    g.write_runnable("x")  # refused (even for root): the directory cannot be made
    g.write_error(ErrorRecord(phase="codegen"))  # skipped: writing stopped at the first refusal
    assert w.write_error is not None and "fx_graph_runnable.py" in w.write_error
    assert capsys.readouterr().err.count("cannot write the trace") == 1
    assert json.loads((g.dir / "error.json").read_text())["phase"] == "dynamo"


def test_a_snapshot_is_written_as_given_and_its_nodes_keyed_once(tmp_path: Path) -> None:
    """``write_stage`` serialises the nodes once, for the dedup key and for the file: the file
    reads back as the data given (a tuple as a list, non-ASCII kept), a second snapshot with the
    same nodes and other changes names the first file, one with other nodes gets its own."""
    w = TraceWriter(tmp_path / "t", command=["test"])
    g = w.graph("0_0-inference")
    nodes = [{"name": "x", "op": "placeholder", "target": "x", "args": (), "kwargs": {},
              "stack": "café"}]
    data = {"format": "tuidebug.graph/1", "graph": g.graph_id, "stage": "dynamo",
            "nodes": nodes, "changes": {"added": ["x"], "removed": [], "changed": []}}
    seen: dict[str, str] = {}
    first = g.write_stage(0, "dynamo", data, seen=seen)
    raw = compressed.read_bytes(g.dir / first, 1 << 20).decode("utf-8")
    assert json.loads(raw) == {**data, "nodes": [{**nodes[0], "args": []}]}
    assert "café" in raw and raw.endswith("}\n") and ": " not in raw
    again = g.write_stage(1, "pre_grad", {**data, "stage": "pre_grad", "changes": {}}, seen=seen)
    assert again == first and not list((g.dir / "stages").glob("001-pre_grad.json*"))
    other = g.write_stage(2, "post_grad", {**data, "nodes": []}, seen=seen)
    assert other == "stages/002-post_grad.json"

    def back(name: str):  # type: ignore[no-untyped-def]
        return json.loads(compressed.read_bytes(g.dir / name, 1 << 20))
    assert back(other)["nodes"] == []
    assert back(g.write_stage(3, "bare", {"nodes": [1]})) == {"nodes": [1]}
    assert back(g.write_stage(4, "none", {"stage": "s"})) == {"stage": "s"}


def test_after_a_refused_write_nothing_is_encoded_or_kept(tmp_path: Path) -> None:
    """Once the disk refused a write, capture has stopped: a later write built its whole JSON
    text (and compressed it) in the user's process for nothing. Now nothing of it is built,
    and nothing of it kept for a reader in this process (an earlier document of the same path
    is forgotten: read from disk, where the earlier file stays whole)."""
    from tuidebug.trace.format.written import Written

    class Counted:
        """Encoded through the writer's fallback (``repr``): counts its encodings."""
        times = 0

        def __repr__(self) -> str:
            Counted.times += 1
            return "counted"

    kept = Written()
    w = TraceWriter(tmp_path / "t", command=["test"], written=kept)
    w.write_compile("0/0", {"graphs": [], "x": Counted()})
    assert Counted.times == 1 and kept.document("compiles/0_0.json") is not None
    (tmp_path / "t" / "sub").write_text("a file where the writer needs a directory")
    w.write_json(w.path("sub", "a.json"), {"x": Counted()})  # refused by the real disk
    assert w.write_error is not None and "a.json" in w.write_error
    assert Counted.times == 2 and kept.document("sub/a.json") is None
    writes = [lambda: w.write_compile("0/1", {"graphs": [], "x": Counted()}),
              lambda: w.write_compile("0/0", {"graphs": [], "x": Counted()}),
              lambda: w.write_json(w.path("config.json"), {"x": Counted()}, compact=True),
              lambda: w.write_text(w.path("notes.txt"), "text", packed=True),
              w.flush]
    for write in writes:
        write()
    assert Counted.times == 2, Counted.times  # none of the five writes was encoded
    for rel in ("compiles/0_0.json", "compiles/0_1.json", "config.json", "notes.txt",
                schema.MANIFEST):
        assert kept.document(rel) is None and kept.file(rel) is None, rel
    # the disk holds what was written before the refusal
    assert json.loads(compressed.read_bytes(tmp_path / "t" / "compiles" / "0_0.json", 1 << 20)
                      )["x"] == "counted"


def test_a_document_over_the_json_cap_is_not_kept_in_memory(tmp_path: Path) -> None:
    """Every JSON document an import wrote was kept in memory for the process's life, one over
    the reader's cap too (64 MiB of text), which no reader takes from memory: now only its
    size, head and tail are kept, plain or compressed, and a reader given what was written
    refuses it from its file as a reader of the files does."""
    from tuidebug.trace.format import safefile
    from tuidebug.trace.format.written import Written

    kept = Written()
    root = tmp_path / "t"
    w = TraceWriter(root, command=["test"], written=kept)
    w.write_json(w.path(schema.CONFIG), {"values": {"pad": "x" * safefile.MAX_JSON_BYTES}})
    w.write_compile("0/0", {"graphs": [], "pad": "y" * safefile.MAX_JSON_BYTES})
    w.add_compile("0/0", {"graphs": []})
    w.write_runtime({"checks": {}})  # a document under the cap is kept
    w.finish("ok")
    for rel in (schema.CONFIG, "compiles/0_0.json"):
        f = kept.file(rel)
        assert f is not None and f.size > safefile.MAX_JSON_BYTES, (rel, f)
        assert kept.document(rel) is None, rel
    assert kept.document(schema.RUNTIME) is not None
    for t in (Trace(root, written=kept), Trace(root)):
        assert t.config == {} and t.runtime == {"checks": {}}
        assert "pad" not in (t.compiles.get("0/0") or {})
        assert sorted(p.file for p in t.problems if "-byte limit for this file" in p.message
                      ) == ["compiles/0_0.json", schema.CONFIG], t.problems
