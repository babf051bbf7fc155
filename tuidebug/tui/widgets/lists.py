"""Small selectable lists (stages, kernels, tuned ops), searchable like the text views."""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from tuidebug.viewers.inert import inert_rich


def _plain(prompt: object) -> str:
    plain = getattr(prompt, "plain", None)
    return plain if isinstance(plain, str) else str(prompt)


class Row:
    """A list row on one line: ``head`` cut with an ellipsis to make room, ``tail`` kept whole.

    ``Row(Text("cpp_fused_add_native_layer_norm_2"), Text("  cpp 140l"))`` in 24 columns paints
    ``cpp_fused_add_n…  cpp 140l``. A rich renderable: it fits itself to the width it is painted
    at, so a resized pane needs nothing redone. Search matches the whole text (``plain``).
    """

    def __init__(self, head: Text, tail: Text | None = None, *, middle: bool = False) -> None:
        self.head = head
        self.tail = tail if tail is not None else Text()
        self.middle = middle  # cut the middle of the head: kernel names differ at their ends

    @property
    def plain(self) -> str:
        return self.head.plain + self.tail.plain

    def fit(self, width: int) -> Text:
        head, tail = inert_rich(self.head).copy(), inert_rich(self.tail)
        room = width - tail.cell_len
        if head.cell_len + tail.cell_len <= width:
            out = head + tail
        elif room >= 4:
            if self.middle and room >= 12:
                keep_end = min(room // 3, 12)
                start = head[:room - keep_end - 1]
                start.append("…")
                out = start + head[len(head) - keep_end:] + tail
            else:
                head.truncate(room, overflow="ellipsis")
                out = head + tail
        else:
            out = head + tail
            out.truncate(width, overflow="ellipsis")
        out.no_wrap = True
        out.end = "\n"  # Textual counts a rich renderable's lines by its newlines
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.fit(options.max_width)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        full = self.head.cell_len + self.tail.cell_len
        least = min(full, self.tail.cell_len + 4)
        return Measurement(least, full).clamp(max_width=options.max_width)


class PickList(OptionList):
    """An ``OptionList`` that the screen's search (``/``) can move through.

    Every row is one line: a long prompt ends in an ellipsis instead of wrapping (Textual's
    ``OptionList`` wraps a ``Text`` whatever its ``no_wrap``; the CSS below does it). A ``Row``
    prompt keeps its tail (counts, a kernel's kind and size) and cuts its head instead.
    """

    DEFAULT_CSS = """
    PickList { height: 1fr; border: none; padding: 0; background: $surface;
               text-wrap: nowrap; text-overflow: ellipsis; }
    PickList:focus { border: none; background-tint: $foreground 3%; }
    """

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
