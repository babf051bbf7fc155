"""What keeps keys cheap on a large trace (bench/tui_open.py measures them): the footer is not
drawn again when its keys stay the same, ``/`` lays nothing out, and the pass stepper
reads the snapshots next to the one shown before they are asked for."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tuidebug.tui.screens.passes import PassesScreen
from tuidebug.tui.widgets.bars import KeyFooter, SearchBar


async def test_switching_back_to_a_screen_keeps_its_footer(open_ui, transformer_trace: Path) -> None:
    async with open_ui(transformer_trace) as ui:
        footer = ui.app.screen.query_one(KeyFooter)
        shown = footer.keys_shown()
        assert "q" in shown, "the overview's footer shows keys"
        items = footer._items
        await ui.pilot.press("2")
        await ui.settle()
        passes_keys = ui.app.screen.query_one(KeyFooter).keys_shown()
        assert "n" in passes_keys and passes_keys != shown  # each screen shows its own keys
        assert "n" in ui.text().splitlines()[-1], "drawn on the bottom line"
        await ui.pilot.press("1")
        await ui.settle()
        again = ui.app.screen.query_one(KeyFooter)
        assert again is footer and again.keys_shown() == shown
        assert again._items is items, "read again and replaced, keys unchanged"


async def test_the_search_bar_leaves_the_layout_alone(open_ui, transformer_trace: Path) -> None:
    """``/``, typing and escape change what the footer line draws, and lay nothing out."""
    async with open_ui(transformer_trace) as ui:
        await ui.pilot.press("2")
        await ui.settle()
        screen = ui.app.screen
        layouts: list[object] = []
        screen.screen_layout_refresh_signal.subscribe(screen, layouts.append)
        body = screen.query_one("#body")
        before = body.region
        footer = screen.query_one(KeyFooter)
        keys_line = ui.text().splitlines()[-1]
        assert "Search" in keys_line
        await ui.pilot.press("slash")
        await ui.settle()
        bar = screen.query_one(SearchBar)
        assert bar is footer and bar.is_open and bar.region.height == 1
        assert "search the focused view" in ui.text().splitlines()[-1]
        await ui.pilot.press(*"addmm")
        await ui.settle()
        assert "/ addmm" in ui.text().splitlines()[-1]  # the bar is drawn on the footer's line
        await ui.pilot.press("escape")
        await ui.settle()
        assert not bar.is_open and body.region == before
        assert ui.text().splitlines()[-1] == keys_line, "the keys again"
        assert layouts == [], "opening, typing in and closing the search laid the screen out"


async def _stepper(ui):  # type: ignore[no-untyped-def]
    """The pass stepper opened, and its graph."""
    await ui.pilot.press("2")
    await ui.settle()
    screen = ui.app.screen
    assert isinstance(screen, PassesScreen)
    g = screen.graph
    assert g is not None
    return screen, g


async def test_the_stepper_reads_the_next_snapshot_ahead(open_ui, transformer_trace: Path) -> None:
    async with open_ui(transformer_trace) as ui:
        screen, g = await _stepper(ui)
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


def _screens_of(app, cls) -> list:  # type: ignore[no-untyped-def]
    """Every screen of ``cls`` the app has mounted, shown or not."""
    return [s for s in app._registry if isinstance(s, cls)]


async def _built(ui) -> None:  # type: ignore[no-untyped-def]
    assert await ui.wait_for(lambda: ui.app.prebuilder._timer is None, 120, poll=0.05), \
        f"screens still being built: {ui.app.prebuilder.built}"


async def test_screens_are_built_after_the_first_paint_and_keys_meanwhile_answered(
        open_ui, transformer_trace: Path) -> None:
    from tuidebug.tui.screens.errors import ErrorsScreen
    from tuidebug.tui.screens.passes import PassesScreen

    async with open_ui(transformer_trace, prebuild=True) as ui:
        app = ui.app
        prebuilder = app.prebuilder
        assert prebuilder.enabled, "this Textual lets screens be built ahead"
        assert await ui.wait_for(lambda: prebuilder.built, 60, poll=0.02), "none built"
        assert "errors" not in prebuilder.built
        await ui.pilot.press("6")  # while the others are being built: answered at once
        await ui.settle()
        shown = app.screen
        assert isinstance(shown, ErrorsScreen) and shown.is_loaded()
        await _built(ui)
        assert "errors" not in prebuilder.built, "the key built it"
        assert _screens_of(app, ErrorsScreen) == [shown], "one errors screen, the one shown"
        assert {"passes", "ir", "code", "autotune"} <= set(prebuilder.built)
        passes = _screens_of(app, PassesScreen)
        assert len(passes) == 1 and passes[0].is_loaded(), "built and showing its graph"
        await ui.pilot.press("2")
        await ui.settle()
        assert app.screen is passes[0]
        g = app.current_graph
        assert g is not None and f"{g.id}: {len(g.stages)} stages" in ui.text()


async def test_a_built_screen_shows_the_graph_chosen_later(open_ui,
                                                           transformer_trace: Path) -> None:
    async with open_ui(transformer_trace, prebuild=True) as ui:
        app = ui.app
        graphs = app.trace.graphs
        assert len(graphs) >= 2, "needs two graphs"
        await _built(ui)
        first = app.current_graph
        other = next(g for g in graphs if g is not first)
        app.set_graph(other.id)  # then a key at once: the built screen loads it when shown
        await ui.pilot.press("2")
        await ui.settle()
        assert app.screen.shown_graph == other.id
        assert f"{other.id}: {len(other.stages)} stages" in ui.text()
        await ui.pilot.press("1")
        app.set_graph(first.id)  # then a quiet moment: the built screens are brought up to date
        await _built(ui)
        for name in ("passes", "ir", "code"):
            (screen,) = app._screen_stacks[name]
            assert screen.shown_graph == first.id and screen.is_loaded(), name
        await ui.pilot.press("3")
        await ui.settle()
        assert app.screen.shown_graph == first.id and first.id in ui.text()


async def test_stepping_back_and_forth_keeps_no_more_memory(open_ui,
                                                            transformer_trace: Path) -> None:
    """What the pass stepper reads is frozen out of full collections (heap.keep_read), but
    Textual's rendered lines frozen with it were never collected once dropped: each round
    through the stages and back kept ~23k more objects, for the app's life."""
    import gc

    async with open_ui(transformer_trace, prebuild=False) as ui:  # no screen built meanwhile
        await ui.press("2")
        screen = ui.app.screen
        assert isinstance(screen, PassesScreen)
        n = len(screen.graph.stages)
        assert n >= 10

        async def round_trip() -> int:
            for key in ("n", "p"):
                for _ in range(n - 1):
                    await ui.pilot.press(key)
                await ui.settle()
            gc.collect()
            return gc.get_freeze_count() + len(gc.get_objects())

        await round_trip()
        kept = [await round_trip() for _ in range(4)]
        assert kept[-1] - kept[0] < 5_000, f"objects kept after each round: {kept}"


async def test_a_built_screen_is_rendered_a_few_lines_at_a_time(open_ui,
                                                               transformer_trace: Path) -> None:
    """Rendering a screen built ahead is split into pieces of a few lines of one widget each (a
    key pressed meanwhile waits for one piece, not for the whole screen), then its frame into
    bands of a few rows; the pieces together render every line on display, and the screen
    shown then is painted from them."""
    from tuidebug.tui import prebuild
    from tuidebug.tui.widgets.textview import TextView

    async with open_ui(transformer_trace, prebuild=True) as ui:
        await _built(ui)
        (screen,) = ui.app._screen_stacks["passes"]
        assert not screen.is_current
        view = screen.query_one("#graph-view", TextView)
        visible = screen._compositor.visible_widgets
        assert view in visible and view.region.height > prebuild.PIECE_LINES
        heights = [region.intersection(clip).height for region, clip in visible.values()]
        pieces = prebuild.render_pieces(screen)
        assert len(pieces) == sum(-(-h // prebuild.PIECE_LINES) for h in heights)
        assert len(pieces) > len(visible), "a tall widget in several pieces"
        view._styles_cache.clear()
        for piece in pieces:
            piece()
        assert set(range(view.region.height)) <= set(view._styles_cache._cache)
        # then the frame, composed a few rows at a time: every row of the screen, once
        bands = prebuild.render_bands(screen)
        assert len(bands) == -(-screen.size.height // prebuild.PIECE_LINES) > 1
        for band in bands:
            band()
        await ui.pilot.press("2")
        await ui.settle()
        assert ui.app.screen is screen
        g = ui.app.current_graph
        assert g is not None and f"{g.id}: {len(g.stages)} stages" in ui.text()


async def test_the_stepper_builds_the_views_of_the_next_stages_ahead(
        open_ui, transformer_trace: Path) -> None:
    """Beside the snapshots, the read-ahead builds the views of the stages ``n`` and ``p`` go
    to (a large change with its removed nodes merged in took 40 ms and more on the UI
    thread): the key shows the view built ahead."""
    from tuidebug.tui import model

    async with open_ui(transformer_trace) as ui:
        screen, g = await _stepper(ui)
        assert len(g.stages) >= 5
        pos = len(g.stages) // 2
        assert model.neighbours(g, pos), "not built before the stage next to them is shown"
        screen._select_stage(pos)
        await ui.settle()
        assert model.neighbours(g, pos) == []
        ahead = g.stages[pos + 1]
        assert model.stage_view_ready(g, ahead)
        built = model.stage_view(g, ahead)
        await ui.pilot.press("n")
        await ui.settle()
        assert screen.current_stage() is ahead and screen.stage_view is built
        assert built.text_width() == max(len(ln.text) for ln in built.lines)


async def test_another_trace_opened_while_screens_are_built_ahead(open_ui, transformer_trace: Path,
                                                                  mlp_trace: Path) -> None:
    """Opening another trace (compare's o, a rank switch) while a screen is half built: the
    work left held screens the open removed, and the builder ran it on them (NoMatches in a
    timer callback ends the app). Now stop() drops it and the new trace's screens are built."""
    async with open_ui(transformer_trace, prebuild=True) as ui:
        app = ui.app
        prebuilder = app.prebuilder
        assert await ui.wait_for(lambda: prebuilder._after or prebuilder._pieces, 60, poll=0.005), \
            "caught no screen half built"
        await app.open_trace(mlp_trace)
        assert not prebuilder._after and not prebuilder._pieces
        prebuilder.start()
        await _built(ui)
        assert app.is_running and app.trace.root == mlp_trace
        await ui.pilot.press("2")
        await ui.settle()
        g = app.current_graph
        assert g is not None and f"{g.id}: {len(g.stages)} stages" in ui.text()


async def test_a_screen_shown_again_is_not_restyled_unless_its_styles_changed(
        open_ui, transformer_trace: Path) -> None:
    """Textual restyles every widget of a screen each time it is shown again; a screen styled
    under the same stylesheet and app state is told it need not (``ScreenResume``'s
    ``refresh_styles``). A theme changed while it was hidden still restyles it."""
    from textual import events

    from tuidebug.tui.widgets.textview import TextView

    resumed: list[events.ScreenResume] = []  # seen when posted, read once handled

    def hook(message: object) -> None:
        if isinstance(message, events.ScreenResume):
            resumed.append(message)

    async with open_ui(transformer_trace, message_hook=hook) as ui:
        await ui.press("2")
        passes = ui.app.screen
        await ui.press("1")
        resumed.clear()
        await ui.press("2")
        assert ui.app.screen is passes
        assert resumed and not any(m.refresh_styles for m in resumed), resumed
        await ui.press("1")
        view = passes.query_one("#graph-view", TextView)
        before = view.styles.background
        ui.app.theme = "textual-light" if ui.app.theme != "textual-light" else "nord"
        await ui.settle()
        resumed.clear()
        await ui.press("2")
        assert any(m.refresh_styles for m in resumed), resumed
        assert view.styles.background != before, "the new theme applied to the hidden screen"


_OPENED: list[list[str]] = []  # while a test records: every file opened in this process


def _audit(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and _OPENED and isinstance(args[0], (str, bytes, os.PathLike)):
        _OPENED[-1].append(os.fsdecode(args[0]))


async def test_the_first_compare_reads_nothing_of_the_open_trace(open_ui, transformer_trace: Path,
                                                                 mlp_trace: Path) -> None:
    """Once the screens are built, what comparing the open trace with another needs of it is
    worked out ahead (prebuild, trace/diff/ahead.py): the first comparison of the session opens
    no file of the open trace's graphs, only the other trace's (every file opened is seen by
    the interpreter's audit hook). Without the work ahead it read the second graph's kernels,
    wrapper, IR and fusion decisions."""
    from tuidebug.tui.screens.compare import compare_ahead

    if not _OPENED:
        sys.addaudithook(_audit)  # hooks stay for the process: it records only when asked
    async with open_ui(transformer_trace, prebuild=True) as ui:
        app = ui.app
        await _built(ui)
        steps = len(compare_ahead(app.trace))
        assert app.prebuilder.ahead_done == steps > len(app.trace.graphs) >= 2
        opened: list[str] = []
        _OPENED.append(opened)
        try:
            app.compare_with = mlp_trace
            await ui.press("8")
            assert await ui.wait_for(lambda: app.screen.complete, 60)
        finally:
            _OPENED.remove(opened)
        assert any(str(mlp_trace) in ln for ln in ui.lines("#compare-view"))
        other = os.path.realpath(mlp_trace)
        ours = os.path.realpath(Path(transformer_trace) / "graphs")
        assert any(os.path.realpath(p).startswith(other + os.sep) for p in opened), \
            "the other trace is read: the hook sees the comparison's reads"
        assert [p for p in opened if os.path.realpath(p).startswith(ours + os.sep)] == [], opened


async def test_comparing_one_trace_after_another_keeps_no_more_memory(
        open_ui, transformer_trace: Path, mlp_trace: Path, copy_trace) -> None:
    """The app keeps the last trace compared (open_traces), and what a read made is frozen out
    of full collections when it is much (heap.keep_read): a trace frozen and dropped later
    (its graphs and it refer to each other) would stay for the app's life. Comparing the open
    trace with one trace after another, each read afresh, keeps no more objects round after
    round (with the work ahead done: the open trace's side read and frozen once)."""
    import gc

    others = [copy_trace(mlp_trace, f"other{i}") for i in range(3)]
    async with open_ui(transformer_trace, prebuild=True) as ui:
        await _built(ui)
        assert ui.app.prebuilder.ahead_done > 0

        async def compare(path: Path) -> int:
            await ui.press("1")
            ui.app.compare_with = path
            await ui.press("8")
            assert await ui.wait_for(lambda: ui.app.screen.complete
                                     and ui.app.screen.shown_path == path, 60)
            await ui.settle()
            gc.collect()
            return gc.get_freeze_count() + len(gc.get_objects())

        for path in others:
            await compare(path)
        kept = [await compare(path) for _ in range(3) for path in others]
        assert len(kept) == 9
        assert max(kept) - kept[0] < 5_000, f"objects kept after each comparison: {kept}"


async def test_what_was_read_is_frozen_in_an_idle_moment(open_ui, transformer_trace: Path) -> None:
    """Once the screens are built, much made since the last freeze (as a stage read and shown
    leaves) is collected and frozen in an idle moment (heap.keep_read), not by the next read's
    worker: the first comparison after stepping through the stages paid for it (42 ms on the
    24-layer trace)."""
    import gc

    from tuidebug.tui import heap

    async with open_ui(transformer_trace, prebuild=True) as ui:
        await _built(ui)
        made = [[i] for i in range(heap.FREEZE_AT + 10_000)]  # alive (as a read graph), tracked
        assert heap.grown() >= heap.FREEZE_AT
        tracked = {id(o) for o in gc.get_objects()}  # the collector's generations
        assert all(id(x) in tracked for x in made)  # not frozen yet
        assert await ui.wait_for(lambda: heap.grown() < heap.FREEZE_AT, 10, poll=0.05)
        # frozen: in none of the collector's generations (the freeze count alone also falls
        # by the frozen objects freed meanwhile: 59,997 of 60,000 once, in a full run)
        tracked = {id(o) for o in gc.get_objects()}
        assert not any(id(x) in tracked for x in made)


async def test_down_through_the_kernels_shows_each_and_lays_nothing_out(
        open_ui, transformer_trace: Path) -> None:
    """Down through the code screen's kernel list shows each kernel's code, highlighted (an
    extern call: the wrapper at its line), and its provenance, and never lays the screen out:
    the views' scrollbars stay as they are whatever the kernel (one whose code or provenance
    was wider or longer than the last showed a scrollbar or hid one: a layout of the whole
    screen, a quarter of such a key's time on the 24-layer trace)."""
    from tuidebug.tui.screens.code import CodeScreen
    from tuidebug.tui.screens.code_docs import read_code
    from tuidebug.tui.widgets.highlight import Highlighted
    from tuidebug.tui.widgets.lists import PickList
    from tuidebug.tui.widgets.textview import TextView

    async with open_ui(transformer_trace) as ui:
        await ui.press("4")
        screen = ui.app.screen
        assert isinstance(screen, CodeScreen) and screen.graph is not None
        lst = screen.query_one(PickList)
        lst.focus()
        lst.highlighted = 0
        await ui.settle()
        layouts: list[object] = []
        screen.screen_layout_refresh_signal.subscribe(screen, layouts.append)
        code = screen.query_one("#code-view", TextView)
        provenance = screen.query_one("#provenance", TextView)
        kinds, sizes = set(), set()
        cuts = 0
        for _ in range(lst.option_count - 1):
            await ui.press("down")
            assert lst.highlighted_option is not None
            item = str(lst.highlighted_option.id)
            doc = read_code(screen.graph, item, screen.kernels)
            assert isinstance(code.source, Highlighted), item
            assert ui.lines("#code-view") == (doc.code or "").expandtabs(4).rstrip(
                "\n").split("\n"), item
            assert code.cursor == doc.cursor, item
            assert provenance.source.plain(0).startswith(item), item
            kinds.add(screen.kernels[item].kind)
            sizes.add((code.virtual_size.width > code.scrollable_content_region.width,
                       len(provenance.source) > provenance.scrollable_content_region.height,
                       max(map(len, map(provenance.source.plain, range(len(provenance.source)))))
                       > provenance.scrollable_content_region.width))
            room = provenance.scrollable_content_region.width
            for y in range(min(len(provenance.source), provenance.scrollable_content_region.height)):
                row = "".join(seg.text for seg in provenance.render_line(y)).rstrip()
                cut = len(provenance.source.plain(provenance.scroll_offset.y + y)) > room
                assert row.endswith("…") == cut, (item, y, row)  # a cut line says so
                cuts += cut
        assert {"extern", "cpp"} <= kinds or len(kinds) >= 2, kinds
        assert len(sizes) >= 2, "kernels of other widths or lengths than the one before"
        assert cuts, "a provenance line cut at the pane's edge"
        assert layouts == [], f"Down laid the screen out {len(layouts)} times"
