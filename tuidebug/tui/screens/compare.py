"""Compare: this trace against another (a recompile's output, or any trace directory)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import events
from textual.app import ComposeResult

from tuidebug.trace.format.reader import GraphRecord, Trace
from tuidebug.tui import keymap
from tuidebug.tui.messages import Read
from tuidebug.tui.screens.base import TraceScreen
from tuidebug.tui.widgets.render import thread_console, to_lines
from tuidebug.tui.widgets.textview import RichLines, TextView


def compare_renderables(a: Trace, b: Path) -> list[Any]:
    """The comparison of the app's open trace ``a`` (what its screens read already is not read
    again: its graphs' fusion decisions, IR, kernels) with the trace at ``b``."""
    from tuidebug.trace.diff import diff_traces
    from tuidebug.viewers.diff_view import diff_renderables

    return diff_renderables(diff_traces(a, b, code=True), code=True)


@dataclass
class Drawn:
    """What the compare screen shows, rendered into lines at ``width`` columns."""

    items: list[Any]
    lines: list[Text]
    width: int


class CompareScreen(TraceScreen):
    class DiffRead(Read):
        """The comparison with another trace, rendered (key: that trace's path)."""

        data: Drawn

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
        trace, width, console = self.trace, self._width(), thread_console(self.app.console)

        def read() -> Drawn:  # the comparison and its tables' lines, both in the worker
            items = [Text.assemble(("o", "bold cyan"), (": open the new trace in the app",
                                                        "dim")), *compare_renderables(trace, other)]
            return Drawn(items, to_lines(console, items, width), width)
        self.load(self.DiffRead, other, read)

    def on_compare_screen_diff_read(self, message: CompareScreen.DiffRead) -> None:
        if message.key != self.other:
            return
        drawn = message.data
        self._items = drawn.items
        keep = self._drawn_width is not None and self.query_one(TextView).line_count > 1
        self._show(drawn.lines, drawn.width, keep=keep and message.key == self.shown_path)
        if drawn.width != self._width():  # resized while it was drawn: again, at this width
            self._redraw()
        else:
            self.query_one(TextView).focus()

    def _width(self) -> int:
        view = self.query_one(TextView)
        return max(60, (view.size.width or self.app.size.width) - 2)

    def _show(self, lines: list[Text], width: int, keep: bool) -> None:
        view = self.query_one(TextView)
        view.set_source(RichLines(lines), cursor=view.cursor if keep else 0, keep_scroll=keep)
        view.set_query(self.search_query)
        self._drawn_width = width

    def _render_lines(self, keep: bool) -> None:
        """A line or two (nothing to compare, the comparison being read): drawn here."""
        width = self._width()
        self._show(to_lines(self.app.console, self._items, width), width, keep)

    def _redraw(self) -> None:
        """The comparison drawn again at the view's width, in a worker (its tables: 100-200 ms
        on two 24-layer traces)."""
        items, width = list(self._items), self._width()
        console = thread_console(self.app.console)
        self.load(self.DiffRead, self.other,
                  lambda: Drawn(items, to_lines(console, items, width), width))

    _drawn_width: int | None = None

    def on_resize(self, event: events.Resize) -> None:
        if not self._items or self._drawn_width == self._width():
            return  # laid out at the width it was drawn at: nothing to draw again
        if len(self._items) <= 2:
            self._render_lines(keep=True)
        else:
            self._redraw()

    async def action_open_new(self) -> None:
        if self.other is None:
            self.notify("nothing to open: no trace compared yet", severity="warning")
            return
        await self.app.open_trace(self.other)  # type: ignore[attr-defined]
