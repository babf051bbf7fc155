"""Compare: this trace against another (a recompile's output, or any trace directory)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual import events
from textual.app import ComposeResult

from tuidebug.trace.format.reader import GraphRecord
from tuidebug.tui import keymap
from tuidebug.tui.messages import Read
from tuidebug.tui.screens.base import TraceScreen
from tuidebug.tui.widgets.render import to_lines
from tuidebug.tui.widgets.textview import RichLines, TextView


def compare_renderables(a: Path, b: Path) -> list[Any]:
    from tuidebug.trace.diff import diff_traces
    from tuidebug.viewers.diff_view import diff_renderables

    return diff_renderables(diff_traces(a, b, code=True), code=True)


class CompareScreen(TraceScreen):
    class DiffRead(Read):
        """The comparison with another trace, as renderables (key: that trace's path)."""

        data: list[Any]

    SCREEN_NAME = "compare"
    BINDINGS = keymap.bindings("compare")

    def __init__(self) -> None:
        super().__init__()
        self.shown_path: Path | None = None
        self._items: list[Any] = []

    def compose_body(self) -> ComposeResult:
        yield TextView(id="compare-view", placeholder="nothing to compare yet")

    @property
    def other(self) -> Path | None:
        return self.app.compare_with  # type: ignore[attr-defined]

    def is_loaded(self) -> bool:
        return self.shown_path == self.other

    def show_graph(self, g: GraphRecord | None) -> None:
        other = self.other
        self.shown_path = other
        if other is None:
            self._items = [Text("Nothing to compare yet.", style="bold"),
                           Text("Recompile with new flag values on the flags screen (7, then s "
                                "and r), or compare with any trace directory: command palette "
                                "(ctrl+p) → \"compare with trace…\" (key C).", style="dim")]
            self._render_lines(keep=False)
            return
        self._items = [Text(f"comparing {self.trace.root} with {other}…", style="dim")]
        self._render_lines(keep=False)
        self.load(self.DiffRead, other, lambda: compare_renderables(self.trace.root, other))

    def on_compare_screen_diff_read(self, message: CompareScreen.DiffRead) -> None:
        if message.key != self.other:
            return
        self._items = [Text.assemble(("o", "bold cyan"), (": open the new trace in the app",
                                                          "dim")), *message.data]
        self._render_lines(keep=False)
        self.query_one(TextView).focus()

    def _render_lines(self, keep: bool) -> None:
        view = self.query_one(TextView)
        width = max(60, (view.size.width or self.app.size.width) - 2)
        view.set_source(RichLines(to_lines(self.app.console, self._items, width)),
                        cursor=view.cursor if keep else 0, keep_scroll=keep)
        view.set_query(self.search_query)

    def on_resize(self, event: events.Resize) -> None:
        if self._items:
            self._render_lines(keep=True)

    async def action_open_new(self) -> None:
        if self.other is None:
            self.notify("nothing to open: no trace compared yet", severity="warning")
            return
        await self.app.open_trace(self.other)  # type: ignore[attr-defined]
