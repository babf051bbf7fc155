"""A Line-API text view: any number of lines, only the visible ones rendered.

One ``ScrollView`` with ``render_line`` (as Toolong's ``LogLines``): a 100k-line wrapper or a
50k-node graph costs the same to paint as a 10-line one. Lines come from a ``LineSource`` (plain
text for search and width, a rich ``Text`` for display, produced on demand); rendered strips are
kept in a small LRU cache. A cursor line, search highlighting and an optional line-number gutter
are drawn here, so every screen gets the same keys and behaviour.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Iterable, Protocol, Sequence

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tuidebug.inert import has_unsafe, inert, inert_rich
from tuidebug.tui.widgets.cells import widest
from tuidebug.tui.widgets.scrollbars import SteadyScrollbars

CACHE_LINES = 4000


class LineSource(Protocol):
    """Lines for a ``TextView``: ``plain(i)`` is ``rich(i).plain`` (what search reads is what
    is drawn). A source may also have ``max_width()``, its widest line's columns, where it knows
    it without making every line's text, and ``line_key(i)``: a hashable value equal for two
    lines (of this source or another) exactly when they draw the same — a line drawn once is
    then not drawn again when the view shows another source holding it (the pass stepper's
    next stage: mostly the same lines). ``is_final(i)``, where a source has it, false: the
    line is drawn for now and will draw otherwise later (code not highlighted yet), so its
    drawing is not kept. ``segments(i)``, where a source has it: the line's drawing as Rich
    segments, as ``rich(i)`` renders (kept ready: rendering a ``Text`` is most of a paint), or
    None for a line only ``rich(i)`` may draw (one with control characters to show visibly);
    a search's matches are drawn from ``rich(i)``."""

    def __len__(self) -> int: ...

    def plain(self, i: int) -> str: ...

    def rich(self, i: int) -> Text: ...


MAX_LINE_CHARS = 20_000  # a longer line (a trace's one-line 100 MB dump) is cut for display


def _cut(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    return f"{line[:MAX_LINE_CHARS]} … {len(line) - MAX_LINE_CHARS:,} more characters not shown"


class TextLines:
    """Lines of plain text, styled on demand by an optional function."""

    def __init__(self, lines: Sequence[str] | str,
                 styler: Callable[[int, str], Text] | None = None) -> None:
        if isinstance(lines, str):
            lines = [ln.rstrip("\r") for ln in lines.expandtabs(4).split("\n")]
            if lines and not lines[-1]:
                lines.pop()
        self.lines = [_cut(ln) for ln in lines]
        self.styler = styler
        self._width: int | None = None

    def max_width(self) -> int:
        if self._width is None:  # measured once (a view resized, a source shown again)
            self._width = widest(self.lines)
        return self._width

    def __len__(self) -> int:
        return len(self.lines)

    def plain(self, i: int) -> str:
        return self.lines[i]

    def rich(self, i: int) -> Text:
        s = self.lines[i]
        return self.styler(i, s) if self.styler else Text(s)


class RichLines:
    """Lines already styled (``rich.text.Text``); with ``drawn``, each line's segments as its
    ``Text`` renders to (``render.draw_lines``; None for a line drawn from its ``Text``)."""

    def __init__(self, lines: Iterable[Text],
                 drawn: Sequence[list[Segment] | None] | None = None) -> None:
        self.lines = list(lines)
        self._plain = [t.plain for t in self.lines]
        self._drawn = drawn if drawn is not None and len(drawn) == len(self.lines) else None
        self._width: int | None = None

    def max_width(self) -> int:
        if self._width is None:
            self._width = widest(self._plain)
        return self._width

    def segments(self, i: int) -> list[Segment] | None:
        return self._drawn[i] if self._drawn is not None else None

    def __len__(self) -> int:
        return len(self.lines)

    def plain(self, i: int) -> str:
        return self._plain[i]

    def rich(self, i: int) -> Text:
        return self.lines[i]


EMPTY = TextLines([])


class TextView(SteadyScrollbars, ScrollView, can_focus=True):
    """Virtual-scrolling lines with a cursor, search highlights and a gutter."""

    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", show=False, id="view.up"),
        Binding("down", "cursor(1)", "Down", show=False, id="view.down"),
        Binding("pageup", "page(-1)", "Page up", show=False, id="view.pageup"),
        Binding("pagedown,space", "page(1)", "Page down", show=False, id="view.pagedown"),
        Binding("home", "goto_start", "Top", show=False, id="view.home"),
        Binding("end", "goto_end", "Bottom", show=False, id="view.end"),
        Binding("left", "hscroll(-8)", "Left", show=False, id="view.left"),
        Binding("right", "hscroll(8)", "Right", show=False, id="view.right"),
        Binding("enter", "activate", "Open", show=False, id="view.activate"),
    ]

    COMPONENT_CLASSES = {"textview--cursor", "textview--match", "textview--gutter",
                         "textview--placeholder"}

    DEFAULT_CSS = """
    TextView { background: $surface; color: $foreground; }
    TextView:focus { background-tint: $foreground 3%; }
    TextView > .textview--cursor { background: $primary 25%; }
    TextView:focus > .textview--cursor { background: $primary 45%; }
    TextView > .textview--match { background: $warning 50%; color: $text; text-style: bold; }
    TextView > .textview--gutter { color: $text-muted; }
    TextView > .textview--placeholder { color: $text-muted; text-style: italic; }
    """

    cursor: reactive[int] = reactive(0, always_update=False, repaint=False)

    class _LineMessage(Message):
        """About one line (``index``) of a view."""

        def __init__(self, view: "TextView", index: int) -> None:
            super().__init__()
            self.view = view
            self.index = index

        @property
        def control(self) -> "TextView":
            return self.view

    class CursorMoved(_LineMessage):
        """The cursor moved to line ``index``."""

    class Activated(_LineMessage):
        """Enter (or a click) on line ``index``."""

    def __init__(self, source: LineSource | None = None, *, gutter: bool = False,
                 show_cursor: bool = True, placeholder: str = "", name: str | None = None,
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.source: LineSource = source or EMPTY
        self.line_numbers = gutter
        self.show_cursor = show_cursor
        self.placeholder = placeholder
        self.query_text = ""
        self._cache: OrderedDict[object, Strip] = OrderedDict()  # by line_key, else index
        self._line_key: Callable[[int], object] | None = None
        self._gutter_width = 0
        self._update_size()

    # -- content -------------------------------------------------------------------------------

    def set_source(self, source: LineSource, *, cursor: int = 0, keep_scroll: bool = False,
                   placeholder: str | None = None) -> None:
        same = source is self.source  # (the code screen's extern calls: the wrapper at each)
        key = getattr(source, "line_key", None)
        shown = self._rows_shown() if key is not None and self._line_key is not None else None
        self.source = source
        if placeholder is not None:
            self.placeholder = placeholder
        if not same and (key is None or self._line_key is None):
            self._cache.clear()  # strips by index are another source's lines
        self._line_key = key
        self._update_size(repaint=False)
        self.set_reactive(TextView.cursor, max(0, min(cursor, len(source) - 1)))
        if keep_scroll:
            if cursor:
                self.scroll_cursor_visible(center=True)
        else:  # one scroll, straight to where the cursor shows (a scroll repaints the view)
            self._scroll_to_line(self.cursor if cursor else 0)
        self._repaint_changed(shown)
        self.post_message(self.CursorMoved(self, self.cursor))

    def _rows_shown(self) -> tuple[object, ...]:
        """What each row of the view draws (by ``line_key``), where it is scrolled, and as
        wide: two equal are painted the same."""
        n, top = len(self.source), self.scroll_offset.y
        key, gutter = self._line_key, self._gutter_width
        assert key is not None
        rows = [(key(i), self.show_cursor and i == self.cursor, i if gutter else None)
                if i < n else None for i in range(top, top + self.size.height)]
        return (self.scroll_offset, self.size, gutter, n == 0 and self.placeholder, *rows)

    def _repaint_changed(self, shown: tuple[object, ...] | None) -> None:
        """Repaint the rows that draw otherwise than ``shown`` (``_rows_shown`` before the
        source changed; None: all of them). The pass stepper's next stage is mostly the same
        graph, lines and scroll: a pass that changed nothing repaints no row of it."""
        if shown is None or self._line_key is None:
            self.refresh()
            return
        now = self._rows_shown()
        if now[:4] != shown[:4]:
            self.refresh()
            return
        width = self.size.width
        for y, (was, row) in enumerate(zip(shown[4:], now[4:])):
            if was != row:
                self.refresh(Region(0, y, width, 1))

    def _scroll_to_line(self, line: int) -> None:
        """Scroll to the top, or, where ``line`` is below the first screenful, to ``line`` in
        the middle of the view (as ``scroll_cursor_visible(center=True)`` from the top)."""
        height = max(1, self.scrollable_content_region.height or self.size.height)
        y = 0 if line < height else max(0, line - height // 2)
        self.scroll_to(0, y, animate=False, immediate=True)
        if line:
            self.scroll_cursor_visible(center=True)  # clamped short of it: once more after layout

    def extend_source(self, source: LineSource) -> None:
        """Show ``source``, whose first lines are the lines shown now, the same (the rest of a
        drawing shown in part first): what they drew is kept and is not painted again — only
        the rows below the last of them, and the scroll bars; cursor, scroll and search stay.
        (The compare screen showed its first screenful, then all of it: the whole view was
        drawn again for the same lines, 10-20 ms on the UI thread.)"""
        shown = len(self.source)
        if getattr(source, "line_key", None) is not None or self._line_key is not None \
                or len(source) < shown:
            self.set_source(source, cursor=self.cursor, keep_scroll=True)
            return
        gutter = self._gutter_width
        self.source = source
        self._update_size(repaint=False)
        if self._gutter_width != gutter:
            self.refresh()  # the line numbers are wider: every row moves
            return
        top = shown - self.scroll_offset.y  # the first row that showed no line
        height = self.size.height
        if top < height:
            top = max(0, top)
            self.refresh(Region(0, top, self.size.width, height - top))

    def refresh_lines_cache(self) -> None:
        """Forget rendered lines (the source's styling changed)."""
        self._cache.clear()
        self.refresh()

    def _update_size(self, repaint: bool = True) -> None:
        """The view's virtual size from its lines (its scroll bars follow); ``repaint``: the
        whole view painted again (its lines changed)."""
        n = len(self.source)
        self._gutter_width = len(str(n)) + 1 if self.line_numbers and n else 0
        known = getattr(self.source, "max_width", None)
        if known is not None:
            width = known()
        else:
            width = widest(map(self.source.plain, range(n)))
        if n == 0 and self.placeholder:
            width = len(self.placeholder)
        # as wide as the widest line, not a column more: a line drawn to the view's whole
        # width (``line_width``) scrolls nothing sideways (one more column showed a horizontal
        # scrollbar over the view's last row, on every screen drawing tables to its width)
        size = Size(width + self._gutter_width, max(n, 1))
        if size == self.virtual_size:
            return
        styles = self.styles
        if not self.is_mounted or (styles.width and styles.width.is_auto) \
                or (styles.height and styles.height.is_auto):
            self.virtual_size = size  # the view's own size follows its lines: lay out again
            return
        # the view's size is set by its CSS, not by its lines: no layout of the whole screen
        # (measured: a step of the pass stepper to a snapshot of another size laid the screen
        # out again, most of that key's time); the scrollbars follow (shown, hidden: they lay
        # out what they need)
        self.set_reactive(TextView.virtual_size, size)
        self._scroll_update(size)
        if repaint:
            self.refresh()

    def line_width(self, least: int = 60) -> int:
        """The columns a line has in this view (``least`` at fewest): its width less the
        vertical scrollbar's, which shows once its lines are more than its rows, and the line
        numbers' (the app's width before the view is laid out). Lines drawn to this width
        (tables, panels: ``render.to_lines``) never scroll sideways."""
        styles = self.styles
        bar = 0 if styles.overflow_y == "hidden" else styles.scrollbar_size_vertical
        width = self.size.width or self.app.size.width
        return max(least, width - bar - self._gutter_width)

    @property
    def line_count(self) -> int:
        return len(self.source)

    def current_plain(self) -> str:
        return self.source.plain(self.cursor) if self.line_count else ""

    def shown_plain(self, i: int) -> str:
        """Line ``i`` as it is drawn — control characters shown visibly (``inert``), as
        ``_line_strip`` paints them: what search reads, so that it finds what is shown."""
        text = self.source.plain(i)
        return inert(text, multiline=False) if has_unsafe(text) else text

    # -- rendering -----------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        """Styles changed (a theme, or only the focus: ``TextView:focus`` tints the view). The
        drawn lines are kept unless what they hold changed — the search match's style; the
        view's own colours go under them as each line is painted."""
        super().notify_style_update()
        drawn_with = self._drawn_match
        self._styles = None
        if drawn_with is not None and drawn_with != self._style("match"):
            self._cache.clear()
            self._drawn_match = None

    # the search match's style of the lines kept drawn with a match (None: none were): a
    # second style update before the next paint cleared them all (the compare screen's
    # first screenful, drawn again from its text when the rest brought a scroll bar)
    _drawn_match: Style | None = None

    _styles: dict[str, Style] | None = None
    _on_base: dict[Style | None, Style] = {}  # a segment's style over the view's (per change)

    def _style(self, name: str) -> Style:
        """Resolved styles, computed once per style change (``rich_style`` is not cheap)."""
        if self._styles is None:
            base = self.rich_style
            self._on_base = {None: base}
            self._styles = {"base": base}
            for part in ("cursor", "match", "gutter", "placeholder"):
                self._styles[part] = base + self.get_component_rich_style(f"textview--{part}")
        return self._styles[name]

    def on_focus(self) -> None:
        self._styles = None

    def on_blur(self) -> None:
        self._styles = None

    def _line_strip(self, i: int) -> Strip:
        key = self._line_key(i) if self._line_key is not None else i
        strip = self._cache.get(key)
        if strip is not None:
            self._cache.move_to_end(key)
            return strip
        segments = getattr(self.source, "segments", None)
        drawn = segments(i) if segments is not None and not self.query_text else None
        strip = Strip(drawn) if drawn is not None else self._rich_strip(i)
        final = getattr(self.source, "is_final", None)
        if final is not None and not final(i):
            return strip  # drawn for now (code not highlighted yet): not kept
        self._cache[key] = strip
        if len(self._cache) > CACHE_LINES:
            self._cache.popitem(last=False)
        return strip

    def _rich_strip(self, i: int) -> Strip:
        text = inert_rich(self.source.rich(i)).copy()  # nothing from a trace reaches the terminal raw
        text.end = ""
        if text.style:  # Text.render ignores the base style of a text without spans
            text.stylize_before(text.style)
            text.style = ""
        if self.query_text:
            match_style = self._drawn_match = self._style("match")
            plain = text.plain.lower()
            q = self.query_text.lower()
            start = plain.find(q)
            while start != -1:
                text.stylize(match_style, start, start + len(q))
                start = plain.find(q, start + len(q))
        return Strip(list(text.render(self.app.console, end="")))

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        i = scroll_y + y
        width = self.scrollable_content_region.width
        base = self._style("base")
        n = len(self.source)
        if n == 0:
            if y == 0 and self.placeholder:
                style = self._style("placeholder")
                return Strip([Segment(self.placeholder, style)]).crop_extend(0, width, base)
            return Strip.blank(width, base)
        if i >= n:
            return Strip.blank(width, base)
        gw = self._gutter_width
        line = self._line_strip(i)
        room = width - gw
        body = line.crop(scroll_x, scroll_x + room)
        if line.cell_length > scroll_x + room > scroll_x + 1 and self.styles.overflow_x == "hidden":
            # no horizontal scrollbar tells of more to the right: its last column does
            body = Strip([*body.crop(0, room - 1)._segments, Segment("…", self._style("gutter"))])
        is_cursor = self.show_cursor and i == self.cursor
        line_style = self._style("cursor") if is_cursor else base
        # one strip made per line (Textual's crop, apply_style, extend and join make one each):
        # the view's colours under every segment (a segment's own style wins), and the cursor's
        # background over everything on its line
        over = Style(bgcolor=line_style.bgcolor) if is_cursor else None
        segments = [Segment(f"{i + 1:>{gw - 1}} ", self._style("gutter"))] if gw else []
        on_base = self._on_base  # (Style's + is cached too, but slower than a dict)
        for text, style, _ in body._segments:
            styled = on_base.get(style)
            if styled is None:
                styled = on_base[style] = base + style
            segments.append(Segment(text, styled + over if over is not None else styled))
        pad = width - gw - body.cell_length
        if pad > 0:
            segments.append(Segment(" " * pad, line_style + over if over is not None
                                    else line_style))
        return Strip(segments, gw + max(0, width - gw))

    # -- cursor and scrolling ------------------------------------------------------------------

    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, len(self.source) - 1)) if len(self.source) else 0

    def watch_cursor(self, old: int, new: int) -> None:
        if old == new:
            return
        self._refresh_index(old)
        self._refresh_index(new)
        self.post_message(self.CursorMoved(self, new))

    def _refresh_index(self, i: int) -> None:
        y = i - self.scroll_offset.y
        if 0 <= y < self.size.height:
            self.refresh(Region(0, y, self.size.width, 1))

    def move_to(self, index: int, *, center: bool = True) -> None:
        self.cursor = index
        self.scroll_cursor_visible(center=center)

    def scroll_cursor_visible(self, center: bool = False, *, again: bool = True) -> None:
        height = max(1, self.scrollable_content_region.height or self.size.height)
        top = self.scroll_offset.y
        c = self.cursor
        if center and not (top <= c < top + height):
            self.scroll_to(y=max(0, c - height // 2), animate=False, immediate=True)
        elif c < top:
            self.scroll_to(y=c, animate=False, immediate=True)
        elif c >= top + height:
            self.scroll_to(y=c - height + 1, animate=False, immediate=True)
        top = self.scroll_offset.y
        if again and not (top <= c < top + height):
            # the scroll range follows virtual_size only once laid out: a view just mounted, or
            # given a longer source, clamps the scroll short of the cursor. Once more after that.
            self.call_after_refresh(self.scroll_cursor_visible, center, again=False)

    def action_cursor(self, delta: int) -> None:
        if not self.show_cursor:
            self.scroll_to(y=self.scroll_offset.y + delta, animate=False, immediate=True)
            return
        self.cursor += delta
        self.scroll_cursor_visible()

    def action_page(self, direction: int) -> None:
        height = max(1, self.scrollable_content_region.height - 1)
        if self.show_cursor:
            self.cursor += direction * height
        self.scroll_to(y=self.scroll_offset.y + direction * height, animate=False, immediate=True)
        if self.show_cursor:
            self.scroll_cursor_visible()

    def action_goto_start(self) -> None:
        self.cursor = 0
        self.scroll_to(y=0, animate=False, immediate=True)

    def action_goto_end(self) -> None:
        self.cursor = len(self.source) - 1
        self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True)

    def action_hscroll(self, delta: int) -> None:
        # forced: a view may hide its horizontal scrollbar (overflow-x: hidden) and still
        # scroll with ← and →
        self.scroll_to(x=max(0, self.scroll_offset.x + delta), animate=False, immediate=True,
                       force=True)

    def action_activate(self) -> None:
        if len(self.source):
            self.post_message(self.Activated(self, self.cursor))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or not len(self.source):
            return
        index = self.scroll_offset.y + offset.y
        if index < len(self.source):
            self.cursor = index
            if event.chain >= 2:
                self.action_activate()

    # -- search --------------------------------------------------------------------------------

    def set_query(self, query: str) -> None:
        if query != self.query_text:
            self.query_text = query
            self.refresh_lines_cache()

    def search(self, query: str, forward: bool = True, *, include_current: bool = False) -> bool:
        """Move the cursor to the next line containing ``query`` (case-insensitive, wraps)."""
        self.set_query(query)
        n = len(self.source)
        if not query or not n:
            return False
        q = query.lower()
        step = 1 if forward else -1
        start = self.cursor if include_current else self.cursor + step
        for k in range(n):
            i = (start + step * k) % n
            if q in self.shown_plain(i).lower():
                self.move_to(i)
                return True
        return False

    def match_count(self, query: str) -> int:
        q = query.lower()
        return sum(1 for i in range(len(self.source)) if q in self.shown_plain(i).lower())
