"""The title bar (trace, status, graph, screen tabs), the search bar and the footer of keys.
Everything in the title that comes from a trace (its status, graph ids, an imported rank) is
shown inert."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Label, Static

from tuidebug.trace.jobs.job import rank_of
from tuidebug.trace.queries.numerics import testing_only_flags
from tuidebug.trace.queries.summary import summary_status
from tuidebug.tui.keymap import SCREEN_SHORT_TITLES, SCREEN_TITLES, SCREENS, screen_key
from tuidebug.inert import inert
from tuidebug.viewers.info import STATUS_STYLE, status_word


class KeyFooter(Footer):
    """Textual's footer, rebuilt only when the keys it shows change.

    Textual's own rebuilds every key widget whenever the screen's bindings are updated — on
    every screen switch and every focus change, though the keys shown are mostly the same:
    measured on the 24-layer trace, a third of a switch to an open screen (styles applied to a
    new widget per key)."""

    _shown: tuple[tuple[str, str, bool, str], ...] | None = None

    def bindings_changed(self, screen: Screen) -> None:  # type: ignore[type-arg]
        if self.is_attached and screen is self.screen and screen.app.app_focus:
            shown = tuple((b.key, b.description, bool(enabled), str(tooltip or ""))
                          for _, b, enabled, tooltip in screen.active_bindings.values()
                          if b.show)
            if shown == self._shown:
                return
            self._shown = shown
        super().bindings_changed(screen)

class TitleBar(Static):
    """``tuidebug  TRACE  STATUS  graph: ID (kind)   1 Overview  2 Passes …`` on one line."""

    DEFAULT_CSS = """
    TitleBar { height: 1; background: $panel; color: $foreground; }
    """

    def __init__(self, screen_name: str) -> None:
        super().__init__()
        self.screen_name = screen_name

    def on_mount(self) -> None:
        self.update_bar()


    def update_bar(self) -> None:
        width = self.size.width or self.app.size.width
        for level in (0, 1, 2, 3, 4):
            t = self._bar(level)
            if t.cell_len <= width:
                break
        self.update(t, layout=False)  # one line, as wide as the screen: nothing moves

    def _labels(self, level: int) -> list[tuple[str, str]]:
        """Each tab's screen and text: full names (level 0), short ones, and at level 4 (80
        columns) only the keys, the shown screen's name beside its key (every tab fits)."""
        titles = SCREEN_SHORT_TITLES if level > 0 else SCREEN_TITLES
        keys = [(name, screen_key(i)) for i, name in enumerate(SCREENS)]
        if getattr(self.app, "job", None) is not None:  # a distributed job: its ranks screen
            keys.append(("ranks", "R"))
        return [(name, f" {key} " if level > 3 and name != self.screen_name
                 else f" {key} {titles.get(name, name)} ") for name, key in keys]

    def _job_rank(self) -> tuple[str, int] | None:
        """``(job name, rank)`` when the open trace is a rank of a distributed job."""
        job = getattr(self.app, "job", None)
        trace = self.app.trace  # type: ignore[attr-defined]
        rank = rank_of(job, trace.root) if job is not None else None
        return None if rank is None else (job.resolve().name, rank)

    def _bar(self, level: int) -> Text:
        """Level 0: everything; 1: short tab names; 2: also the rank and the graph said briefly,
        without the program's name; 3: also the trace's name cut short (a job's left out: the
        rank stays) and no graph count; 4: also the tabs other than the shown one as keys only.
        Where each tab is painted is kept for clicks."""
        app = self.app
        trace = app.trace  # type: ignore[attr-defined]
        status = summary_status(trace)  # as info and the overview say it
        t = Text() if level > 1 else Text.assemble((" tuidebug ", "bold reverse"), " ")
        job_rank = self._job_rank()
        if job_rank is not None:  # "rank_1" says less than the job's name and the rank
            if level < 3:
                t.append(inert(job_rank[0], multiline=False) + " ", style="bold")
            t.append(f"rank {job_rank[1]}", style="bold magenta")
        else:
            name = inert(trace.name, multiline=False)
            # cut in the middle: a default trace name ends in its time (…-070501)
            t.append(name if level < 3 or len(name) <= 16 else name[:8] + "…" + name[-7:],
                     style="bold")
        imp = trace.imported_from or {}
        if imp.get("rank") is not None and len(imp.get("ranks") or []) > 1:
            t.append(f" rank {inert(imp['rank'], multiline=False, limit=20)}"
                     + ("" if level > 1 else " (R to change)"),
                     style="bold magenta")
        t.append(" ")
        t.append(f" {inert(status_word(status), multiline=False, limit=20)} ",
                 style=STATUS_STYLE.get(status, "bold") + " reverse")  # a badge
        if testing_only_flags(trace):  # a planted bug: every screen says so at its top
            t.append(" TESTING-ONLY FLAG " if level < 2 else " TEST ",
                     style="bold reverse yellow")
        g = app.current_graph  # type: ignore[attr-defined]
        if g is not None:
            t.append("  " if level > 1 else "  graph ", style="dim")
            t.append(inert(g.id, multiline=False), style="bold cyan")
            n = len(trace.graphs)
            if n > 1 and level < 3:
                t.append(f" {trace.graphs.index(g) + 1}/{n}" if level > 1 else
                         f" ({trace.graphs.index(g) + 1}/{n}, G to change)", style="dim")
        t.append("  ")
        self._tabs = []
        for name, label in self._labels(level):
            self._tabs.append((name, t.cell_len, t.cell_len + len(label)))
            if name == self.screen_name:
                t.append(label, style="bold reverse")
            elif name == "errors" and status in ("failed", "crashed"):
                t.append(label, style="bold red")
            else:
                t.append(label, style="")
        return t

    def on_resize(self) -> None:
        self.update_bar()

    async def on_click(self, event: events.Click) -> None:
        # clicking a tab switches screens (where each tab is: the bar last painted)
        for name, start, end in getattr(self, "_tabs", []):
            if start <= event.x < end:
                await self.app.run_action(f"show_screen('{name}')")
                return

    def bar_plain(self) -> str:
        r = self.render()
        return r.plain if isinstance(r, Text) else str(r)


class SearchBar(Horizontal):
    """A one-line search over the footer at the bottom of a screen; hidden until ``/``.

    It takes the keys typed while it is open without taking the focus: the app hands it each
    key first (``take_key``) and it keeps the query itself. Focusing an input to open it cost
    most of ``/`` on the 24-layer trace (the view left behind restyled and painted whole for
    its ``:focus`` tint, two layouts: 56-77 ms CPU); the focus stays where the search goes.
    Keys: a character types (the first one after ``/`` replaces the last query, shown
    selected: enter repeats it), backspace, ctrl+u clears, enter and down find the next match,
    up the previous, escape closes; any other key goes on to the screen as usual.

    It lies on a layer of its own: opening it changes no other widget's size, so nothing else
    is laid out or painted again. It is laid out always and hidden (``visibility``) rather than
    not displayed: displaying a docked widget changed every widget's place in the layout's map
    (the dock gutter), and the whole screen was painted again. Its query and status change
    with no layout (the query's width is fixed; the status only when its text changes)."""

    DEFAULT_CSS = """
    SearchBar { height: 1; visibility: hidden; background: $panel; dock: bottom;
                layer: searchbar; }
    SearchBar.-open { visibility: visible; }
    SearchBar > Label { width: auto; padding: 0 1; color: $text-accent; }
    SearchBar > #search-query { width: 1fr; height: 1; padding: 0; color: $foreground; }
    SearchBar > #search-status { width: auto; color: $text-muted; padding: 0 1; }
    """

    PLACEHOLDER = "search the focused view — enter: next, ↑: previous, esc: close"

    class Submitted(Message):
        def __init__(self, query: str, forward: bool = True) -> None:
            super().__init__()
            self.query = query
            self.forward = forward

    class Closed(Message):
        pass

    def __init__(self) -> None:
        super().__init__()
        self.query = ""
        self._selected = False  # the last query, shown selected: a character replaces it

    def compose(self) -> ComposeResult:
        yield Label("/")
        yield Static("", id="search-query")
        yield Label("", id="search-status")

    def open(self) -> None:
        self.set_status("")  # the last search's "no match" is about another query
        self._selected = bool(self.query)  # typing replaces the last query; enter repeats it
        self._show_query()
        self.add_class("-open")

    def close(self) -> None:
        self.remove_class("-open")
        self.post_message(self.Closed())

    @property
    def is_open(self) -> bool:
        return self.has_class("-open")

    def set_status(self, text: str) -> None:
        label = self.query_one("#search-status", Label)
        if str(label.content) != text:  # its width follows its text: a layout when it changes
            label.update(text)

    def _show_query(self) -> None:
        t = Text(no_wrap=True, overflow="ellipsis")
        if not self.query:
            t.append(" ", style="reverse")  # the cursor
            t.append(self.PLACEHOLDER, style="dim")
        else:
            # typed here, not read from a trace; shown inert all the same (a paste)
            t.append(inert(self.query, multiline=False), style="reverse" if self._selected else "")
            t.append(" ", style="reverse")
        self.query_one("#search-query", Static).update(t, layout=False)

    def _type(self, text: str) -> None:
        self.query = (text if self._selected else self.query + text)
        self._selected = False
        self._show_query()

    def take_key(self, event: events.Key) -> bool:
        """Handle ``event`` while the bar is open; False: not a key of the search (it goes on
        to the screen)."""
        key = event.key
        if key == "escape":
            self.close()
        elif key in ("enter", "down", "up"):
            self._selected = False
            self._show_query()
            self.post_message(self.Submitted(self.query, key != "up"))
        elif key in ("backspace", "ctrl+h"):
            self.query = "" if self._selected else self.query[:-1]
            self._selected = False
            self._show_query()
        elif key == "ctrl+u":
            self.query, self._selected = "", False
            self._show_query()
        elif event.is_printable and event.character:
            self._type(event.character)
        else:
            return False
        return True

    def take_paste(self, text: str) -> None:
        """Pasted text typed into the query (its first line)."""
        line = text.splitlines()[0] if text else ""
        if line:
            self._type(line)
