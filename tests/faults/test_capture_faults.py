"""Faults during capture: killed processes, raising and exiting scripts, threads, bad disks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, ROOT, pythonpath
from tests.faults.conftest import Case, all_files_parse
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.summary import trace_summary


def trace(out: Path, script: Path, *args: str, env: dict[str, str] | None = None,
          preexec=None) -> subprocess.CompletedProcess[str]:
    e = dict(os.environ, PYTHONPATH=pythonpath(), **(env or {}))
    return subprocess.run([sys.executable, "-m", "tuidebug.cli", "trace", "-o", str(out),
                           str(script), *args], capture_output=True, text=True, env=e,
                          timeout=600, preexec_fn=preexec)


def one_error_line(p: subprocess.CompletedProcess[str]) -> str:
    lines = [l for l in p.stderr.splitlines() if l.startswith("tuidebug: error:")]
    assert len(lines) == 1, p.stderr[-3000:]
    return lines[0]


@pytest.mark.slow  # compiles
@pytest.mark.parametrize("phase", ["dynamo", "codegen", "kernel_compile"])
def test_sigkill_during_capture(phase: str, tmp_path: Path, case: Case) -> None:
    out = tmp_path / "t"
    p = trace(out, EXAMPLES / "mlp.py", env={"TUIDEBUG_TESTING_KILL_AT_PHASE": phase})
    assert p.returncode == -signal.SIGKILL  # the script's process died: so does the trace, as
    assert "SIGKILL" in one_error_line(p)  # the script untraced would have
    case.survived = True
    t = Trace(out)
    assert t.status == "crashed" and t.phase == phase
    assert all_files_parse(out) == []
    s = trace_summary(t)
    assert s["error"]["phase"] == phase
    if phase != "dynamo":
        (g,) = t.graphs
        assert g.find_stage("dynamo") is not None and g.stage_graph(g.find_stage("dynamo"))
    if phase == "kernel_compile":
        assert t.graphs[0].kernels and t.graphs[0].ir_post  # code written before compiling it
    case.data_lost = False


def _script(tmp_path: Path, body: str) -> Path:
    s = tmp_path / "script.py"
    s.write_text("import torch\n" + body)
    return s


@pytest.mark.slow  # compiles
def test_script_raises_after_compiling(tmp_path: Path, case: Case) -> None:
    s = _script(tmp_path, "f = torch.compile(lambda x: x.sin() + 1)\nf(torch.randn(4))\n"
                          "raise RuntimeError('user bug after compile')\n")
    p = trace(tmp_path / "t", s)
    assert p.returncode == 1  # the script's own code; tuidebug's word is a note
    assert "[tuidebug] the script raised after compiling" in p.stderr, p.stderr[-3000:]
    assert "user bug after compile" in p.stderr
    case.survived = True
    t = Trace(tmp_path / "t")
    assert t.status == "ok" and t.manifest.script_error.after_compiling is True
    assert t.graphs[0].kernels and all_files_parse(tmp_path / "t") == []
    case.data_lost = False


@pytest.mark.slow  # compiles
def test_script_calls_sys_exit(tmp_path: Path, case: Case) -> None:
    s = _script(tmp_path, "import sys\nf = torch.compile(lambda x: x.cos() * 2)\n"
                          "f(torch.randn(4))\nsys.exit(3)\n")
    p = trace(tmp_path / "t", s)
    assert p.returncode == 3  # the script's own code (main: 1)
    assert "[tuidebug] the script exited with code 3" in p.stderr, p.stderr[-3000:]
    case.survived = True
    t = Trace(tmp_path / "t")
    assert t.status == "ok" and t.manifest.script_exit_code == 3 and t.graphs[0].kernels
    case.data_lost = False


@pytest.mark.slow  # compiles
def test_threads_and_two_compiles(tmp_path: Path, case: Case) -> None:
    s = _script(tmp_path, """
import threading
def a(x): return (x * 3).relu()
def b(x): return x.exp().sum(0)
results = {}
def run(name, fn):
    results[name] = torch.compile(fn)(torch.randn(8, 8))
threads = [threading.Thread(target=run, args=(n, f)) for n, f in (("a", a), ("b", b))]
for t in threads: t.start()
for t in threads: t.join()
assert set(results) == {"a", "b"}
""")
    p = trace(tmp_path / "t", s)
    assert p.returncode == 0, p.stderr[-3000:]
    case.survived = True
    t = Trace(tmp_path / "t")
    assert t.status == "ok" and len(t.graphs) == 2
    assert all(g.status == "ok" and g.kernels for g in t.graphs)
    assert all_files_parse(tmp_path / "t") == []
    case.data_lost = False


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 96 KiB tmpfs: the trace fills it up while Inductor's own cache (elsewhere) does not."""
    mnt = tmp_path / "small-disk"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


@pytest.mark.slow  # compiles
def test_full_disk_during_capture(small_disk: Path, case: Case) -> None:
    out = small_disk / "t"
    p = trace(out, EXAMPLES / "mlp.py")
    assert p.returncode == 0, p.stderr[-2000:]  # the script's own: it ran to the end
    assert "could not be written completely" in one_error_line(p)
    assert "No space left on device" in p.stderr
    assert "mlp: out" in p.stdout  # the user's program still ran to the end
    case.survived = True
    t = Trace(out)  # what was written before the disk filled up is intact
    assert t.manifest and all_files_parse(out) == []
    assert not list(out.rglob("*.tmp"))  # no half-written temporaries left behind
    case.data_lost = False


@pytest.mark.slow  # compiles
def test_trace_dir_with_spaces_and_unicode(tmp_path: Path, case: Case) -> None:
    out = tmp_path / "my träce dir ✓"
    s = _script(tmp_path, "torch.compile(lambda x: x.tanh())(torch.randn(4))\n")
    p = trace(out, s)
    assert p.returncode == 0, p.stderr[-2000:]
    case.survived = True
    info = subprocess.run([sys.executable, "-m", "tuidebug.cli", "info", "--json", str(out)],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=pythonpath()))
    assert info.returncode == 0 and '"status": "ok"' in info.stdout
    case.data_lost = False


def test_read_only_output_directory(tmp_path: Path, case: Case) -> None:
    target = tmp_path / "file-not-dir"
    target.write_text("x")
    p = trace(target / "t", _script(tmp_path, "pass\n"))
    assert p.returncode == 2 and "cannot write the trace" in one_error_line(p)
    case.survived = True
    assert target.read_text() == "x"
    case.data_lost = False


def test_compile_that_raises(failing_trace: Path, case: Case) -> None:
    """A C++ compile error planted with inject_relu_bug_TESTING_ONLY: the trace says failed, with
    the phase and traceback, and holds everything up to the failure."""
    t = Trace(failing_trace)
    assert t.status == "failed" and t.error is not None and t.error.phase == "kernel_compile"
    case.survived = True
    (g,) = t.graphs
    assert g.snapshots() and g.ir_post and g.kernels and g.error
    assert all_files_parse(failing_trace) == []
    case.data_lost = False
