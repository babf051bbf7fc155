"""Two more real traces for the TUI tests (``open_ui`` and ``UI`` are in ``tests/tui/pilot.py``).

``autotune_trace`` is compiled once per session with ``max_autotune`` (on CPU the C++ GEMM
template is tuned only for frozen weights, hence ``freezing``). ``crashed_trace`` is a copy of a
real trace made to look like its capturing process died during lowering: a dead pid in a
manifest that still says ``running`` and no generated code — what a segfault leaves behind.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import made_once, pythonpath

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def autotune_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Traced once per test run (``made_once``: test_screens and test_model may run on two
    xdist workers)."""
    def build(out: Path) -> None:
        env = dict(os.environ, PYTHONPATH=pythonpath())
        cmd = [sys.executable, "-m", "tuidebug.cli", "trace", "-o", str(out),
               "--set", "max_autotune=true", "--set", "freezing=true",
               "--set", "max_autotune_gemm_backends=CPP,ATEN", str(ROOT / "examples" / "mlp.py")]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        if not (out / "manifest.json").exists():
            raise RuntimeError("tracing with max_autotune wrote no trace:\n"
                               f"{proc.stdout}\n{proc.stderr}")
    return made_once(tmp_path_factory, "autotune", build)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def crashed_trace(mlp_trace: Path, copy_trace) -> Path:
    path = copy_trace(mlp_trace, "crashed")
    manifest = json.loads((path / "manifest.json").read_text())
    manifest.update(status="running", phase="lowering", finished_at=None, error=None,
                    pid=_dead_pid())
    import socket

    manifest["host"] = socket.gethostname()
    for g in manifest["graphs"]:
        g["status"] = "running"
        shutil.rmtree(path / "graphs" / g["id"] / "code", ignore_errors=True)
    (path / "manifest.json").write_text(json.dumps(manifest))
    return path
