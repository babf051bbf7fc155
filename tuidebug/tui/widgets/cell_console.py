"""A console that draws a table's one-line cells itself, as rich draws them.

Rich draws each cell of a table through five layers (the cell's padding, the text wrapped,
justified, joined, its lines split and cropped, twice): about 0.25 ms a cell, 15 ms for one
10-row kernel table of the compare screen, most of drawing a comparison. A cell whose text fits
its column on one line needs none of that: ``CellConsole.render_lines`` makes the same segments
directly (the padding, the text padded to the column's width under its own style, rendered by
rich's own ``Text.render``, the cell's style applied) and leaves every other renderable (a cell
that wraps, is justified otherwise, holds a table or a tab; the table's frame) to rich. The
segments are rich's, segment for segment (``tests/tui/test_cell_console.py`` compares them on
every table the compare screen draws and on tables made to be hard).
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType
from rich.padding import Padding
from rich.segment import Segment
from rich.style import Style
from rich.text import Span, Text


class CellConsole(Console):
    """A ``Console`` whose ``render_lines`` draws a one-line table cell without rich's layers
    (``one_line``); anything else is drawn by rich."""

    def render_lines(self, renderable: RenderableType, options: ConsoleOptions | None = None,
                     *, style: Style | None = None, pad: bool = True,
                     new_lines: bool = False) -> list[list[Segment]]:
        line = None if new_lines else one_line(self, renderable, options or self.options, style)
        if line is None:
            return super().render_lines(renderable, options, style=style, pad=pad,
                                        new_lines=new_lines)
        return [line]


def one_line(console: Console, renderable: RenderableType, options: ConsoleOptions,
             style: Style | None) -> list[Segment] | None:
    """The one line rich's ``console.render_lines(renderable, options, style=style)`` gives
    for a text (or a string, or either in a ``Padding`` with no rows above or below, as a
    table's cell) that fits ``options.max_width`` on one line, justified left; None for
    anything else (rich draws it)."""
    if options.height is not None or options.max_width < 1:
        return None
    left = right = 0
    pad_style: Style | None = None
    inner: object = renderable
    if type(renderable) is Padding:
        if renderable.top or renderable.bottom or not renderable.expand:
            return None
        left, right = renderable.left, renderable.right
        pad_style = console.get_style(renderable.style)
        inner = renderable.renderable
    if isinstance(inner, str):
        inner = console.render_str(inner, highlight=options.highlight, markup=options.markup)
    if type(inner) is not Text:
        return None
    text = inner
    width = options.max_width - left - right
    plain = text.plain
    justify = text.justify or options.justify or "default"
    overflow = text.overflow or options.overflow or "fold"
    if (width < 1 or justify != "left" or overflow == "ignore" or "\n" in plain
            or "\t" in plain or len(plain) > width or cell_len(plain) != len(plain)):
        return None
    # Text.wrap: one line, justified left (padded to the width under the text's style), then
    # joined (the text's style a span over it all, before its own spans) and rendered
    padded = plain + " " * (width - len(plain))
    spans = ([Span(0, len(padded), text.style)] if text.style else []) + text.spans
    segments = [s for s in Text(padded, spans=spans).render(console) if s.text]
    if pad_style:
        segments = [Segment(s.text, pad_style + s.style) for s in segments]
    if left:
        segments.insert(0, Segment(" " * left, pad_style))
    if right:
        segments.append(Segment(" " * right, pad_style))
    if style:
        segments = [Segment(s.text, style + s.style) for s in segments]
    return segments
