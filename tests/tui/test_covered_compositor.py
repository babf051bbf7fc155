"""The screens' compositor (tui/compositor.py) paints what Textual's own paints, without drawing
the widgets hidden behind others: a step of the pass stepper drew the screen and the four
containers behind its panes whole, and threw the drawing away (issue #30)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from rich.style import Style
from textual._compositor import Compositor
from textual.geometry import Region
from textual.strip import Strip

from tuidebug.tui.compositor import CoveredCompositor
from tuidebug.tui.widgets.lists import PickList

Cell = tuple[str, Style | None]


def cells(line: Mapping[int, Strip | None], x1: int, x2: int) -> list[Cell | None]:
    """The cells ``x1``..``x2`` of one line of chops (None: a cell no piece paints)."""
    out: list[Cell | None] = [None] * (x2 - x1)
    for x, strip in line.items():
        if strip is None:
            continue
        for seg in strip:
            for ch in seg.text:
                if x1 <= x < x2:
                    out[x - x1] = (ch, seg.style)
                x += 1
    return out


def compare_each_update(comp: CoveredCompositor, compared: list[int],
                        painting: list[bool]) -> None:
    """From now on, each partial update of ``comp`` is checked against Textual's own chops for
    the same repaint: every cell it paints, the same character in the same style
    (``painting[0]`` is true while this compositor paints, not Textual's)."""
    ours = comp.render_partial_update

    def checked() -> Any:
        regions = list(comp._dirty_regions)
        painting[0] = True
        try:
            update = ours()
        finally:
            painting[0] = False
        if update is None:
            return None
        crop = Region.from_union(regions).intersection(comp.size.region)
        spans = list(comp._regions_to_spans(regions))
        rendered = {y for y, _, _ in spans}
        textual = Compositor._render_chops(comp, crop, rendered.__contains__)
        for y, x1, x2 in update.spans:
            mine = cells(update.chops[y], x1, x2)
            assert None not in mine, f"row {y}: a cell of {x1}..{x2} left unpainted"
            assert mine == cells(textual[y], x1, x2), f"row {y}, columns {x1}..{x2}"
        compared[0] += 1
        return update
    comp.render_partial_update = checked  # type: ignore[method-assign]


async def test_each_repaint_is_textuals_and_hidden_containers_are_not_drawn(
        open_ui, transformer_trace: Path) -> None:
    async with open_ui(transformer_trace) as ui:
        await ui.press("2")
        screen = ui.app.screen
        comp = screen._compositor
        assert isinstance(comp, CoveredCompositor)
        screen.query_one(PickList).focus()
        await ui.settle()
        compared, painting = [0], [False]
        compare_each_update(comp, compared, painting)
        behind = [screen, screen.query_one("#body"), *screen.query("Horizontal"),
                  *screen.query("#stages-pane, #graph-pane")]
        drawn = {id(w): 0 for w in behind}
        for w in behind:
            def counted(crop: Region, w: Any = w, draw: Any = w.render_lines) -> list[Strip]:
                drawn[id(w)] += painting[0]
                return draw(crop)
            w.render_lines = counted
        for key in ("n", "n", "n", "p", "n", "n"):
            await ui.press(key)
        assert compared[0] >= 6, "each step repainted"
        # the screen, its body and the pane containers are behind the panes' widgets: a step
        # repaints rows of the stage list, the graph and its title and the node detail only
        assert [drawn[id(w)] for w in behind[:3]] == [0, 0, 0]
        await ui.press("tab", "down", "pagedown", "shift+tab")
        await ui.press("4", "down", "down", "tab", "pagedown")
        await ui.press("2")
        assert compared[0] >= 12
        # what the screen shows (drawn whole by this compositor) is what Textual's draws
        comp = ui.app.screen._compositor
        whole = comp.size.region
        mine = comp._render_chops(whole, lambda y: True)
        textual = Compositor._render_chops(comp, whole, lambda y: True)
        for y in range(whole.height):
            assert cells(mine[y], 0, whole.width) == cells(textual[y], 0, whole.width), y
