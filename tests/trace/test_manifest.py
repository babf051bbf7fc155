"""``manifest.json`` as one typed record (``trace/format/manifest.py``), read only through the
safe reader: real manifests (written by the real compiler, committed) and hostile ones."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tuidebug.errors import TraceError
from tuidebug.trace.format import schema
from tuidebug.trace.format.manifest import GraphEntry, Manifest, find_manifest, read_manifest
from tuidebug.trace.format.reader import Trace

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize("name", ["cuda_mlp_autotune", "cuda_fail_runtime"])
def test_a_real_manifest_reads_as_typed_fields(name: str) -> None:
    root = FIXTURES / name
    raw = json.loads((root / schema.MANIFEST).read_text())
    m = read_manifest(root)
    assert m == Trace(root).manifest  # one reading path: the reader's is the same record
    assert m.format == schema.FORMAT_NAME and m.status == raw["status"]
    assert m.command == raw["command"] and m.command[:2] == ["tuidebug", "trace"]
    assert m.versions["torch"] == raw["versions"]["torch"]
    assert m.graphs and [g.id for g in m.graphs] == [g["id"] for g in raw["graphs"]]
    assert all(isinstance(g, GraphEntry) for g in m.graphs)
    assert [c["id"] for c in m.compiles] == [c["id"] for c in raw["compiles"]]
    out = m.to_json()
    typed = {"format", "status", "phase", "command", "cwd", "pid", "host", "versions", "error",
             "graphs", "compiles", "warnings", "config_overrides", "made_by"}
    checked = typed & set(raw)
    assert len(checked) >= 10
    assert {k: out[k] for k in checked} == {k: raw[k] for k in checked}
    assert Manifest.from_json(out) == m  # a round trip keeps every field (extra keys too)


def test_fields_of_the_wrong_type_read_as_absent() -> None:
    m = Manifest.from_json({
        "format": schema.FORMAT_NAME, "format_version": True, "pid": "12", "host": 7,
        "command": ["tuidebug", 3], "graphs": [{"id": 3}, {"id": "a", "kind": "forward"}, "x"],
        "warnings": "not a list", "accuracy_tol": -1, "profile_runs": 10 ** 9,
        "config_overrides": ["size_asserts"], "imported_from": "log", "later_field": {"x": 1}})
    assert m.format == schema.FORMAT_NAME
    assert (m.format_version, m.pid, m.host, m.command) == (None, None, None, None)
    assert m.graphs == [GraphEntry("a", "forward")]
    assert (m.warnings, m.accuracy_tol, m.profile_runs) == ([], None, None)
    assert (m.config_overrides, m.imported_from) == ({}, None)
    assert m.extra == {"later_field": {"x": 1}}  # kept, and written back
    assert m.to_json()["later_field"] == {"x": 1}
    assert Manifest.from_json([1, 2]) == Manifest()  # not an object: nothing known


def test_what_cannot_be_read_says_why(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such trace"):
        read_manifest(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceError, match=r"not a tuidebug trace \(no manifest.json\)"):
        read_manifest(tmp_path / "empty")
    assert find_manifest(tmp_path / "empty") is None
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / schema.MANIFEST).write_text("[1, 2]")
    with pytest.raises(TraceError, match="manifest.json"):
        read_manifest(bad)
    (bad / schema.MANIFEST).write_text('{"status": "ok", ')  # cut short while written
    with pytest.raises(TraceError, match="corrupt JSON"):
        read_manifest(bad)


def test_a_manifest_leading_out_of_the_trace_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "secret.json"
    outside.write_text(json.dumps({"format": schema.FORMAT_NAME, "status": "ok"}))
    trace = tmp_path / "trace"
    trace.mkdir()
    os.symlink(outside, trace / schema.MANIFEST)
    with pytest.raises(TraceError, match="leads out of the trace"):
        read_manifest(trace)
    fifo = tmp_path / "fifo-trace"
    fifo.mkdir()
    os.mkfifo(fifo / schema.MANIFEST)  # would block a plain open(): refused, not read
    with pytest.raises(TraceError, match="manifest.json"):
        read_manifest(fifo)


def test_the_writer_tells_each_new_phase_after_recording_it(tmp_path: Path) -> None:
    """A recompile job hears phases through ``on_phase`` (it used to replace ``set_phase``)."""
    from tuidebug.trace.format.writer import TraceWriter

    w = TraceWriter(tmp_path / "t", command=["tuidebug", "trace", "x.py"])
    heard: list[tuple[str, str | None, str | None]] = []
    w.on_phase = lambda phase, graph: heard.append(
        (phase, graph, read_manifest(tmp_path / "t").phase))
    for phase, graph in [("dynamo", None), ("dynamo", None), ("aot", "0_0"), ("aot", "0_0"),
                         ("aot", "0_1")]:
        w.set_phase(phase, graph)
    # once per change, each after the manifest on disk says it
    assert heard == [("dynamo", None, "dynamo"), ("aot", "0_0", "aot"), ("aot", "0_1", "aot")]
    assert read_manifest(tmp_path / "t").current_graph == "0_1"


def test_the_scripts_error_is_a_typed_record() -> None:
    """``script_error`` (the traced script raised) reads as a ``ScriptError``: fields of the
    wrong type read as absent, an empty object as none, and it is written back as read."""
    from tuidebug.trace.format.manifest import Manifest, ScriptError

    m = Manifest.from_json({"script_error": {"type": "ValueError", "message": "bad",
                                             "traceback": "Traceback…", "after_compiling": True}})
    assert m.script_error == ScriptError("ValueError", "bad", "Traceback…", True)
    assert Manifest.from_json(m.to_json()).script_error == m.script_error
    odd = Manifest.from_json({"script_error": {"type": 3, "message": ["x"],
                                               "after_compiling": "yes"}}).script_error
    assert odd == ScriptError(None, None, None, None)
    assert Manifest.from_json({"script_error": {}}).script_error is None
    assert Manifest.from_json({"script_error": "boom"}).script_error is None
    assert Manifest.from_json({}).to_json()["script_error"] is None
