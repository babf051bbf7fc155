"""Tab between the panes of a screen: the focus moves, the focused pane is marked (a text view
is tinted, a list brightens its highlighted row), the text on screen stays, and nothing else on
the screen is drawn again (a focus change repainted the whole screen: issue #30, 49-57 ms CPU
per Tab on the 24-layer trace; then tinting the list drew every visible row again, 66-80 ms)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widget import Widget

from tuidebug.tui.widgets.lists import PickList
from tuidebug.tui.widgets.scrollbars import SteadyScrollBar
from tuidebug.tui.widgets.textview import TextView


def background(ui: Any, widget: Widget, row: int | None = None) -> set[str]:
    """The background colours painted in ``row`` of ``widget`` (its middle row by default)."""
    region = widget.content_region
    row = region.height // 2 if row is None else row
    strip = ui.app.screen._compositor.render_strips()[region.y + row]
    x, colours = 0, set()
    for seg in strip:
        if region.x <= x < region.right and seg.style is not None and seg.style.bgcolor:
            colours.add(str(seg.style.bgcolor))
        x += len(seg.text)
    return colours


def visible(strips: list[Any]) -> list[tuple[str, str | None, str | None]]:
    """Each segment as a terminal shows it: its text, the colour of its glyphs (none for
    spaces) and of its cells (``reverse`` swaps the two)."""
    shown = []
    for strip in strips:
        for seg in strip:
            style = seg.style
            fg, bg = (style.color, style.bgcolor) if style else (None, None)
            if style is not None and style.reverse:
                fg, bg = bg, fg
            shown.append((seg.text, str(fg) if seg.text.strip() else None, str(bg)))
    return shown


def count_calls(obj: Any, method: str) -> list[int]:
    """A counter of ``obj.method``'s calls from now on (the method still runs)."""
    count = [0]
    call = getattr(obj, method)

    def counted(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return call(*args, **kwargs)
    setattr(obj, method, counted)
    return count


def scrollbars(*widgets: Widget) -> list[SteadyScrollBar]:
    bars = [b for w in widgets for b in (w._vertical_scrollbar, w._horizontal_scrollbar)
            if b is not None and b.display]
    assert all(isinstance(b, SteadyScrollBar) for b in bars), bars
    return bars


@pytest.mark.parametrize("key", ["2", "4"])
async def test_tab_moves_the_mark_and_repaints_only_the_panes(open_ui, transformer_trace: Path,
                                                              key: str) -> None:
    """The passes screen (stage list, graph) and the code screen (kernel list, code)."""
    async with open_ui(transformer_trace) as ui:
        await ui.press(key)
        screen = ui.app.screen
        lst, view = screen.query_one(PickList), screen.query(TextView).first()
        lst.focus()
        await ui.settle()
        assert lst.has_focus and lst.option_count and view.line_count
        text = ui.text()
        list_bg, view_bg = background(ui, lst), background(ui, view)
        assert lst.highlighted is not None
        cursor_row = lst._index_to_line[lst.highlighted] - lst.scroll_offset.y
        cursor_bg = background(ui, lst, cursor_row)
        assert cursor_bg != list_bg
        bars = scrollbars(lst, view)
        assert bars  # the list and the graph are longer than the screen
        full = count_calls(screen._compositor, "render_full_update")
        drawn = [count_calls(b, "render") for b in bars]
        rows = count_calls(lst, "_get_visual")  # called for a row drawn anew, not a kept one

        await ui.press("tab")
        assert view.has_focus and not lst.has_focus
        # a partial repaint (the two panes), not the whole screen; the scrollbars kept
        assert full[0] == 0 and [d[0] for d in drawn] == [0] * len(bars)
        assert ui.text() == text  # the same text: only the mark moved
        # the view is tinted; the list keeps its background (a tint would draw every row
        # again): its highlighted row fades, the only row drawn again
        assert background(ui, view) != view_bg and background(ui, lst) == list_bg
        assert background(ui, lst, cursor_row) not in (cursor_bg, list_bg)
        assert rows[0] <= 1

        await ui.press("shift+tab")
        assert lst.has_focus and ui.text() == text
        assert background(ui, lst) == list_bg and background(ui, view) == view_bg
        assert background(ui, lst, cursor_row) == cursor_bg
        assert rows[0] <= 2


async def test_a_kept_scrollbar_drawing_is_what_drawing_it_again_gives(
        open_ui, transformer_trace: Path) -> None:
    """The scrollbars keep their drawing across a focus change (Textual redraws them at every
    restyle): what they keep is what a fresh drawing gives, after focus changes and scrolling."""
    async with open_ui(transformer_trace, size=(120, 24)) as ui:
        await ui.press("2")
        screen = ui.app.screen
        view = screen.query_one("#graph-view", TextView)
        for keys in (("tab",), ("end",), ("shift+tab",), ("tab", "pageup")):
            await ui.press(*keys)
            bars = scrollbars(screen.query_one(PickList), view)
            assert bars, keys
            for bar in bars:
                crop = bar.size.region
                kept = visible(bar.render_lines(crop))
                bar._drawn.clear()
                bar._styles_cache.clear()
                assert visible(bar.render_lines(crop)) == kept and kept, (keys, bar)
