"""What keeps keys cheap on a large trace (bench/tui_open.py measures them): the footer is not
rebuilt when its keys stay the same, ``/`` lays nothing else out again, and the pass stepper
reads the snapshots next to the one shown before they are asked for."""

from __future__ import annotations

from pathlib import Path

from textual.widgets._footer import FooterKey

from tuidebug.tui.screens.passes import PassesScreen
from tuidebug.tui.widgets.bars import KeyFooter, SearchBar


async def test_switching_back_to_a_screen_keeps_its_footer(open_ui, transformer_trace: Path) -> None:
    async with open_ui(transformer_trace) as ui:
        footer = ui.app.screen.query_one(KeyFooter)
        keys = list(footer.query(FooterKey))
        assert keys, "the overview's footer shows keys"
        shown = [k.key for k in keys]
        await ui.pilot.press("2")
        await ui.settle()
        passes_keys = [k.key for k in ui.app.screen.query_one(KeyFooter).query(FooterKey)]
        assert "n" in passes_keys and passes_keys != shown  # each screen shows its own keys
        await ui.pilot.press("1")
        await ui.settle()
        again = list(ui.app.screen.query_one(KeyFooter).query(FooterKey))
        assert [k.key for k in again] == shown
        assert all(a is b for a, b in zip(again, keys, strict=True)), "rebuilt, keys unchanged"


async def test_the_search_bar_leaves_the_layout_alone(open_ui, transformer_trace: Path) -> None:
    async with open_ui(transformer_trace) as ui:
        await ui.pilot.press("2")
        await ui.settle()
        body = ui.app.screen.query_one("#body")
        before = body.region
        keys = list(ui.app.screen.query_one(KeyFooter).query(FooterKey))
        assert keys
        await ui.pilot.press("slash")
        await ui.settle()
        bar = ui.app.screen.query_one(SearchBar)
        assert bar.is_open and bar.region.height == 1
        assert body.region == before
        await ui.pilot.press(*"addmm")
        await ui.settle()
        assert "addmm" in ui.app.export_screenshot()  # the bar is painted over the footer
        await ui.pilot.press("escape")
        await ui.settle()
        assert not bar.is_open and body.region == before
        # the footer, under the bar meanwhile, was not rebuilt for the input's focus
        again = list(ui.app.screen.query_one(KeyFooter).query(FooterKey))
        assert len(again) == len(keys) and all(a is b for a, b in zip(again, keys))


async def test_the_stepper_reads_the_next_snapshot_ahead(open_ui, transformer_trace: Path) -> None:
    async with open_ui(transformer_trace) as ui:
        await ui.pilot.press("2")
        await ui.settle()
        screen = ui.app.screen
        assert isinstance(screen, PassesScreen)
        g = screen.graph
        assert g is not None
        snaps = [i for i, s in enumerate(g.stages) if s.file]
        assert len({g.stages[i].file for i in snaps}) >= 3, "needs three snapshots"
        first = screen.current_position()
        assert first is not None
        nxt = next(i for i in snaps if i > first and g.stages[i].file != g.stages[first].file)
        assert g.is_cached(g.stages[nxt]), "the next snapshot was read ahead"
        later = [i for i in snaps if i > nxt and g.stages[i].file != g.stages[nxt].file]
        assert later and not g.is_cached(g.stages[later[0]]), "only the neighbours"
        screen._select_stage(nxt)
        await ui.settle()
        assert g.is_cached(g.stages[later[0]])
