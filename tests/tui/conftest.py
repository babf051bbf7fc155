"""Helpers for driving the terminal UI with Pilot, and two more real traces.

``autotune_trace`` is compiled once per session with ``max_autotune`` (on CPU the C++ GEMM
template is tuned only for frozen weights, hence ``freezing``). ``crashed_trace`` is a copy of a
real trace made to look like its capturing process died during lowering: a dead pid in a
manifest that still says ``running`` and no generated code — what a segfault leaves behind.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import pythonpath

ROOT = Path(__file__).resolve().parents[2]
SIZE = (160, 45)


class UI:
    """What a person would see: the painted screen, and the lines of a text view."""

    def __init__(self, app: Any, pilot: Any) -> None:
        self.app = app
        self.pilot = pilot

    async def settle(self, rounds: int = 3) -> None:
        """Let messages, workers and repaints finish (workers may post more messages)."""
        for _ in range(rounds):
            await self.pilot.pause()
            await self.app.workers.wait_for_complete()
        await self.pilot.pause()
        await self.painted()

    async def painted(self, limit_s: float = 10.0) -> None:
        """Wait until the screen has no layout or repaint pending.

        Textual repaints on a timer (up to 1/60 s after the app goes idle), so an idle message
        queue does not yet mean the screen shows the new state; on a loaded machine the gap is
        large enough for an assertion on the painted text to run first.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit_s
        while loop.time() < deadline:
            screen = self.app.screen
            if not (screen._layout_required or screen._scroll_required
                    or screen._repaint_required or screen._dirty_widgets):
                return
            await self.pilot.pause(0.02)

    async def press(self, *keys: str) -> None:
        for k in keys:
            await self.pilot.press(k)
            await self.settle()

    def text(self) -> str:
        """The whole screen as painted, one line per row."""
        strips = self.app.screen._compositor.render_strips()
        return "\n".join("".join(seg.text for seg in strip) for strip in strips)

    def lines(self, selector: str) -> list[str]:
        """Every line of a TextView (including those scrolled out of sight)."""
        view = self.app.screen.query_one(selector)
        return [view.source.plain(i) for i in range(view.line_count)]

    def cursor_line(self, selector: str) -> str:
        view = self.app.screen.query_one(selector)
        return view.source.plain(view.cursor) if view.line_count else ""

    def notifications(self) -> list[str]:
        return [n.message for n in self.app._notifications]


@pytest.fixture
def open_ui():
    """``async with open_ui(trace_path) as ui:`` runs the real app headless on a trace."""
    from contextlib import asynccontextmanager

    from tuidebug.trace.reader import Trace
    from tuidebug.tui.app import TuidebugApp

    @asynccontextmanager
    async def run(path: Path, size: tuple[int, int] = SIZE):
        app = TuidebugApp(Trace(path))
        async with app.run_test(size=size) as pilot:
            ui = UI(app, pilot)
            await ui.settle()
            yield ui

    return run


@pytest.fixture(scope="session")
def autotune_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("traces") / "autotune"
    env = dict(os.environ, PYTHONPATH=pythonpath())
    cmd = [sys.executable, "-m", "tuidebug.cli", "trace", "-o", str(out),
           "--set", "max_autotune=true", "--set", "freezing=true",
           "--set", 'max_autotune_gemm_backends="CPP,ATEN"', str(ROOT / "examples" / "mlp.py")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if not (out / "manifest.json").exists():
        raise RuntimeError(f"tracing with max_autotune wrote no trace:\n{proc.stdout}\n{proc.stderr}")
    return out


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
