"""What every trace screen shares: title bar, search, SVG export, lazy loading in workers."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import Reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static
from textual.worker import Worker, WorkerState, get_current_worker

from tuidebug.trace.format.reader import GraphRecord, Trace
from tuidebug.tui import compositor, keymap
from tuidebug.tui.heap import reading
from tuidebug.tui.messages import Read, SvgExported
from tuidebug.tui.prebuild import style_key, sync_css_count
from tuidebug.tui.widgets.bars import SearchBar, TitleBar
from tuidebug.tui.widgets.lists import PickList
from tuidebug.tui.widgets.textview import TextView
from tuidebug.inert import inert_content

REPEAT_S = 0.25  # a load started within this of the last one is a repeat (a key held down)


def _what_draws(content: Any) -> tuple[object, ...] | None:
    """A value equal for two texts exactly when they draw the same (None: not known)."""
    if isinstance(content, str):
        return (str, content)
    if isinstance(content, Text):
        return (Text, content.plain, tuple(content.spans), content.style, content.justify,
                content.overflow, content.no_wrap, content.end, content.tab_size)
    return None


class TraceScreen(Screen):
    """A screen that shows one aspect of the trace for the app's current graph."""

    SCREEN_NAME = ""
    BINDINGS = keymap.bindings("screen")
    # a focus change repaints the two widgets whose focus style changes (and the footer's
    # keys), not the whole screen: Textual's ``Screen.focused`` repaints every widget on it
    # (the passes screen's stage list and graph: 35-60 ms CPU per Tab on the 24-layer trace)
    focused: Reactive[Widget | None] = Reactive(None, repaint=False)

    def __init__(self) -> None:
        super().__init__()
        compositor.install(self)  # widgets hidden behind others are not drawn at each update
        sync_css_count(self)  # styled as it mounts: no stylesheet re-read when shown
        self.shown_graph: str | None = None
        self.search_query = ""
        self._search_target: Widget | None = None
        self._last_load: dict[str, float] = {}  # message name -> when its last load started
        self.styled_as: tuple[object, ...] | None = None  # prebuild.style_key when last styled
        self._texts_set: dict[str, tuple[object, Any]] = {}  # set_text: selector -> last set

    @property
    def trace(self) -> Trace:
        return self.app.trace  # type: ignore[attr-defined]

    @property
    def graph(self) -> GraphRecord | None:
        return self.app.current_graph  # type: ignore[attr-defined]

    # -- layout --------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield TitleBar(self.SCREEN_NAME)
        with Vertical(id="body"):
            yield from self.compose_body()
        yield SearchBar()  # the footer of keys, and the search while one is typed

    def compose_body(self) -> ComposeResult:
        yield from ()

    def on_screen_resume(self, event: events.ScreenResume | None = None) -> None:
        if event is not None and self.styled_as == style_key(self.app):
            # styled already under what its styles depend on (it was shown last, or styled
            # while built ahead): Textual restyles every widget of a screen it shows again
            # (15-20 ms of each switch on the 24-layer trace), unless told it need not
            event.refresh_styles = False
        self.query_one(TitleBar).update_bar()
        self.prepare()

    def on_screen_suspend(self) -> None:
        self.styled_as = style_key(self.app)  # up to date while shown

    def prepare(self) -> bool:
        """Show the app's current graph, unless shown already (False then). Called when the
        screen is shown, and by the app's ``Prebuilder`` while it is not."""
        g = self.graph
        gid = g.id if g is not None else None
        if gid == self.shown_graph and self.is_loaded():
            return False
        self.shown_graph = gid
        self.show_graph(g)
        return True

    def prepare_ahead(self) -> bool:
        """What the app's ``Prebuilder`` shows while this screen is not shown (``prepare``;
        a screen whose content is costly and may never be looked at says less)."""
        return self.prepare()

    def refresh_graph(self) -> None:
        """The app's current graph changed while this screen is on display."""
        self.on_screen_resume()

    def is_loaded(self) -> bool:
        return self.shown_graph is not None or self.graph is None

    def show_graph(self, g: GraphRecord | None) -> None:
        """Show ``g`` (load lazily, in workers)."""

    def set_text(self, selector: str, content: Any) -> None:
        """Update a fixed-size label without a relayout of the whole screen; the same text
        again is not drawn again (the node detail of the same node, a step of the pass
        stepper over a pass that changed nothing)."""
        widget = self.query_one(selector, Static)
        shown = _what_draws(content)
        last = self._texts_set.get(selector)  # (what it draws, the content given to it)
        if shown is not None and last is not None and last[0] == shown \
                and widget.content is last[1]:  # (not updated by other code since)
            return
        inert = inert_content(content)
        widget.update(inert, layout=False)
        self._texts_set[selector] = (shown, inert)

    # -- workers -------------------------------------------------------------------------------

    def load(self, message: type[Read], key: Any, fn: Callable[[], Any], *,
             debounce: float = 0.0) -> Worker[Any]:
        """Run ``fn`` in a thread; its result comes back to this screen as ``message(key, result)``
        (a ``Read`` subclass nested in the screen, with its own handler).

        A newer load of the same message cancels this one; with ``debounce``, when the load
        repeats one started less than ``REPEAT_S`` ago (a key held down or pressed quickly), the
        thread waits that long first and gives up if cancelled meanwhile (holding a key down
        reads only the last); a single key press loads at once.
        """
        now = time.monotonic()
        repeated = now - self._last_load.get(message.__qualname__, -1e9) < REPEAT_S
        self._last_load[message.__qualname__] = now
        wait = debounce if repeated else 0.0

        def work() -> None:
            worker = get_current_worker()
            if wait:
                time.sleep(wait)
            if worker.is_cancelled:
                return
            with reading():  # no collection walks it while it is read; frozen after
                data = fn()
            if not worker.is_cancelled:
                self.post_message(message(key, data))
        return self.run_worker(work, name=message.__name__, group=f"load-{message.__qualname__}",
                               thread=True, exclusive=True, exit_on_error=False)

    def cancel_load(self, message: type[Read]) -> None:
        """Cancel a ``load`` of ``message`` still running (what it reads is no longer wanted)."""
        self.workers.cancel_group(self, f"load-{message.__qualname__}")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            err = event.worker.error
            self.notify(f"{event.worker.name}: {type(err).__name__}: {err}",
                        title="could not read the trace", severity="error", timeout=10)

    # -- search --------------------------------------------------------------------------------

    def search_targets(self) -> list[Widget]:
        """Searchable widgets, the main one first."""
        return [w for w in self.query("TextView, PickList") if w.display]

    def _target(self) -> Widget | None:
        """The view searched: while the bar is open, the one the search went to (the focus
        stays where it was: a match in another view moves it there on closing)."""
        kept = self._search_target if self._search_target is not None \
            and self._search_target.is_attached else None
        if kept is not None and self.search_bar.is_open:
            return kept
        focused = self.focused
        if isinstance(focused, (TextView, PickList)):
            return focused
        if kept is not None:
            return kept
        targets = self.search_targets()
        return targets[0] if targets else None

    @property
    def search_bar(self) -> SearchBar:
        bar = getattr(self, "_search_bar", None)
        if bar is None or not bar.is_attached:
            bar = self._search_bar = self.query_one(SearchBar)
        return bar

    def action_search(self) -> None:
        focused = self.focused
        if isinstance(focused, (TextView, PickList)):
            self._search_target = focused
        self.search_bar.open()

    def search_takes(self, event: events.Key | events.Paste) -> bool:
        """Whether the open search bar took ``event`` (the app hands it every key first)."""
        bar = getattr(self, "_search_bar", None)
        if bar is None or not bar.is_open:
            return False
        if isinstance(event, events.Paste):
            bar.take_paste(event.text)
            return True
        return bar.take_key(event)

    def on_search_bar_submitted(self, event: SearchBar.Submitted) -> None:
        self.search_query = event.query
        self._run_search(event.forward, include_current=False)

    def on_search_bar_closed(self, _: SearchBar.Closed) -> None:
        kept = self._search_target  # the view the search went to takes the focus
        target = kept if kept is not None and kept.is_attached else self._target()
        if target is not None:
            target.focus()

    def _run_search(self, forward: bool, include_current: bool = False) -> bool:
        target = self._target()
        bar = self.search_bar
        if target is None or not self.search_query:
            return False
        found = target.search(self.search_query, forward,  # type: ignore[attr-defined]
                              include_current=include_current)
        if not found:
            # nothing in the focused view (a node's name typed while the stage list has the
            # focus): the next view that has a match takes the search, and the focus
            targets = self.search_targets()
            start = targets.index(target) + 1 if target in targets else 0
            for other in targets[start:] + targets[:start]:
                if other is not target and other.search(  # type: ignore[attr-defined]
                        self.search_query, forward, include_current=True):
                    target.set_query("")  # type: ignore[attr-defined]
                    target, found = other, True
                    self._search_target = other
                    if not bar.is_open:
                        other.focus()
                    break
        if isinstance(target, TextView):
            n = target.match_count(self.search_query)
            status = f"line {target.cursor + 1}: {n} matching lines" if found else "no match"
        else:
            status = "found" if found else "no match"
        bar.set_status(status)
        if not found:
            self.notify(f"no match for {self.search_query!r}", severity="warning", timeout=3)
        return found

    def action_search_next(self) -> None:
        if not self.search_query:
            self.action_search()
            return
        self._run_search(True)

    def action_search_prev(self) -> None:
        if not self.search_query:
            self.action_search()
            return
        self._run_search(False)

    # -- SVG export ----------------------------------------------------------------------------

    def svg_request(self) -> dict[str, Any] | None:
        """Keyword arguments for ``export_svg`` describing what is on screen (None: nothing)."""
        g = self.graph
        return {"graph_id": g.id} if g is not None else None

    def action_export_svg(self) -> None:
        from tuidebug.viewers.svg import export_svg  # graphviz's bindings: loaded when used

        request = self.svg_request()
        if request is None:
            self.notify("nothing on this screen to export", severity="warning")
            return
        self.notify(f"exporting {request.get('graph_id')} to SVG…", timeout=3)
        trace = self.trace

        def work() -> None:
            try:
                path = export_svg(trace, **request)
                self.post_message(SvgExported(Path(path).resolve() if path else None))
            except Exception as e:  # no Graphviz, layout gave up, …: report, never crash
                self.post_message(SvgExported(None, f"{type(e).__name__}: {e}"))
        self.run_worker(work, name="svg", group="svg", thread=True, exit_on_error=False)

    def on_svg_exported(self, message: SvgExported) -> None:
        if message.error:
            self.notify(message.error, title="SVG export failed", severity="error", timeout=10)
        elif self.app.is_web and message.path is not None:  # served: a browser tab shows it
            self.app.deliver_binary(message.path, mime_type="image/svg+xml",
                                    open_method="browser")
            self.notify(f"SVG {message.path.name} opened in a browser tab", title="exported",
                        timeout=8)
        else:
            self.notify(f"SVG written to {message.path}", title="exported", timeout=8)
