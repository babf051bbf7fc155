"""Tables drawn into lines for a TextView (``widgets/render.py``): measured once, drawn as rich
draws them."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tuidebug.tui.widgets import render
from tuidebug.tui.widgets.render import table_layout, to_lines


def _console() -> Console:
    return Console(file=io.StringIO(), width=120, force_terminal=True, color_system="truecolor",
                   legacy_windows=False)


def _tables() -> list[Table]:
    """A table that fits, one whose wrappable columns are squeezed (kernel names folded, as
    the compare screen's kernel table), one cut were it squeezed (a no-wrap column: drawn at
    its natural width), a grid and a table with padding, a title and a header style."""
    fits = Table(title="fits", title_justify="left", show_edge=False)
    for col in ("flag", "A", "B"):
        fits.add_column(col, style="cyan" if col == "flag" else None)
    fits.add_row("max_fusion_size", "64", Text("16", style="yellow"))
    squeezed = Table(title="kernels", title_justify="left", show_edge=False)
    for col in ("", "A", "B", "lines"):
        squeezed.add_column(col, overflow="fold")
    for i in range(6):
        name = f"cpp_fused_add_native_layer_norm_native_layer_norm_backward_view_{i}"
        squeezed.add_row(Text("unchanged", style="dim"), name, name + "_b", f"{i} → {i + 1}")
    cut = Table(show_header=False)
    cut.add_column(no_wrap=True)
    cut.add_column(no_wrap=True)
    cut.add_row("x" * 70, "3.14159 → 2.71828 " * 3)
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("A", Text.assemble(("/some/trace", "cyan"), "  ", ("OK", "green")))
    padded = Table(show_header=False, show_edge=False, box=None, padding=(0, 2))
    padded.add_column(style="bold")
    padded.add_column()
    for i in range(5):
        padded.add_row(f"  stage {i}", Text(f"{i * 100} → {i * 90}", style="green"))
    crowded = Table(title="crowded")  # wrappable columns shared out, then cut evenly
    for i in range(8):
        crowded.add_column(f"column {i}", no_wrap=i == 7)
    for r in range(3):
        crowded.add_row(*(f"value_{r}_{i} and words" * (i % 3 + 1) for i in range(8)))
    return [fits, squeezed, cut, grid, padded, crowded]


def _as_rich_draws(console: Console, table: Table, width: int) -> list[tuple[str, list]]:
    """``table`` as rich draws it at the width ``table_layout`` chose (rich measuring it)."""
    options = console.options.update(width=width, height=None)
    at = table_layout(console, table, options)[0]
    out = []
    for line in console.render_lines(table, options.update(width=at), pad=False):
        t = Text()
        for seg in line:
            if not seg.control:
                t.append(seg.text, seg.style)
        t.rstrip()
        out.append((t.plain, [(s.start, s.end, str(s.style)) for s in t.spans]))
    return out


def test_a_table_is_drawn_as_rich_draws_it_measured_once() -> None:
    """Each table drawn by ``to_lines`` is, line for line and style for style, what rich draws
    at the width chosen — at several widths (fits, squeezed, cut) — though rich is given the
    columns' widths and measures no cell again: counted, each table's cells are measured once,
    in ``table_layout`` (before: three times for a table squeezed, twice for one that fits,
    and again by rich as it drew it: most of drawing the compare screen's kernel tables)."""
    console = _console()
    measured: list[str] = []
    real = Table._measure_column

    def counting(self: Table, console: Console, options: object, column: object) -> object:
        if getattr(column, "width", None) is None:  # its cells measured (not a fixed width)
            measured.append(str(self.title))
        return real(self, console, options, column)  # type: ignore[arg-type]

    checked = 0
    for width in (120, 80, 60, 40):
        for table in _tables():
            expected = _as_rich_draws(console, table, width)
            measured.clear()
            Table._measure_column = counting  # type: ignore[method-assign]
            try:
                at, widths = table_layout(console, table, console.options.update(width=width))
                in_layout = len(measured)
                lines = to_lines(console, [table], width)
            finally:
                Table._measure_column = real  # type: ignore[method-assign]
            got = [(t.plain, [(s.start, s.end, str(s.style)) for s in t.spans]) for t in lines]
            assert got == expected, (width, table.title)
            checked += 1
            if table.title == "crowded" and width <= 60:
                continue  # columns squeezed below their padding: rich measures those itself
            assert widths is not None, (width, table.title)
            assert in_layout == len(table.columns), (width, table.title, in_layout)
            assert len(measured) == 2 * in_layout, "to_lines measured the cells once more"
    assert checked == 24


def test_a_table_drawn_is_left_as_it_was() -> None:
    """The widths held while a table is drawn are a copy's: the table itself is drawn again
    at another width (a resize) as it would be the first time."""
    console = _console()
    table = _tables()[1]
    narrow = to_lines(console, [table], 60)
    assert all(c.width is None for c in table.columns)
    wide = to_lines(console, [table], 120)
    assert [t.plain for t in wide] == [p for p, _ in _as_rich_draws(console, table, 120)]
    assert len(narrow) > len(wide)
    assert render.MAX_TABLE_WIDTH >= 120


def _cells(strip: object) -> list[tuple[str, object]]:
    """A drawn line character by character, each with its style (how it is split in segments
    aside)."""
    return [(ch, seg.style) for seg in strip for ch in seg.text]  # type: ignore[attr-defined]


async def test_lines_drawn_from_their_segments_are_drawn_as_from_their_text() -> None:
    """``draw_lines`` keeps each line's segments (the compare screen's lines are drawn from
    them, not by rendering each ``Text`` again on the UI thread): a view shows every row the
    same, character for character and style for style, as from the ``Text`` alone — with the
    cursor on a row, scrolled sideways, and for the lines ``inert_rich`` changed (an escape
    character, a link: drawn from their ``Text``, made inert)."""
    from rich.panel import Panel
    from rich.style import Style
    from textual.app import App, ComposeResult

    from tuidebug.tui.widgets.render import draw_lines
    from tuidebug.tui.widgets.textview import RichLines, TextView

    linked = Table(title="links")
    linked.add_column("where")
    linked.add_row(Text("a link", style=Style(link="https://example.com", bold=True)))
    escaped = Table(show_header=False)
    escaped.add_column()
    escaped.add_row("clear \x1b[2J screen")
    items = [*_tables(), linked, escaped,
             Panel(Text("• one\n• two", style="yellow"), title="what changed"),
             Text("a note, trailing spaces   ", style="dim")]
    console = _console()
    lines, drawn = draw_lines(console, items, 100)
    assert len(drawn) == len(lines) and sum(d is not None for d in drawn) > 40
    assert drawn[lines.index(next(t for t in lines if "clear" in t.plain))] is None
    assert drawn[lines.index(next(t for t in lines if "a link" in t.plain))] is None

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield TextView(id="v")

    app = One()
    async with app.run_test(size=(90, 200)) as pilot:
        view = app.query_one("#v", TextView)
        shown = []
        for source in (RichLines(lines), RichLines(lines, drawn)):
            rows = []
            for x in (0, 7):
                view.set_source(source, cursor=3)
                view.scroll_to(x, 0, animate=False, immediate=True)
                await pilot.pause()
                assert view.scroll_offset.x == x
                rows.append([_cells(view.render_line(y)) for y in range(len(lines))])
            shown.append(rows)
        assert shown[0] == shown[1]
        assert any("a link" in "".join(ch for ch, _ in row) for row in shown[1][0])


def _hard_tables() -> list[Table]:
    """Padding-0 grids (``Table.grid()``, as the error site's) squeezed until columns have no
    room left, and cells of wide characters (CJK, emoji: two cells each) in no-wrap, wrapping
    and folding columns."""
    grid = Table.grid()
    for i in range(30):
        grid.add_column(no_wrap=i % 3 == 0)
    grid.add_row(*(f"c{i}" * (i % 4 + 1) for i in range(30)))
    grid.add_row(*("x" for _ in range(30)))
    spaced = Table.grid(padding=(0, 1))
    for _ in range(25):
        spaced.add_column()
    spaced.add_row(*(f"word {i} more" for i in range(25)))
    wide = Table(title="宽字符", show_edge=False)
    wide.add_column("名前", no_wrap=True)
    wide.add_column("説明")
    wide.add_column("fold", overflow="fold")
    for i in range(4):
        wide.add_row("カーネル" * (i + 1), "融合された演算 の 説明 " * (i + 1),
                     "🚀🔥✨" * (i + 2) + "é" * i)
    emoji = Table.grid(padding=(0, 0))
    for _ in range(12):
        emoji.add_column()
    emoji.add_row(*("🚀🔥" * (i % 3 + 1) + "漢字" for i in range(12)))
    return [grid, spaced, wide, emoji]


def test_squeezed_grids_and_wide_characters_are_drawn_as_rich_draws_them() -> None:
    """A column rich squeezes to no room (padding 0) is drawn as rich draws it (rich gives it
    one cell: held at 0, it was drawn otherwise); cells of wide characters drawn as rich draws
    them, at many widths."""
    console = _console()
    checked = 0
    for width in range(40, 131, 3):
        for table in _hard_tables():
            expected = _as_rich_draws(console, table, width)
            got = [(t.plain, [(s.start, s.end, str(s.style)) for s in t.spans])
                   for t in to_lines(console, [table], width)]
            assert got == expected, (width, table.title, len(table.columns))
            checked += 1
    assert checked == 31 * 4
