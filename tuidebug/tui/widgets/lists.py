"""Small selectable lists (stages, kernels, tuned ops), searchable like the text views."""

from __future__ import annotations

from typing import Any

from textual.css.styles import RulesMap
from textual.geometry import Region
from textual.reactive import reactive
from textual.strip import Strip
from textual.style import Style as VisualStyle
from textual.visual import RenderOptions, Visual
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from tuidebug.tui.widgets.scrollbars import SteadyScrollbars
from tuidebug.viewers.fitted import Row  # noqa: F401  (the lists' rows; the screens import it here)


class OneLine(Visual):
    """A list row's visual: one line high, without rendering it to find out. Every row of a
    ``PickList`` is one line (its CSS); Textual measured each prompt's height by rendering it,
    ~0.1 ms a row at every new list, show and resize: 14-21 ms for the 24-layer trace's 179
    kernels (the code screen's first show, a graph change, a screen built ahead)."""

    def __init__(self, inner: Visual) -> None:
        self.inner = inner

    def render_strips(self, width: int, height: int | None, style: VisualStyle,
                      options: RenderOptions) -> list[Strip]:
        return self.inner.render_strips(width, height, style, options)

    def get_optimal_width(self, rules: RulesMap, container_width: int) -> int:
        return self.inner.get_optimal_width(rules, container_width)

    def get_minimal_width(self, rules: RulesMap) -> int:
        return self.inner.get_minimal_width(rules)

    def get_height(self, rules: RulesMap, width: int) -> int:
        return 1


def _plain(prompt: object) -> str:
    plain = getattr(prompt, "plain", None)
    return plain if isinstance(plain, str) else str(prompt)


class PickList(SteadyScrollbars, OptionList):
    """An ``OptionList`` that the screen's search (``/``) can move through.

    Every row is one line: a long prompt ends in an ellipsis instead of wrapping (Textual's
    ``OptionList`` wraps a ``Text`` whatever its ``no_wrap``; the CSS below does it). A ``Row``
    prompt keeps its tail (counts, a kernel's kind and size) and cuts its head instead.
    """

    DEFAULT_CSS = """
    PickList { height: 1fr; border: none; padding: 0; background: $surface;
               text-wrap: nowrap; text-overflow: ellipsis; }
    PickList:focus { border: none; background-tint: $foreground 0%; }
    """
    # the focus is marked by the highlighted row (Textual's block cursor, faded when blurred),
    # not by tinting the list (OptionList:focus tints; 0% undoes it): a tint changes the style
    # every row is drawn with, and Textual keys each row's drawing by that style, so the first
    # focus change drew every visible row again (issue #30: 66-80 ms CPU on the 24-layer trace)

    # moving the highlight repaints the two rows it leaves and enters, not the whole list
    # (Textual's repaints every visible row: on the 24-layer trace's 80-row stage list, the
    # largest part of a step's frame)
    highlighted: reactive[int | None] = reactive(None, repaint=False)

    def watch_highlighted(self, old: int | None, new: int | None) -> None:
        super().watch_highlighted(new)
        for index in (old, new):
            self._refresh_row(index)

    def _refresh_row(self, index: int | None) -> None:
        if index is None or not self.is_mounted:
            return
        y = self._index_to_line.get(index)
        if y is None:
            self.refresh()  # not laid out yet: all of it
            return
        height = self._heights.get(index, 1)
        self.refresh(Region(0, y - self.scroll_offset.y, self.size.width, height))

    def scroll_to_highlight(self, top: bool = False) -> None:
        """Bring the highlighted row into sight: where it went out of sight, to the middle of
        the list (Textual scrolls it just to the edge, so each further step scrolled again,
        and a scroll draws every visible row again: on the 24-layer trace's stage list, half
        the steps of the pass stepper drew 42 rows instead of two)."""
        highlighted = self.highlighted
        height = self.scrollable_content_region.height
        if top or highlighted is None or not self.is_mounted or not height:
            super().scroll_to_highlight(top)
            return
        self._update_lines()
        y = self._index_to_line.get(highlighted)
        if y is None:
            return
        rows = self._heights.get(highlighted, 1)
        first = self.scroll_offset.y
        if first <= y and y + rows <= first + height:
            return  # in sight already
        self.scroll_to_region(Region(0, y, self.scrollable_content_region.width, rows),
                              force=True, animate=False, center=True, immediate=True)

    # -- rows drawn ahead ------------------------------------------------------------------
    # Textual draws a row the first time it comes into sight (its strips then cached): a scroll
    # to a part of the list not seen yet drew half a list of rows in that key's frame (the pass
    # stepper on the 24-layer trace: 21 rows, the most of its worst steps on the UI thread).
    # Once the list is painted, every row (at most ``AHEAD_ROWS``, those around the highlight)
    # is drawn into Textual's cache, ``AHEAD_STEP`` at a turn of the event loop, so that a key
    # pressed meanwhile waits for a few rows at most.
    AHEAD_ROWS = 400
    AHEAD_STEP = 8
    _ahead: list[int] | None = None  # the rows still to draw ahead; None: not planned yet
    _ahead_queued = False

    def set_options(self, options: Any) -> Any:
        self._ahead = None
        return super().set_options(options)

    def clear_options(self) -> Any:
        self._ahead = None
        return super().clear_options()

    def _clear_caches(self) -> None:  # a resize: the rows drawn are dropped
        self._ahead = None
        super()._clear_caches()

    def render_lines(self, crop: Region) -> list[Strip]:
        lines = super().render_lines(crop)
        if not self._ahead_queued and (self._ahead is None or self._ahead):
            self._ahead_queued = True
            self.call_later(self._draw_ahead)
        return lines

    def _draw_ahead(self) -> None:
        self._ahead_queued = False
        if not self.is_mounted or not self.scrollable_content_region:
            return
        if self._ahead is None:
            n, middle = self.option_count, self.highlighted or 0
            first = max(0, min(middle - self.AHEAD_ROWS // 2, n - self.AHEAD_ROWS))
            self._ahead = list(range(min(n, first + self.AHEAD_ROWS) - 1, first - 1, -1))
        style = self.get_visual_style("option-list--option")  # a row's, not highlighted
        for _ in range(min(self.AHEAD_STEP, len(self._ahead))):
            index = self._ahead.pop()
            if index < self.option_count:  # (an option removed meanwhile)
                self._get_option_render(self.get_option_at_index(index), style)
        if self._ahead:
            self._ahead_queued = True
            self.call_later(self._draw_ahead)

    def _get_visual(self, option: Option) -> Visual:
        visual = super()._get_visual(option)
        if not isinstance(visual, OneLine):  # kept on the option, as Textual keeps its own
            visual = option._visual = OneLine(visual)
        return visual

    def set_items(self, items: list[Option], highlighted: int | None = 0) -> None:
        self.set_options(items)
        if items and highlighted is not None:
            self.highlighted = max(0, min(highlighted, len(items) - 1))

    def index_of(self, option_id: str) -> int | None:
        try:
            return self.get_option_index(option_id)
        except Exception:
            return None

    def select_id(self, option_id: str) -> bool:
        i = self.index_of(option_id)
        if i is None:
            return False
        self.highlighted = i
        self.scroll_to_highlight()
        return True

    def search(self, query: str, forward: bool = True, *, include_current: bool = False) -> bool:
        n = self.option_count
        if not query or not n:
            return False
        q = query.lower()
        step = 1 if forward else -1
        cur = self.highlighted if self.highlighted is not None else -step
        start = cur if include_current else cur + step
        for k in range(n):
            i = (start + step * k) % n
            option = self.get_option_at_index(i)
            if not option.disabled and q in _plain(option.prompt).lower():
                self.highlighted = i
                self.scroll_to_highlight()
                return True
        return False

    def set_query(self, query: str) -> None:
        """Lists show matches by moving the highlight; nothing to redraw."""
