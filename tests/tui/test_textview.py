"""The TextView widget on its own: a cursor set before the view is laid out still ends in view."""

from __future__ import annotations

from textual.app import App, ComposeResult

from tuidebug.tui.widgets.textview import TextLines, TextView


class _OneView(App[None]):
    def compose(self) -> ComposeResult:
        yield TextView(id="v", gutter=True)


async def test_cursor_set_with_a_new_source_before_layout_is_scrolled_into_view() -> None:
    app = _OneView()
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one("#v", TextView)
        # a long source and a cursor far down, set in one go: the scroll range is still that of
        # the empty view, so the first scroll is clamped at 0 (what the code screen hit when it
        # jumped to a compiler error's line in a kernel it had just loaded)
        view.set_source(TextLines("\n".join(f"line {i}" for i in range(500))), cursor=400)
        await pilot.pause()
        await pilot.pause()
        top, height = view.scroll_offset.y, view.scrollable_content_region.height
        assert view.cursor == 400
        assert top <= 400 < top + height, (top, height)


def test_highlighting_never_waits_for_a_worker_on_the_ui_thread() -> None:
    """A line the view asks for while a worker holds the lexer, or far below what is lexed
    (End on a long wrapper), is drawn plain at once — not kept by the view, the code screen told
    to lex down to it — instead of waiting for the lock or lexing the whole file there."""
    from tuidebug.tui.widgets.highlight import CHUNK, Highlighted

    code = "".join(f"def f{i}(x):\n    return x + {i}  # a comment\n" for i in range(2000))
    lines = Highlighted(code, "wrapper.py")
    asked: list[int] = []
    lines.on_behind = asked.append
    last = len(lines) - 1
    t = lines.rich(last)  # far below the lexed lines: plain, the lexer not run
    assert t.plain == lines.plain(last) and not t.spans
    assert lines.lexed() == 0 and not lines.is_final(last) and asked == [last]
    lines.rich(last)
    assert asked == [last], "told once per line"
    # the worker told was cancelled (another file selected); shown again, the file's lines
    # still plain are told again, not left plain for good
    again: list[int] = []
    lines.watch(again.append)
    lines.rich(last)
    assert again == [last], "a file shown again asks again for what is still plain"
    lines.on_behind = asked.append
    with lines._lock:  # a worker lexing: the UI thread does not wait for it
        near = lines.rich(0)
        assert not near.spans and lines.lexed() == 0 and not lines.is_final(0)
    assert lines.rich(0).spans and lines.is_final(0)  # near the top, the lock free: lexed here
    assert CHUNK < lines.lexed() <= 2 * CHUNK + 2, "only a chunk"
    assert lines.ensure(len(lines))  # the worker's part
    assert lines.rich(last).spans and lines.is_final(last)


async def test_a_line_drawn_before_it_is_highlighted_is_drawn_again() -> None:
    from tuidebug.tui.widgets.highlight import Highlighted

    app = _OneView()
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one("#v", TextView)
        lines = Highlighted("".join(f"x{i} = {i}  # c\n" for i in range(1000)), "a.py")
        view.set_source(lines, cursor=900)
        await pilot.pause()
        await pilot.pause()
        plain = view._line_strip(900)
        assert len(plain) == 1, "drawn plain: one segment"
        lines.ensure(len(lines))
        assert len(view._line_strip(900)) > 1, "the plain drawing was not kept"


class _PlainView(App[None]):
    def compose(self) -> ComposeResult:
        yield TextView(id="v")


async def test_the_rest_of_a_drawing_leaves_the_rows_shown_as_they_were() -> None:
    """``extend_source``: the lines shown, then more (the compare screen's first screenful,
    then all of it). The rows that showed lines are not drawn again — only the rows below the
    last of them; the new lines are there to scroll to, the cursor and scroll stay. Before,
    the whole view was drawn again for the same lines. (Fewer lines than the view's height
    first: the scroll bar that the rest brings narrows the view, and every row is drawn.)"""
    from rich.text import Text

    from tuidebug.tui.widgets.textview import RichLines

    for first in (30, 5):  # more than a screenful, and less
        app = _PlainView()
        async with app.run_test(size=(80, 20)) as pilot:
            view = app.query_one("#v", TextView)
            lines = [Text(f"line {i}", style="bold" if i % 2 else "") for i in range(100)]
            view.set_source(RichLines(lines[:first]))
            view.move_to(2, center=False)
            await pilot.pause()
            painted: list[int] = []
            real = view.render_line

            def watched(y: int) -> object:
                painted.append(y)
                return real(y)
            view.render_line = watched  # type: ignore[method-assign]
            view.extend_source(RichLines(lines))
            await pilot.pause()
            height = view.scrollable_content_region.height
            assert view.line_count == 100 and view.cursor == 2 and view.scroll_offset.y == 0
            assert view.virtual_size.height == 100
            if first >= height:
                assert painted == [], painted
            else:  # the rows below the last line shown are drawn
                assert set(range(first, height)) <= set(painted), (first, sorted(set(painted)))
                assert "line 7" in view.render_line(7).text
            view.scroll_end(animate=False, immediate=True)
            await pilot.pause()
            assert "line 99" in view.render_line(height - 1).text


async def test_highlighted_lines_are_drawn_from_their_segments_and_stay_inert() -> None:
    """The view draws a highlighted line from the segments the lexer left (rendering a ``Text``
    was most of a kernel's paint): the same as its ``Text`` renders, a line with control
    characters from the ``Text`` made inert, and a search's matches marked."""
    from rich.segment import Segment

    from tuidebug.tui.widgets.highlight import Highlighted

    code = ("def f(x):\n    # a comment\n    return x + 1  # 'str' \"s\"\n"
            "y = '\x1b[2J\x1b]52;c;aGk=\x07'  # escapes\n\n    z = f(2)\n")
    lines = Highlighted(code, "a.py")
    app = _OneView()
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one("#v", TextView)
        view.set_source(lines)
        await pilot.pause()
        drawn = 0
        for i in range(len(lines)):
            strip = view._line_strip(i)
            text = "".join(s.text for s in strip)
            assert "\x1b" not in text and "\x07" not in text, "nothing raw reaches the terminal"
            if i == 3:
                assert lines.segments(i) is None and "\\x1b[2J" in text
                continue
            assert list(strip) == lines.segments(i), "drawn from the lexer's segments"
            rendered = [s for s in lines.rich(i).render(app.console, end="") if s.text]
            assert list(Segment.simplify(rendered)) == list(Segment.simplify(
                [s for s in strip if s.text])), i
            drawn += 1
        assert drawn == len(lines) - 1 and len(view._line_strip(2)) > 3, "highlighted, not plain"
        view.set_query("return")
        marked = view._line_strip(2)
        match = view._style("match")
        assert any(s.text == "return" and s.style is not None and s.style.bgcolor == match.bgcolor
                   for s in marked), "a search's matches are marked"


class _NoHorizontalBar(App[None]):
    CSS = "TextView { height: 5; overflow-x: hidden; overflow-y: scroll; }"

    def compose(self) -> ComposeResult:
        yield TextView(TextLines(["x" * 300, "short"]), id="v")


async def test_right_scrolls_a_view_without_a_horizontal_scrollbar() -> None:
    """The code screen's provenance has no horizontal scrollbar (it would take one of its few
    lines): → and ← still scroll a long line into view."""
    app = _NoHorizontalBar()
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one("#v", TextView)
        view.focus()
        await pilot.pause()
        assert not view.show_horizontal_scrollbar
        await pilot.press("right")
        await pilot.pause()
        assert view.scroll_offset.x == 8
        await pilot.press("left")
        await pilot.pause()
        assert view.scroll_offset.x == 0


async def test_lines_as_wide_as_line_width_show_no_horizontal_scrollbar() -> None:
    """Lines drawn to ``line_width`` (the screens' tables) fit the view: no horizontal
    scrollbar over its last row, every row a line; a line one column wider scrolls sideways."""
    app = _OneView()
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one("#v", TextView)
        view.set_source(TextLines([""] * 50))
        width = view.line_width(10)
        assert width == 80 - 2 - len("50 "), width  # the vertical scrollbar's and the numbers'
        view.set_source(TextLines([f"{i:<{width - 1}}|" for i in range(50)]))
        await pilot.pause()
        await pilot.pause()
        assert view.show_vertical_scrollbar and not view.show_horizontal_scrollbar
        assert view.scrollable_content_region.height == view.size.height == 20
        view.set_source(TextLines(["x" * (width + 1)] * 50))
        await pilot.pause()
        await pilot.pause()
        assert view.show_horizontal_scrollbar


async def test_the_end_of_a_line_of_wide_characters_scrolls_into_view() -> None:
    """A CJK or emoji character takes two columns: the view is as wide as its widest line's
    cells (its length was used: the last half of such a line could not be scrolled to), for
    plain lines, drawn tables' lines and highlighted code."""
    from rich.text import Text

    from tuidebug.tui.widgets.highlight import Highlighted
    from tuidebug.tui.widgets.textview import RichLines

    wide = "漢字" * 60 + "🚀🔥" * 20 + "|END"
    sources = [TextLines(["short", wide]), RichLines([Text("short"), Text(wide)]),
               Highlighted(f"x = 1\ny = '{wide}'\n", "k.py")]
    app = _OneView()
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one("#v", TextView)
        view.focus()
        for source in sources:
            view.set_source(source)
            await pilot.pause()
            assert view.virtual_size.width >= 2 * 120 + 2 * 40 + 4, type(source).__name__
            for _ in range(80):  # → as far as it goes
                await pilot.press("right")
            await pilot.pause()
            shown = "".join(seg.text for seg in view.render_line(1))
            assert "|END" in shown, (type(source).__name__, shown)


async def test_a_line_cut_by_a_view_without_a_horizontal_scrollbar_ends_in_an_ellipsis() -> None:
    """The code screen's provenance has no horizontal scrollbar: a line running past its right
    edge shows ``…`` in its last column (nothing said there was more); scrolled to its end with
    →, the line shows whole, and a line that fits is never marked."""
    app = _NoHorizontalBar()
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one("#v", TextView)
        view.focus()
        await pilot.pause()
        width = view.scrollable_content_region.width
        rows = ["".join(seg.text for seg in view.render_line(y)) for y in range(2)]
        assert rows[0] == "x" * (width - 1) + "…", rows[0]
        assert rows[1].rstrip() == "short"
        for _ in range(300 // 8 + 1):
            await pilot.press("right")
        await pilot.pause()
        assert view.scroll_offset.x == 300 - width
        assert "".join(seg.text for seg in view.render_line(0)) == "x" * width
