"""The typed records of a graph's files (meta.json, code/kernels.json, error.json): what the
writer writes reads back as the same record; a damaged field reads as absent; unknown keys are
kept. Built with the torch-free writer, and read from the committed traces."""

from __future__ import annotations

import json
from pathlib import Path

from tuidebug.trace.format.error_record import ErrorRecord
from tuidebug.trace.format.graph_meta import FusionCounts, GraphMeta
from tuidebug.trace.format.kernel_entry import KernelEntry
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.writer import TraceWriter

WRAPPER = '''
cpp_fused_relu_0 = async_compile.cpp_pybinding(['float*'], r\'\'\'
extern "C" void kernel(float* x) { x[0] = 0; }
\'\'\')
def call(args):
    # Topologically Sorted Source Nodes: [mm], Original ATen: [aten.mm]
    extern_kernels.mm(a, b, out=buf0)
    cpp_fused_relu_0(buf0)
'''


def test_the_writer_and_the_reader_agree_on_every_record(tmp_path: Path) -> None:
    w = TraceWriter(tmp_path / "t", command=["x.py"])
    w.add_graph("g", kind="inference", compile_id="0/0")
    g = w.graph("g")
    index = g.write_output_code(WRAPPER)
    error = ErrorRecord(phase="codegen", type="E", message="m", traceback="tb", graph="g",
                        compile_id="0/0", extra={"log_line": 7})
    g.write_error(error)
    g.write_meta(kind="inference", compile_id="0/0", status="failed", stages=[],
                 phase_starts={"dynamo": 0.0}, end=1.0, kernels=len(index),
                 fusion={"fused": 2, "rejected": 1}, cudagraphs={"enabled": True, "skipped": []},
                 aot_id="0_inference")
    w.finish("failed", error)
    t = Trace(tmp_path / "t")
    (rec,) = t.graphs
    assert rec.kernels == index and [k.extern for k in index] == [False, True]
    assert rec.kernel("cpp_fused_relu_0") == index[0] and rec.kernel("nope") is None
    assert index[1].call == "extern_kernels.mm" and index[1].original_aten == ["aten.mm"]
    assert rec.error == error and t.error == error and t.manifest.error == error
    assert list(json.loads((rec.dir / "error.json").read_text())) == [
        "phase", "type", "message", "traceback", "graph", "compile_id", "log_line"]
    meta = rec.meta
    assert meta.fusion == FusionCounts(2, 1, True) and meta.kernels == 2
    assert meta.phase_times_s == {"dynamo": 1.0} and meta.extra == {"aot_id": "0_inference"}
    assert meta.cudagraphs is not None and meta.cudagraphs.enabled


def test_a_damaged_field_reads_as_absent_and_unknown_keys_are_kept() -> None:
    meta = GraphMeta.from_json({"kind": 3, "stages": "x", "phase_times_s": {"a": "1", "b": 2},
                                "fusion": {"fused": "many", "recorded": False}, "new": 1})
    assert meta.kind is None and meta.stages == [] and meta.phase_times_s == {"b": 2.0}
    assert meta.fusion == FusionCounts(None, None, False) and meta.extra == {"new": 1}
    assert meta.phase_starts_s is None and meta.cudagraphs is None
    k = KernelEntry.from_json({"name": "k", "kind": None, "handles": "h", "lines": True, "z": 1})
    assert (k.kind, k.handles, k.lines, k.extra) == (None, [], None, {"z": 1})
    assert ErrorRecord.from_json({}) is None and ErrorRecord.from_json([1]) is None
    e = ErrorRecord.from_json({"message": "m", "phase": 5, "extra_key": [1]})
    assert e is not None and e.phase is None and e.extra == {"extra_key": [1]}
    assert list(e.to_json()) == ["message", "phase", "extra_key"]  # the keys it was read with


def test_the_committed_traces_read_as_records(transformer_trace: Path,
                                              failing_trace: Path) -> None:
    checked = 0
    for g in Trace(transformer_trace).graphs:
        raw = json.loads((g.dir / "code" / "kernels.json").read_text())["kernels"]
        assert [k.to_json() for k in g.kernels] == raw  # written back as it was read
        assert g.meta.stages and g.meta.phase_starts_s and g.meta.extra == {}
        checked += 1
    assert checked == 2
    t = Trace(failing_trace)
    assert t.error is not None and t.error.graph is not None
    g = t.graph(t.error.graph)
    assert g.error is not None
    assert g.error.to_json() == json.loads((g.dir / "error.json").read_text())
