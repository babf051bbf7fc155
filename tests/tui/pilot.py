"""Driving the terminal UI with Pilot: the ``open_ui`` fixture and its ``UI`` helper.

A pytest plugin (registered by ``pytest_plugins`` in the root conftest), so that every test
directory can use ``open_ui``: the TUI tests and the faults suite.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.conftest import digest  # noqa: F401  (re-exported for the TUI tests)

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

    async def wait_for(self, cond: Callable[[], Any], timeout: float,
                       poll: float = 0.5) -> bool:
        """Keep the app running until ``cond()`` is true; False if ``timeout`` passed first."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if cond():
                return True
            await self.pilot.pause(poll)
        return bool(cond())

    def layout(self) -> str:
        """Where every widget of the screen is (for an assertion message)."""
        screen = self.app.screen
        rows = [f"screen {type(screen).__name__} size={screen.size} "
                f"layout_required={screen._layout_required} dirty={len(screen._dirty_widgets)}"]
        rows += [f"  {type(w).__name__}#{w.id} region={w.region} display={w.display}"
                 for w in screen.query("*")]
        return "\n".join(rows)

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
    """``async with open_ui(trace_path) as ui:`` runs the real app headless on a trace.

    ``notifications=True`` paints toasts (Pilot leaves them out by default, and they would
    cover other text); ``message_hook`` sees every message the app processes (as
    ``App.run_test``'s); other keyword arguments go to ``TuidebugApp`` (``recompile_timeout=20``).
    ``prewarm=True`` starts the recompile worker when the flags screen is shown, as the real app
    does; off by default, so that a test that only looks at the flags screen does not spawn a
    process that imports torch. ``prebuild=True`` builds the other screens in the background
    after the first paint, as the real app does; off by default, so that what a test sees read
    and painted is what its keys caused (and the suite spends no time on screens it never shows).
    """
    from contextlib import asynccontextmanager

    from tuidebug.trace.format.reader import Trace
    from tuidebug.tui.app import TuidebugApp

    @asynccontextmanager
    async def run(path: Path, size: tuple[int, int] = SIZE, *, notifications: bool = False,
                  prewarm: bool = False, message_hook: Callable[[Any], None] | None = None,
                  prebuild: bool = False, **app_kwargs: Any):
        app = TuidebugApp(Trace(path), prewarm=prewarm, prebuild=prebuild, **app_kwargs)
        async with app.run_test(size=size, notifications=notifications,
                                message_hook=message_hook) as pilot:
            ui = UI(app, pilot)
            await ui.settle()
            yield ui

    return run
