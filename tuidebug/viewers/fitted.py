"""A one-line cell that fits itself to the width it is painted at: ``Row`` (the TUI's list rows,
the names in ``info``'s tables). Rich only: no torch, no Textual."""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text

from tuidebug.inert import inert_rich


class Row:
    """A list row on one line: ``head`` cut with an ellipsis to make room, ``tail`` kept whole.

    ``Row(Text("cpp_fused_add_native_layer_norm_2"), Text("  cpp 140l"))`` in 24 columns paints
    ``cpp_fused_add_n…  cpp 140l``. A rich renderable: it fits itself to the width it is painted
    at, so a resized pane needs nothing redone. Search matches the whole text (``plain``).
    """

    def __init__(self, head: Text, tail: Text | None = None, *, middle: bool = False,
                 start: bool = False) -> None:
        self.head = head
        self.tail = tail if tail is not None else Text()
        self.middle = middle  # cut the middle of the head: kernel names differ at their ends
        self.start = start  # cut the start of the head: a path's file name is at its end

    @property
    def plain(self) -> str:
        return self.head.plain + self.tail.plain

    def fit(self, width: int) -> Text:
        head, tail = inert_rich(self.head).copy(), inert_rich(self.tail)
        room = width - tail.cell_len
        if head.cell_len + tail.cell_len <= width:
            out = head + tail
        elif room >= 4:
            if self.start:
                out = Text("…") + head[len(head) - (room - 1):] + tail
            elif self.middle and room >= 12:
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
