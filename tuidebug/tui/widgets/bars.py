"""The title bar (trace, status, graph, screen tabs) and the footer of keys, which is also the
search bar.
Everything in the title that comes from a trace (its status, graph ids, an imported rank) is
shown inert."""

from __future__ import annotations

from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual import events
from textual.message import Message
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static

from tuidebug.trace.jobs.job import rank_of
from tuidebug.trace.queries.numerics import testing_only_flags
from tuidebug.trace.queries.summary import summary_status
from tuidebug.tui.keymap import SCREEN_SHORT_TITLES, SCREEN_TITLES, SCREENS, screen_key
from tuidebug.inert import inert
from tuidebug.viewers.info import STATUS_STYLE, status_word


@dataclass(frozen=True)
class FooterItem:
    """One key shown in the footer: where it is drawn (columns ``start`` to ``end``) is kept for
    clicks and tooltips."""

    key: str
    display: str
    description: str
    enabled: bool
    tooltip: str
    palette: bool = False  # the command palette's key, drawn at the right end


class KeyFooter(Widget, can_focus=False):
    """The screen's keys on one line, drawn by this one widget.

    Textual's ``Footer`` is a container of one widget per key, composed again whenever the
    screen's bindings are updated (every screen switch and focus change): ~12 widgets a screen
    to mount, style and lay out, and one more message queue each for everything that visits
    every widget. Here the keys are one line of text, painted again only when the keys shown
    change (no layout: the footer is one line whatever it shows). A click on a key presses it,
    as Textual's footer does; the key under the pointer shows its tooltip."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES = {"footer--key", "footer--description"}
    DEFAULT_CSS = """
    KeyFooter { dock: bottom; height: 1; width: 1fr; background: $footer-background;
                color: $footer-foreground; }
    KeyFooter > .footer--key { color: $footer-key-foreground; background: $footer-key-background;
                               text-style: bold; }
    KeyFooter > .footer--description { color: $footer-description-foreground;
                                       background: $footer-description-background; }
    """

    def __init__(self) -> None:
        super().__init__()
        self._items: tuple[FooterItem, ...] | None = None  # None: not read from the screen yet
        self._spans: list[tuple[int, int, FooterItem]] = []  # where each key was drawn

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self.bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def bindings_changed(self, screen: Screen) -> None:  # type: ignore[type-arg]
        if not (self.is_attached and screen is self.screen and screen.app.app_focus):
            return
        items = self._read_items()
        if items != self._items:
            self._items = items
            self.refresh()

    def _read_items(self) -> tuple[FooterItem, ...]:
        """The keys to show, one per action (its first key), as Textual's footer picks them."""
        screen, app = self.screen, self.app
        active = screen.active_bindings
        seen: set[str] = set()
        items: list[FooterItem] = []
        for _, binding, enabled, tooltip in active.values():
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            items.append(FooterItem(binding.key, app.get_key_display(binding),
                                    binding.description, bool(enabled), str(tooltip or "")))
        if app.ENABLE_COMMAND_PALETTE:
            found = active.get(app.COMMAND_PALETTE_BINDING)
            if found is not None:
                _, binding, enabled, tooltip = found
                items = [i for i in items if i.key != binding.key]
                items.append(FooterItem(binding.key, app.get_key_display(binding),
                                        binding.description, bool(enabled),
                                        str(binding.tooltip or binding.description),
                                        palette=True))
        return tuple(items)

    def render(self) -> Text:
        return self.render_keys()

    def render_keys(self) -> Text:
        if self._items is None:
            self._items = self._read_items()
        key_style = self.get_component_rich_style("footer--key", partial=True)
        description_style = self.get_component_rich_style("footer--description", partial=True)
        width = self.size.width
        t = Text(no_wrap=True, overflow="crop", end="")
        self._spans = []
        for item in self._items:
            dim = Style(dim=not item.enabled)  # a key that does nothing here now
            start = t.cell_len
            t.append(f" {item.display} ", style=key_style + dim)
            if item.description:
                t.append(f"{item.description} ", style=description_style + dim)
            self._spans.append((start, t.cell_len, item))
        palette = next((s for s in self._spans if s[2].palette), None)
        if palette is not None:  # at the right end, over the keys it meets (as Textual's)
            start, end, item = palette
            drawn = t[start:end]
            t = t[:start]
            self._spans = [s for s in self._spans if s[2] is not item]
            room = max(0, width - (end - start) - 1)
            if t.cell_len > room:
                t.truncate(room)
                self._spans = [s for s in self._spans if s[1] <= room]
            t.append(" " * (room - t.cell_len))
            t.append("▏", style="dim")
            self._spans.append((t.cell_len, t.cell_len + drawn.cell_len, item))
            t.append_text(drawn)
        return t

    def _item_at(self, x: int) -> FooterItem | None:
        return next((item for start, end, item in self._spans if start <= x < end), None)

    def on_mouse_down(self, event: events.MouseDown) -> None:
        item = self._item_at(event.x)
        if item is None:
            return
        if item.enabled:
            self.app.simulate_key(item.key)
        else:
            self.app.bell()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        item = self._item_at(event.x)
        tip = item.tooltip if item is not None else ""
        if (self.tooltip or "") != tip:
            self.tooltip = tip or None

    def keys_shown(self) -> list[str]:
        """The keys drawn, in order (as their bindings name them)."""
        if self._items is None:
            self._items = self._read_items()
        return [i.key for i in self._items]

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


class SearchBar(KeyFooter):
    """The footer line, which turns into a one-line search at ``/``.

    Opening, typing and closing change what this one line draws and nothing else: no widget is
    shown, hidden, styled or laid out (a search bar of its own, shown over the footer, cost a
    layout of the screen and a repaint of every widget on it at each ``/``: 52-73 ms on the
    24-layer trace), and no focus moves (focusing an input restyled and repainted the view left
    behind): the app hands the bar each key while it is open (``take_key``) and it keeps the
    query itself. Keys: a character types (the first one after ``/`` replaces the last query,
    shown selected: enter repeats it), backspace, ctrl+u clears, enter and down find the next
    match, up the previous, escape closes; any other key goes on to the screen as usual."""

    COMPONENT_CLASSES = {"searchbar--line", "searchbar--prompt", "searchbar--status"}
    DEFAULT_CSS = """
    SearchBar > .searchbar--line { background: $panel; color: $foreground; }
    SearchBar > .searchbar--prompt { color: $text-accent; }
    SearchBar > .searchbar--status { color: $text-muted; }
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
        self.status = ""  # what the last search found ("line 12: 3 matching lines", "no match")
        self._open = False
        self._selected = False  # the last query, shown selected: a character replaces it

    @property
    def is_open(self) -> bool:
        return self._open

    def open(self) -> None:
        self.status = ""  # the last search's "no match" is about another query
        self._selected = bool(self.query)  # typing replaces the last query; enter repeats it
        self._open = True
        self.refresh()

    def close(self) -> None:
        self._open = False
        self.refresh()
        self.post_message(self.Closed())

    def set_status(self, text: str) -> None:
        if text != self.status:
            self.status = text
            self.refresh()

    def render(self) -> Text:
        return self.render_search() if self._open else self.render_keys()

    def render_search(self) -> Text:
        """``/ QUERY▌ … STATUS`` (the placeholder while the query is empty), as wide as the
        footer: the query is cut at its start to leave the status room."""
        line = self.get_component_rich_style("searchbar--line", partial=True)
        width = self.size.width
        prompt = Text(" / ", style=self.get_component_rich_style("searchbar--prompt",
                                                                  partial=True))
        status = Text(f" {inert(self.status, multiline=False)} " if self.status else "",
                      style=self.get_component_rich_style("searchbar--status", partial=True))
        room = max(1, width - prompt.cell_len - status.cell_len)
        query = Text(no_wrap=True, overflow="ellipsis", end="")
        if not self.query:
            query.append(" ", style="reverse")  # the cursor
            query.append(self.PLACEHOLDER, style="dim")
            query.truncate(room, overflow="ellipsis")
        else:
            # typed here, not read from a trace; shown inert all the same (a paste)
            shown = inert(self.query, multiline=False)
            if len(shown) + 1 > room:  # the end of a long query, where the typing is
                shown = "…" + shown[len(shown) + 2 - room:]
            query.append(shown, style="reverse" if self._selected else "")
            query.append(" ", style="reverse")
        query.pad_right(room - query.cell_len)
        t = Text.assemble(prompt, query, status, no_wrap=True, overflow="crop", end="")
        t.stylize_before(line)
        return t

    def _type(self, text: str) -> None:
        self.query = (text if self._selected else self.query + text)
        self._selected = False
        self.refresh()

    def take_key(self, event: events.Key) -> bool:
        """Handle ``event`` while the bar is open; False: not a key of the search (it goes on
        to the screen)."""
        key = event.key
        if key == "escape":
            self.close()
        elif key in ("enter", "down", "up"):
            self._selected = False
            self.refresh()
            self.post_message(self.Submitted(self.query, key != "up"))
        elif key in ("backspace", "ctrl+h"):
            self.query = "" if self._selected else self.query[:-1]
            self._selected = False
            self.refresh()
        elif key == "ctrl+u":
            self.query, self._selected = "", False
            self.refresh()
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
