"""The reader opens damaged and crashed traces, reports the damage by file name, never imports
torch, and never executes or unpickles anything from a trace."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, plain, pythonpath
from tuidebug.trace.format.reader import Trace, TraceError
from tuidebug.trace.queries.summary import trace_summary


def test_truncated_stage_is_reported_and_rest_opens(mlp_trace: Path, copy_trace) -> None:
    t0 = copy_trace(mlp_trace)
    g = Trace(t0).graphs[0]
    snap = g.snapshots()[-1]
    path = plain(g.dir / snap.file)
    path.write_bytes(path.read_bytes()[:100])
    t = Trace(t0)
    g = t.graphs[0]
    assert g.stage_graph(g.snapshots()[-1]) is None
    assert g.stage_graph(g.snapshots()[0]) is not None
    assert any(p.file == f"graphs/{g.id}/{snap.file}" and "corrupt JSON" in p.message
               for p in t.problems)
    assert trace_summary(t)["graphs"][0]["kernels"] > 0


def test_missing_meta_and_future_version(mlp_trace: Path, copy_trace) -> None:
    t0 = copy_trace(mlp_trace)
    gid = Trace(t0).graphs[0].id
    (t0 / "graphs" / gid / "meta.json").unlink()
    m = json.loads((t0 / "manifest.json").read_text())
    m["format_version"] = 99
    (t0 / "manifest.json").write_text(json.dumps(m))
    t = Trace(t0)
    assert t.graphs[0].stages == []
    msgs = [str(p) for p in t.problems]
    assert any("meta.json: missing" in x for x in msgs), msgs
    assert any("format version 99" in x for x in msgs), msgs
    assert t.graphs[0].kernels  # the rest is usable


def test_binary_and_huge_code_files(mlp_trace: Path, copy_trace) -> None:
    t0 = copy_trace(mlp_trace)
    g = Trace(t0).graphs[0]
    k = next(k for k in g.kernels if k.file)
    (g.dir / k.file).write_bytes(b"\x00\x01garbage" * 100)
    (g.dir / "code" / "wrapper.py").write_text("x = 1\n" * 2_000_000)  # 12 MB
    t = Trace(t0)
    g = t.graphs[0]
    assert g.code(k.file).startswith("<binary file")
    w = g.wrapper_code()
    assert w is not None and "truncated" in w[-200:]
    assert any("binary content" in str(p) for p in t.problems)


def test_code_path_cannot_escape_the_trace(mlp_trace: Path) -> None:
    g = Trace(mlp_trace).graphs[0]
    assert g.code("../../../../etc/passwd") is None


def test_crashed_capture_is_reported(mlp_trace: Path, copy_trace) -> None:
    t0 = copy_trace(mlp_trace)
    m = json.loads((t0 / "manifest.json").read_text())
    m.update(status="running", phase="codegen", pid=2**22 + 12345)
    (t0 / "manifest.json").write_text(json.dumps(m))
    t = Trace(t0)
    assert t.status == "crashed"
    s = trace_summary(t)
    assert s["error"]["phase"] == "codegen" and "died" in s["error"]["message"]


def test_crash_before_compiling_started(mlp_trace: Path, copy_trace) -> None:
    t0 = copy_trace(mlp_trace)
    m = json.loads((t0 / "manifest.json").read_text())
    m.update(status="running", phase=None, pid=2**22 + 12345)
    (t0 / "manifest.json").write_text(json.dumps(m))
    s = trace_summary(Trace(t0))
    assert s["error"]["message"] == "the capturing process died before compiling started"
    env = dict(os.environ, PYTHONPATH=pythonpath())
    info = subprocess.run([sys.executable, "-m", "tuidebug.cli", "info", str(t0)],
                          capture_output=True, text=True, env=env)
    assert "None" not in info.stdout
    assert re.search(r"error\s+before compiling started", info.stdout), info.stdout  # label, message


def test_trace_files_get_the_usual_permissions(mlp_trace: Path, tmp_path: Path) -> None:
    """Files of a trace are made as ``open()`` makes files (0o666 less the umask), not 0o600
    (the temporary file's mode), so that others can read a shared trace."""
    from tuidebug.trace.format import atomic

    umask = os.umask(0)
    os.umask(umask)
    expected = 0o666 & ~umask
    atomic.write_text(tmp_path / "a.txt", "x")
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == expected
    files = [p for p in mlp_trace.rglob("*") if p.is_file()]  # written by a child process
    assert files and {p.stat().st_mode & 0o777 for p in files} == {expected}


def test_not_a_trace(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="not a tuidebug trace"):
        Trace(tmp_path)
    with pytest.raises(TraceError, match="no such trace"):
        Trace(tmp_path / "nope")


def test_reading_never_imports_torch_or_runs_payloads(mlp_trace: Path, copy_trace,
                                                      tmp_path: Path) -> None:
    t0 = copy_trace(mlp_trace)
    marker = tmp_path / "PWNED"
    payload = f"__import__('pathlib').Path({str(marker)!r}).write_text('x')"
    import pickle

    class Evil:
        def __reduce__(self):
            return (eval, (payload,))

    (t0 / "runtime.json").write_bytes(pickle.dumps(Evil()))
    g = Trace(t0).graphs[0]
    (g.dir / "provenance.json").write_text(json.dumps({"kernels": {"x": {"source": [
        {"file": payload, "line": 1, "code": payload}]}}}))
    code = f"""
import sys
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.summary import trace_summary
t = Trace({str(t0)!r})
s = trace_summary(t)
for g in t.graphs:
    for st in g.snapshots():
        g.stage_graph(st)
    g.ir_post; g.fusion; g.kernels; g.provenance; g.autotune; g.wrapper_code()
print('torch' in sys.modules, len(s['problems']))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env=dict(os.environ, PYTHONPATH=pythonpath()))
    assert out.returncode == 0, out.stderr
    imported, problems = out.stdout.split()
    assert imported == "False"
    assert int(problems) >= 1  # the pickle in runtime.json is reported as corrupt JSON
    assert not marker.exists()
