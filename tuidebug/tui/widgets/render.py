"""Turn rich renderables (tables, panels) into lines for a ``TextView``."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from rich.console import Console, ConsoleOptions, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from tuidebug.inert import inert_rich

MAX_TABLE_WIDTH = 1000


def table_width(console: Console, table: Table, options: ConsoleOptions) -> int:
    """The width to render ``table`` at: the available one, or its natural width when it would
    not fit without cutting a value — a no-wrap column squeezed (``32.…``), or columns held at
    their ``min_width`` running off the edge. Wrapping a wrappable column (a path, a config
    description) is fine: the table stays at the available width for that."""
    width = options.max_width
    extra = table._extra_width
    try:
        natural = table._calculate_column_widths(
            console, options.update_width(MAX_TABLE_WIDTH - extra))
        need = sum(natural) + extra
        if need <= width:
            return width  # it fits: nothing is squeezed (not measured a second time)
        squeezed = table._calculate_column_widths(console, options.update_width(width - extra))
    except Exception:  # rich's private layout changed: measure instead
        return max(width, min(MAX_TABLE_WIDTH, Measurement.get(
            console, options.update_width(MAX_TABLE_WIDTH), table).maximum))
    cut = sum(squeezed) + extra > width or any(
        s < n for s, n, c in zip(squeezed, natural, table.columns) if c.no_wrap or c.min_width)
    return min(need, MAX_TABLE_WIDTH) if cut else width


def to_lines(console: Console, renderables: list[RenderableType], width: int) -> list[Text]:
    """Render at ``width`` columns and return one ``Text`` per terminal line.

    A table is never squeezed below its natural minimum (each cell's longest word): rich would
    cut numbers to ``32.…`` to fit a narrow terminal. It is rendered wider instead, and the
    ``TextView`` showing the lines scrolls sideways.
    """
    options = console.options.update(width=max(40, width), height=None)
    out: list[Text] = []
    with _no_markup(console):
        for r in renderables:
            if isinstance(r, Text) and "\n" not in r.plain and r.cell_len <= width:
                out.append(inert_rich(r))
                continue
            opts = options
            if isinstance(r, Table):
                opts = options.update(width=table_width(console, r, options))
            for line in console.render_lines(r, opts, pad=False):
                t = Text()
                for seg in line:
                    if seg.control:
                        continue
                    t.append(seg.text, seg.style)
                t.rstrip()
                out.append(inert_rich(t))
    return out


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
    one (the UI thread keeps the app's)."""
    import io

    return Console(file=io.StringIO(), width=like.width, height=like.height,
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
