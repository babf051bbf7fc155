"""Compare: this trace against another (a recompile's output, or any trace directory)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from rich.console import Console
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.worker import get_current_worker

from tuidebug.trace.format.reader import GraphRecord, Trace
from tuidebug.tui import keymap
from tuidebug.tui.messages import Read
from tuidebug.tui.screens.base import TraceScreen
from tuidebug.tui.widgets.render import Drawing, draw_lines, thread_console, to_lines
from tuidebug.tui.widgets.textview import RichLines, TextView


def compare_renderables(a: Trace, b: Trace) -> list[Any]:
    """The comparison of the app's open trace ``a`` with ``b`` (what either has read already
    is not read again: its graphs' fusion decisions, IR, kernels; nor is a file ``b`` holds in
    the same bytes as ``a``)."""
    from tuidebug.trace.diff import diff_traces
    from tuidebug.viewers.diff_view import diff_renderables

    return diff_renderables(diff_traces(a, b, code=True), code=True)


def compare_ahead(a: Trace) -> list[Callable[[], object]]:
    """What comparing the app's open trace ``a`` with another works out from ``a`` alone, in
    steps (``trace/diff/ahead.py``; the prebuilder runs them while nobody presses a key), the
    comparison's own modules imported first."""
    from tuidebug.trace.diff.ahead import side_steps

    def modules() -> None:
        from tuidebug.trace.diff import diff_traces  # noqa: F401
        from tuidebug.viewers.diff_view import diff_renderables  # noqa: F401
    return [modules, *side_steps(a)]


@dataclass
class Drawn:
    """What the compare screen shows, rendered into lines at ``width`` columns: all of it, or
    (``complete`` False) its first screenful or more, shown while the rest is drawn.
    ``drawn_on``: the thread that rendered it (a worker's, never the UI thread: tests check)."""

    items: list[Any]
    lines: list[Text]
    width: int
    complete: bool = True
    drawn_on: str = ""
    segments: list[Drawing] = field(default_factory=list)  # each line's (render.draw_lines)


FIRST_WAIT_S = 0.03  # the rest drawn in this much more CPU time than a screenful: shown at once


def draw(console: Console, items: list[Any], width: int, rows: int,
         first: Callable[[Drawn], None] | None = None,
         cancelled: Callable[[], bool] = lambda: False) -> Drawn:
    """``items`` rendered into lines at ``width`` columns, in order. Where the rest takes
    longer than ``FIRST_WAIT_S`` to draw once ``rows`` lines are (this thread's CPU time: a
    busy machine does not make it longer), ``first`` is given what is drawn by then (a
    screenful or more): shown while the rest is drawn — a comparison drawn quickly is shown
    once (each showing repaints the view). Once ``cancelled()`` (another comparison asked
    for, or this one at another width), nothing more is drawn: what is returned then is not
    ``complete``."""
    lines: list[Text] = []
    segments: list[Drawing] = []
    here = threading.current_thread().name
    ready: float | None = None  # when a screenful was drawn
    for i, item in enumerate(items):
        if cancelled():
            return Drawn(items, lines, width, complete=False, drawn_on=here, segments=segments)
        more, drawn = draw_lines(console, [item], width)
        lines += more
        segments += drawn
        if first is None or i + 1 == len(items) or len(lines) < rows:
            continue
        now = time.thread_time()
        if ready is None:
            ready = now
        elif now - ready > FIRST_WAIT_S:
            first(Drawn(items, list(lines), width, complete=False, drawn_on=here,
                        segments=list(segments)))
            first = None
    return Drawn(items, lines, width, drawn_on=here, segments=segments)


def _begins_with(lines: list[Text], shown: list[Text]) -> bool:
    """``lines`` begins with the very lines ``shown`` (the same objects: a drawing's first
    screenful, then all of it)."""
    return 1 < len(shown) <= len(lines) and all(a is b for a, b in zip(shown, lines))


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
        self.complete = False  # the comparison shown is drawn whole
        self._shown = False  # something shown: the comparison, or that there is none

    def compose_body(self) -> ComposeResult:
        yield TextView(id="compare-view", placeholder="nothing to compare yet")

    @property
    def other(self) -> Path | None:
        return self.app.compare_with  # type: ignore[attr-defined]

    def is_loaded(self) -> bool:
        return self._shown and self.shown_path == self.other

    def prepare(self) -> bool:
        """Show the comparison with the app's ``compare_with``, unless shown already: it does
        not depend on the current graph (a graph chosen elsewhere compared nothing again)."""
        g = self.graph
        self.shown_graph = g.id if g is not None else None
        if self.is_loaded():
            return False
        self._shown = True
        self.show_graph(g)
        return True

    def prepare_ahead(self) -> bool:
        """Built ahead (``prebuild.py``): the state of nothing compared yet, whatever trace
        is named. After ``o`` and on every rank switch the trace compared with is named
        before the screens are built again, and the comparison (a whole ``diff_traces`` and
        its tables) was worked out though nobody asked for it: it is, when the screen is
        shown (``prepare``). The work ahead on the open trace alone is the app's
        (``compare_ahead``)."""
        if self._shown:
            return False
        self._shown = True
        self._nothing_compared()
        return True

    def _nothing_compared(self) -> None:
        self.shown_path = None
        self.complete = False
        self._items = [Text("Nothing compared yet." if self.other is not None
                            else "Nothing to compare yet.", style="bold"),
                       Text("Recompile with new flag values on the flags screen (7, then s "
                            "and r), or compare with any trace directory: command palette "
                            "(ctrl+p) → \"compare with trace…\" (key C).", style="dim")]
        self._render_lines(keep=False)

    def show_graph(self, g: GraphRecord | None) -> None:
        other = self.other
        if other is None:
            self._nothing_compared()
            return
        self.shown_path = other
        self.complete = False
        self._items = [Text(f"comparing {self.trace.root} with {other}…", style="dim")]
        self._render_lines(keep=False)
        trace, opened = self.trace, self.app.open_traces  # type: ignore[attr-defined]

        def read() -> list[Any]:  # the comparison, in the worker that draws it
            return [Text.assemble(("o", "bold cyan"), (": open the new trace in the app",
                                                       "dim")),
                    *compare_renderables(trace, opened.get(other))]
        self._draw(other, read)

    def _draw(self, key: Path | None, items: Callable[[], list[Any]]) -> None:
        """``items()`` drawn at the view's width in a worker, and shown (its first screenful
        first where the rest takes a while: ``draw``)."""
        view = self.query_one(TextView)
        width, rows = self._width(), max(1, view.size.height or self.app.size.height)
        console = thread_console(self.app.console)

        def work() -> Drawn:
            worker = get_current_worker()

            def first(part: Drawn) -> None:
                if not worker.is_cancelled:
                    self.post_message(self.DiffRead(key, part))
            return draw(console, items(), width, rows, first,
                        lambda: worker.is_cancelled)
        self.load(self.DiffRead, key, work)

    def on_compare_screen_diff_read(self, message: CompareScreen.DiffRead) -> None:
        if message.key != self.other:
            return
        drawn = message.data
        self._items = drawn.items
        self.complete = drawn.complete
        view = self.query_one(TextView)
        shown = view.source.lines if isinstance(view.source, RichLines) else None
        if shown is not None and message.key == self.shown_path and drawn.width == \
                self._drawn_width and _begins_with(drawn.lines, shown):
            view.extend_source(RichLines(drawn.lines, drawn.segments))  # the rest of it
        else:
            keep = self._drawn_width is not None and view.line_count > 1
            self._show(drawn.lines, drawn.width, keep=keep and message.key == self.shown_path,
                       drawn=drawn.segments)
        if drawn.complete and drawn.width != self._width():
            self._redraw()  # resized while it was drawn: again, at this width
        elif self.focused is not view:
            # with its first screenful (the rest then paints no row again): focusing tints
            # the view, every row painted again — and Textual repaints a view focused again
            view.focus()

    def _width(self) -> int:
        return self.query_one(TextView).line_width()

    def _show(self, lines: list[Text], width: int, keep: bool,
              drawn: list[Drawing] | None = None) -> None:
        view = self.query_one(TextView)
        view.set_source(RichLines(lines, drawn), cursor=view.cursor if keep else 0,
                        keep_scroll=keep)
        view.set_query(self.search_query)
        self._drawn_width = width

    def _render_lines(self, keep: bool) -> None:
        """A line or two (nothing to compare, the comparison being read): drawn here."""
        width = self._width()
        self._show(to_lines(self.app.console, self._items, width), width, keep)

    def _redraw(self) -> None:
        """The comparison drawn again at the view's width, in a worker (its tables: 50-200 ms
        on two 24-layer traces)."""
        items = list(self._items)
        self._draw(self.other, lambda: items)

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
