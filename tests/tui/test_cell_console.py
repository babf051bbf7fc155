"""``CellConsole`` draws a table's one-line cells itself: segment for segment what rich draws."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console
from rich.padding import Padding
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from tests.tui.test_render_tables import _hard_tables, _tables
from tuidebug.trace.diff import diff_traces
from tuidebug.trace.format.reader import Trace
from tuidebug.tui.widgets import cell_console
from tuidebug.tui.widgets.cell_console import CellConsole
from tuidebug.tui.widgets.render import _no_markup
from tuidebug.viewers.diff_view import diff_renderables


def _make(cls: type[Console]) -> Console:
    return cls(file=io.StringIO(), width=160, force_terminal=True, color_system="truecolor",
               legacy_windows=False)


def _styled_tables() -> list[Table]:
    """Cells with styles from every side: the table's, its border's, a header style, a
    column's, rows' alternating styles and a row's own, a text's style and spans (ending in
    white space, overlapping), a padding's style, strings, empty cells, a cell with a newline,
    a tab, justified right and centred, a cell that folds, a footer and sections."""
    t = Table(title=Text("styled", style="italic"), style="on grey11", border_style="blue",
              header_style="bold magenta", row_styles=["", "on grey19"], show_footer=True,
              padding=(0, 2, 0, 1))
    t.add_column("plain")
    t.add_column("col", style="cyan", footer="total")
    t.add_column("right", justify="right")
    t.add_column("centre", justify="center", no_wrap=True)
    t.add_column("fold", overflow="fold", max_width=12)
    spans = Text("ab cd  ", style="dim")
    spans.stylize("bold", 1, 4)
    spans.stylize("red", 3, 7)
    t.add_row("x", Text("yellow", style="yellow"), "1", "c", "short")
    t.add_row(spans, "", Text("9", style="green"), "", "a_very_long_name_that_folds")
    t.add_row(Padding(Text("padded", style="u"), (0, 1), style="on red"), "two\nlines",
              "tab\there", Text("x", justify="right"), "")
    t.add_section()
    t.add_row("after", "the", "section", "ends", Text("é", style="b"), style="reverse")
    grid = Table.grid(padding=0)
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("", Text("only spans", spans=[]))
    grid.add_row(Text.assemble(("a", "red"), " ", ("b", "green")), "   ")
    return [t, grid]


def _lines(console: Console, table: Table, width: int) -> list[list[Segment]]:
    with _no_markup(console):
        return console.render_lines(table, console.options.update(width=width), pad=False)


def test_cells_drawn_as_rich_draws_them(transformer_trace: Path, mlp_trace: Path,
                                        monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Every table of a comparison (two committed traces), the tables the table drawing is
    tested on, and tables styled from every side: the same segments (text, style) from a
    ``CellConsole`` as from rich's own console, at widths that fit and that squeeze — and most
    cells drawn by ``one_line`` (a third of its calls or more), not handed back to rich."""
    rich, cells = _make(Console), _make(CellConsole)
    drawn = []
    real = cell_console.one_line

    def counting(*args: object) -> object:
        line = real(*args)  # type: ignore[arg-type]
        drawn.append(line is not None)
        return line
    monkeypatch.setattr(cell_console, "one_line", counting)
    items = diff_renderables(diff_traces(Trace(mlp_trace), Trace(transformer_trace)))
    tables = [i for i in items if isinstance(i, Table)] + _tables() + _hard_tables() \
        + _styled_tables()
    assert len(tables) > 12
    checked = 0
    for width in (158, 100, 72, 50, 40, 24):
        for table in tables:
            assert _lines(cells, table, width) == _lines(rich, table, width), (width, table.title)
            checked += 1
    assert checked == 6 * len(tables)
    # handed back to rich: every table itself, a cell that wraps (more of them at narrow
    # widths) or has wide characters, and rich's own calls inside those
    assert drawn.count(True) > len(drawn) / 3 and drawn.count(False), (drawn.count(True),
                                                                        len(drawn))
