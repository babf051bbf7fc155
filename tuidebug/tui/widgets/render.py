"""Turn rich renderables (tables, panels) into lines for a ``TextView``."""

from __future__ import annotations

import copy
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Iterator

from rich.console import Console, ConsoleOptions, RenderableType
from rich.control import strip_control_codes
from rich.measure import Measurement
from rich.segment import Segment
from rich.table import Table
from rich.text import Span, Text

from tuidebug.inert import inert_rich

MAX_TABLE_WIDTH = 1000


def table_width(console: Console, table: Table, options: ConsoleOptions) -> int:
    """The width to render ``table`` at: the available one, or its natural width when it would
    not fit without cutting a value — a no-wrap column squeezed (``32.…``), or columns held at
    their ``min_width`` running off the edge. Wrapping a wrappable column (a path, a config
    description) is fine: the table stays at the available width for that."""
    return table_layout(console, table, options)[0]


def table_layout(console: Console, table: Table, options: ConsoleOptions
                 ) -> tuple[int, list[int] | None]:
    """``table_width``, and the widths rich gives the table's columns at that width (each with
    its padding; None where they are not known: rich measures them as it renders)."""
    width = options.max_width
    try:
        extra = table._extra_width
        ranges = _natural_ranges(console, table, options.update_width(MAX_TABLE_WIDTH - extra))
        if ranges is None:
            natural = table._calculate_column_widths(
                console, options.update_width(MAX_TABLE_WIDTH - extra))
        else:
            natural = [r.maximum or 1 for r in ranges]
        need = sum(natural) + extra
        if need <= width:
            # it fits: nothing is squeezed (not measured a second time); rich gives the
            # columns the same widths at ``width`` unless the table stretches to fill it
            return width, (None if table.expand or table.min_width else natural)
        squeezed = _squeezed(table, ranges, width - extra) if ranges is not None else None
        if squeezed is None:
            squeezed = table._calculate_column_widths(console, options.update_width(width - extra))
    except Exception:  # rich's private layout changed: measure instead
        return max(width, min(MAX_TABLE_WIDTH, Measurement.get(
            console, options.update_width(MAX_TABLE_WIDTH), table).maximum)), None
    cut = sum(squeezed) + extra > width or any(
        s < n for s, n, c in zip(squeezed, natural, table.columns) if c.no_wrap or c.min_width)
    if not cut:
        return width, squeezed
    return min(need, MAX_TABLE_WIDTH), (natural if need <= MAX_TABLE_WIDTH else None)


def _natural_ranges(console: Console, table: Table, options: ConsoleOptions
                    ) -> list[Measurement] | None:
    """Each column's (minimum, maximum) width at ``options`` (its cells measured once), for a
    table whose widths at a narrower width follow from these alone (``_squeezed``); None for
    one that stretches, or has columns with a ratio or a minimum or maximum width (rich works
    those out itself)."""
    if table.expand or table.width is not None or table.min_width is not None or any(
            c.ratio or c.min_width is not None or c.max_width is not None for c in table.columns):
        return None
    ranges = [table._measure_column(console, options, c) for c in table.columns]
    if sum(r.maximum or 1 for r in ranges) > options.max_width:
        return None  # collapsed even at the widest: rich's own computation
    return ranges


def _squeezed(table: Table, ranges: list[Measurement], max_width: int) -> list[int] | None:
    """The widths rich gives the columns of ``table`` at ``max_width`` (borders excluded),
    worked out as rich does (``Table._calculate_column_widths``) from ranges measured at a
    greater width: a cell's width at a narrower one is its width there clipped, so rich's two
    measurements at the narrower width (before and after it shares the width out) are not
    made again (a third of drawing the compare screen's kernel tables). None where a column
    ends narrower than its padding (rich measures such a column otherwise)."""
    from rich._ratio import ratio_reduce

    widths = [min(r.maximum, max_width) or 1 for r in ranges]
    if sum(widths) > max_width:
        widths = table._collapse_widths(
            widths, [c.width is None and not c.no_wrap for c in table.columns], max_width)
        if sum(widths) > max_width:
            widths = ratio_reduce(sum(widths) - max_width, [1] * len(widths), widths, widths)
        if any(w <= table._get_padding_width(c._index) + 1
               for w, c in zip(widths, table.columns)):
            return None
        widths = [min(r.maximum, w) for r, w in zip(ranges, widths)]
    return widths


def _measured(table: Table, widths: list[int] | None) -> Table:
    """``table`` to render with its columns held at ``widths`` (``table_layout``'s): a copy
    whose columns have those fixed widths, which rich renders without measuring every cell
    again (measured twice before: by ``table_layout``, then by rich at the width chosen —
    half of drawing a comparison's kernel tables). The table itself is left as it is (drawn
    again at another width after a resize, maybe in another thread meanwhile)."""
    if widths is None or table.expand or table.width is not None or table.min_width:
        return table
    try:
        held = [w - table._get_padding_width(c._index) for c, w in zip(table.columns, widths)]
    except Exception:  # rich's private layout changed: rich measures it as it renders
        return table
    if min(held, default=1) < 1:
        # a column with no room inside its padding: rich draws one held at 0 otherwise than
        # it draws one it squeezed there itself (a cell of it, padding 0: Table.grid()), so
        # rich measures it as it renders
        return table
    columns = [replace(c, width=w) for c, w in zip(table.columns, held)]
    held = copy.copy(table)
    held.columns = columns
    return held


def to_lines(console: Console, renderables: list[RenderableType], width: int) -> list[Text]:
    """Render at ``width`` columns and return one ``Text`` per terminal line.

    A table is never squeezed below its natural minimum (each cell's longest word): rich would
    cut numbers to ``32.…`` to fit a narrow terminal. It is rendered wider instead, and the
    ``TextView`` showing the lines scrolls sideways.
    """
    return draw_lines(console, renderables, width)[0]


Drawing = list[Segment] | None  # a line's segments, as a TextView draws them (None: from its Text)


def draw_lines(console: Console, renderables: list[RenderableType], width: int
               ) -> tuple[list[Text], list[Drawing]]:
    """``to_lines``, and each line's segments as rendering its ``Text`` gives them (the same
    text and styles, kept from rendering the renderables): a ``TextView`` draws a line from
    them without rendering its ``Text`` again (``RichLines``' ``segments``; most of painting a
    comparison's lines on the UI thread). None for a line whose ``Text`` differs from what was
    rendered (made inert: control characters, links) or was not rendered here."""
    options = console.options.update(width=max(40, width), height=None)
    out: list[Text] = []
    drawn: list[Drawing] = []
    with _no_markup(console):
        for r in renderables:
            if isinstance(r, Text) and "\n" not in r.plain and r.cell_len <= width:
                out.append(inert_rich(r))
                drawn.append(None)
                continue
            opts = options
            if isinstance(r, Table):
                width_at, widths = table_layout(console, r, options)
                opts = options.update(width=width_at)
                r = _measured(r, widths)
            for line in console.render_lines(r, opts, pad=False):
                text, segments = _line(line)
                out.append(text)
                drawn.append(segments)
    return out, drawn


def _line(line: list[Segment]) -> tuple[Text, Drawing]:
    """One rendered line as a ``Text`` (control segments out, control codes stripped as
    ``Text.append`` does, trailing white space dropped, made inert), and as the segments it
    renders to (None where ``inert_rich`` changed it)."""
    kept: list[Segment] = []
    texts: list[str] = []
    spans: list[Span] = []
    at = 0
    for seg in line:  # as Text.append(seg.text, seg.style) would, each stripped once
        if seg.control or not seg.text:
            continue
        shown = strip_control_codes(seg.text)
        if seg.style:
            spans.append(Span(at, at + len(shown), seg.style))
        if shown:
            texts.append(shown)
            kept.append(Segment(shown, seg.style))
            at += len(shown)
    t = Text("".join(texts), spans=spans)
    t.rstrip()
    safe = inert_rich(t)
    if safe is not t:
        return safe, None
    while kept:  # the trailing white space ``rstrip`` dropped
        last = kept[-1]
        rest = last.text.rstrip()
        if rest:
            kept[-1] = Segment(rest, last.style)
            break
        kept.pop()
    if sum(len(seg.text) for seg in kept) != len(t.plain):
        return t, None
    return t, kept


@dataclass
class Rendered:
    """Renderables and their lines at ``width`` columns (``render_in_worker``)."""

    items: list[RenderableType]
    lines: list[Text]
    width: int


def render_in_worker(like: Console, items: list[RenderableType], width: int) -> Rendered:
    """``to_lines`` for a worker thread (a console of its own, drawing as ``like`` does): a
    summary's tables rendered on the UI thread held it 130 ms on the 24-layer trace, in the
    first paint."""
    return Rendered(items, to_lines(thread_console(like), items, width), width)


def thread_console(like: Console) -> Console:
    """A console to render with in a worker thread, drawing as ``like`` (the app's) does:
    ``to_lines`` changes its console's settings while it renders, so two threads never share
    one (the UI thread keeps the app's). A ``CellConsole``: a table's one-line cells drawn
    without rich's layers, to the same segments."""
    import io

    from tuidebug.tui.widgets.cell_console import CellConsole

    return CellConsole(file=io.StringIO(), width=like.width, height=like.height,
                   color_system=like.color_system, force_terminal=True, legacy_windows=False)


@contextmanager
def _no_markup(console: Console) -> Iterator[None]:
    """Strings in tables and panels are data: rendered as written, never as Rich markup or
    emoji codes (``[/]`` in a kernel name must not raise, ``[link=…]`` must not make a link)."""
    saved = (getattr(console, "_markup", None), getattr(console, "_emoji", None))
    console._markup, console._emoji = False, False
    try:
        yield
    finally:
        console._markup, console._emoji = saved
