"""A list's highlight moved out of sight comes to the middle of the list, not to its edge: each
step past the edge scrolled the list again (Textual's), and a scroll draws every visible row
again (issue #30: half the pass stepper's steps on the 24-layer trace)."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets.option_list import Option

from tuidebug.tui.widgets.lists import PickList

ROWS = 100


class ListApp(App[None]):
    CSS = "PickList { height: 10; }"

    def compose(self) -> ComposeResult:
        yield PickList(*[Option(f"row {i}", id=str(i)) for i in range(ROWS)])


def in_sight(lst: PickList) -> bool:
    assert lst.highlighted is not None
    y = lst._index_to_line[lst.highlighted]
    top = lst.scroll_offset.y
    return top <= y < top + lst.scrollable_content_region.height


async def test_stepping_past_the_edge_scrolls_by_half_a_list() -> None:
    app = ListApp()
    async with app.run_test(size=(40, 12)) as pilot:
        lst = app.query_one(PickList)
        lst.focus()
        lst.highlighted = 0
        await pilot.pause()
        height = lst.scrollable_content_region.height
        assert height == 10
        scrolls, steps = 0, 0
        for key in ["down"] * (ROWS - 1) + ["up"] * (ROWS - 1):
            top = lst.scroll_offset.y
            await pilot.press(key)
            steps += 1
            assert in_sight(lst), (key, lst.highlighted, lst.scroll_offset.y)
            scrolls += lst.scroll_offset.y != top
        assert steps == 2 * (ROWS - 1) and lst.highlighted == 0 and lst.scroll_offset.y == 0
        # once per half a list each way (Textual's: at every step past the edge, 180 here)
        assert 0 < scrolls <= 2 * (ROWS // (height // 2) + 1), scrolls
        # a row chosen far away is shown in the middle
        lst.select_id("70")
        await pilot.pause()
        middle = lst.scroll_offset.y
        assert abs(70 - (middle + height // 2)) <= 1, middle
        # a row in sight: no scroll
        lst.select_id("72")
        await pilot.pause()
        assert lst.scroll_offset.y == middle and in_sight(lst)


async def test_rows_are_drawn_ahead_so_a_scroll_draws_none() -> None:
    """Once the list is painted, its rows are drawn ahead a few at a time: stepping down the
    whole list and back then draws only the highlighted row at each step (in the highlight's
    style), never a plain row coming into sight (a scroll drew half a list of them)."""
    app = ListApp()
    async with app.run_test(size=(40, 12)) as pilot:
        lst = app.query_one(PickList)
        lst.focus()
        lst.highlighted = 0
        for _ in range(40):  # the rows drawn ahead, AHEAD_STEP at a turn
            await pilot.pause()
        plain = lst.get_visual_style("option-list--option")
        drawn: list[tuple[int, bool]] = []
        original = lst._get_option_render

        def counted(option: Option, style: object) -> object:
            key = (option, style, lst.get_component_styles("option-list--option").padding)
            if lst._option_render_cache.get(key) is None:
                drawn.append((lst.get_option_index(option.id or ""), style == plain))
            return original(option, style)
        lst._get_option_render = counted  # type: ignore[method-assign]
        steps = 0
        for key in ["down"] * (ROWS - 1) + ["up"] * (ROWS - 1):
            await pilot.press(key)
            steps += 1
        assert steps == 2 * (ROWS - 1) and lst.scroll_offset.y == 0
        assert [d for d in drawn if d[1]] == []  # no plain row drawn in a key's frame (90 before)
        assert len(drawn) <= ROWS  # each row drawn highlighted once
