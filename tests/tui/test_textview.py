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
