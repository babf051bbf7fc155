"""Shared fixtures: real traces, compiled once per test session and shared by every test.

Each fixture runs the real compiler (``tuidebug trace`` on a bundled example, in a child
process) — no mocks. Tests must not modify these traces; copy them first (``copy_trace``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

# ``open_ui`` (driving the TUI with Pilot) for the TUI tests and the faults suite alike
pytest_plugins = ["tests.tui.pilot"]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def pythonpath() -> str:
    """PYTHONPATH for child processes: this checkout first, then what the caller had."""
    extra = os.environ.get("PYTHONPATH")
    return str(ROOT) + (os.pathsep + extra if extra else "")


def digest(root: Path) -> dict[str, str]:
    """A sha256 per file under ``root``: equal before and after means not a byte changed."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def trace_example(out: Path, example: str, *args: str, extra: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``tuidebug trace`` on a bundled example; returns the finished process."""
    env = dict(os.environ, PYTHONPATH=pythonpath())
    cmd = [sys.executable, "-m", "tuidebug.cli", "trace", "-o", str(out), *(extra or []),
           str(EXAMPLES / example), *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)


def _make(tmp_path_factory: pytest.TempPathFactory, name: str, example: str, *args: str,
          extra: list[str] | None = None) -> Path:
    out = tmp_path_factory.mktemp("traces") / name
    proc = trace_example(out, example, *args, extra=extra)
    if not (out / "manifest.json").exists():
        raise RuntimeError(f"tracing {example} wrote no trace:\n{proc.stdout}\n{proc.stderr}")
    (out.parent / f"{name}.log").write_text(f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return out


@pytest.fixture(scope="session")
def transformer_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One transformer block trained for one step: forward and backward graphs."""
    return _make(tmp_path_factory, "transformer", "transformer_block.py")


@pytest.fixture(scope="session")
def mlp_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make(tmp_path_factory, "mlp", "mlp.py")


@pytest.fixture(scope="session")
def failing_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A compile that fails (C++ compile error planted with inject_relu_bug_TESTING_ONLY)."""
    return _make(tmp_path_factory, "failing", "failing_compile.py")


@pytest.fixture(scope="session")
def graph_break_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make(tmp_path_factory, "graph_break", "graph_break.py")


@pytest.fixture
def copy_trace(tmp_path: Path):
    """Copy a shared trace so that a test can damage or modify it."""
    def copy(src: Path, name: str = "copy") -> Path:
        dst = tmp_path / name
        shutil.copytree(src, dst)
        return dst
    return copy


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """GPU tests run only where CUDA is available (never in CI)."""
    gpu_items = [i for i in items if "gpu" in i.keywords]
    if not gpu_items:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in gpu_items:
        item.add_marker(skip)


# -- the faults summary: tests that take `case` record whether tuidebug survived and lost data --

_CASES: list["Case"] = []


@dataclass
class Case:
    name: str
    survived: bool = False
    data_lost: bool = True
    note: str = ""


@pytest.fixture
def case(request: pytest.FixtureRequest) -> Iterator[Case]:
    """A fault case. The test sets ``survived`` and ``data_lost`` as it checks them."""
    c = Case(request.node.name)
    _CASES.append(c)
    yield c


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _CASES:
        return
    tr = terminalreporter
    tr.section("faults summary")
    tr.write_line(f"{'case':60} {'survived':>9} {'data lost':>10}")
    for c in _CASES:
        tr.write_line(f"{c.name[:60]:60} {('yes' if c.survived else 'NO'):>9} "
                      f"{('YES' if c.data_lost else 'no'):>10}  {c.note}")
    survived = sum(c.survived for c in _CASES)
    lost = sum(c.data_lost for c in _CASES)
    tr.write_line(f"cases tried: {len(_CASES)}, survived: {survived}, data lost: {lost}")
