"""A text view given another source repaints only the rows that draw otherwise (issue #30): a
step of the pass stepper over a pass that changed nothing draws no row of the graph again, a
step to a pass that changed it draws what changed — and what is on screen is each time the
stage's lines, as a view drawn afresh shows them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuidebug.tui.widgets.lists import PickList
from tuidebug.tui.widgets.textview import TextView


def painted_rows(ui: Any, view: TextView) -> list[str]:
    """The view's rows as the screen shows them (its text columns, without the scrollbar)."""
    region = view.scrollable_content_region
    rows = ui.text().split("\n")[region.y:region.y + region.height]
    return [r[region.x:region.x + region.width].rstrip() for r in rows]


def expected_rows(view: TextView) -> list[str]:
    top, n = view.scroll_offset.y, view.line_count
    width = view.scrollable_content_region.width
    return [view.source.plain(i)[:width].rstrip() if i < n else ""
            for i in range(top, top + view.scrollable_content_region.height)]


async def test_a_step_repaints_only_the_rows_that_changed(open_ui, transformer_trace: Path) -> None:
    async with open_ui(transformer_trace) as ui:
        await ui.press("2")
        screen = ui.app.screen
        g = screen.graph
        stages = g.stages
        screen.query_one(PickList).focus()
        # two stages in a row that show the same snapshot unchanged (passes that changed
        # nothing), then one with changes marked
        same = next(i for i in range(1, len(stages) - 1)
                    if not stages[i].file and not stages[i + 1].file and stages[i].kind == "pass")
        view = screen.query_one("#graph-view", TextView)
        screen._select_stage(same)
        await ui.settle()
        assert painted_rows(ui, view) == expected_rows(view)
        drawn = [0]
        draw = view.render_line

        def counted(y: int) -> Any:
            drawn[0] += 1
            return draw(y)
        view.render_line = counted  # type: ignore[method-assign]
        before = painted_rows(ui, view)
        drawn[0] = 0
        await ui.press("n")
        assert screen.current_position() == same + 1
        assert drawn[0] == 0, "a pass that changed nothing drew rows of the graph again"
        assert painted_rows(ui, view) == expected_rows(view) == before
        changed = next(i for i in range(same + 1, len(stages))
                       if stages[i].file and stages[i].kind == "pass" and stages[i].changed)
        stepped = 0
        while screen.current_position() != changed:
            await ui.press("n")
            stepped += 1
            # each stage's rows as a view drawn afresh shows them (nothing kept stale)
            assert painted_rows(ui, view) == expected_rows(view), screen.current_position()
        assert stepped and drawn[0] > 0
        assert any(r.startswith(("+ ", "- ", "~ ")) for r in painted_rows(ui, view)), \
            "the pass's changes marked"
        await ui.press("p")  # and back: the rows of the stage before
        assert painted_rows(ui, view) == expected_rows(view)
