"""Search, command palette, help, graph choice, SVG export; and what the UI must never do."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import pythonpath
from tuidebug.trace.format.reader import Trace
from tuidebug.tui import keymap
from tuidebug.tui.widgets.textview import TextView

ROOT = Path(__file__).resolve().parents[2]


async def test_search_moves_to_matches_in_the_focused_view(open_ui, transformer_trace: Path) -> None:
    g = Trace(transformer_trace).graphs[0]
    final = g.final_graph()
    names = [n.name for n in final.nodes]
    target = next(n for n in reversed(names) if n.startswith("addmm"))
    async with open_ui(transformer_trace) as ui:
        await ui.press("2")
        ui.app.screen.goto_node(names[0])
        await ui.settle()
        await ui.press("slash")
        await ui.pilot.press(*f"{target}:")
        await ui.press("enter")
        assert ui.cursor_line("#graph-view").startswith(f"  {target}:")
        assert "matching lines" in ui.text()
        await ui.press("escape")
        assert isinstance(ui.app.focused, TextView)
        # f3 wraps around to the same (only) definition line
        await ui.press("f3")
        assert ui.cursor_line("#graph-view").startswith(f"  {target}:")
        # search in the stage list (focused list) moves its highlight; the old query is
        # selected, so typing replaces it
        unique = next(s.name for s in reversed(g.stages)
                      if sum(1 for t in g.stages if s.name in t.name) == 1)
        ui.app.screen.query_one("#stages").focus()
        await ui.press("slash")
        await ui.pilot.press(*unique)
        await ui.press("enter")
        assert ui.app.screen.current_stage().name == unique


async def test_the_search_bar_takes_keys_without_the_focus(open_ui, transformer_trace: Path) -> None:
    """``/`` leaves the focus where it is; what is typed goes into the query (a digit too, not
    to the screen switch it is bound to), backspace and enter work, escape closes."""
    from textual import events

    from tuidebug.tui.widgets.bars import SearchBar

    g = Trace(transformer_trace).graphs[0]
    names = [n.name for n in g.final_graph().nodes]
    target = next(n for n in reversed(names) if n.startswith("addmm") and any(c.isdigit() for c in n))
    async with open_ui(transformer_trace) as ui:
        await ui.press("2")
        ui.app.screen.goto_node(names[0])
        view = ui.app.screen.query_one("#graph-view", TextView)
        view.focus()
        await ui.settle()
        bar = ui.app.screen.query_one(SearchBar)
        await ui.press("slash")
        assert bar.is_open and ui.app.focused is view
        await ui.pilot.press(*f"{target}:q", "backspace")  # a typo, taken back
        await ui.settle()
        assert bar.query == f"{target}:" and ui.app.current_mode == "passes"
        assert f"{target}:" in ui.text()  # painted in the bar
        await ui.press("enter")
        assert ui.cursor_line("#graph-view").startswith(f"  {target}:")
        assert "matching lines" in ui.text()
        await ui.press("escape")
        assert not bar.is_open and ui.app.focused is view
        # opened again: the last query selected, a character replaces it
        await ui.press("slash")
        assert bar.query == f"{target}:"
        await ui.press("x")
        assert bar.query == "x"
        await ui.press("ctrl+u")
        assert bar.query == ""
        ui.app.post_message(events.Paste(f"{target}:\nsecond line"))
        await ui.settle()
        assert bar.query == f"{target}:"
        await ui.press("escape")
        assert not bar.is_open
        await ui.press("1")  # closed: the keys are the screen's again
        assert ui.app.current_mode == "overview"


async def test_search_reports_no_match(open_ui, transformer_trace: Path) -> None:
    async with open_ui(transformer_trace) as ui:
        await ui.press("slash")
        await ui.pilot.press(*"zzzz-not-there")
        await ui.press("enter")
        assert "no match" in ui.text()
        # opening the bar again does not show the last search's status
        await ui.press("escape", "slash")
        assert "no match" not in ui.text()


async def test_search_falls_back_to_the_view_that_has_a_match(open_ui, transformer_trace: Path) -> None:
    """On the pass stepper the stage list has the focus; a node's name is found in the graph."""
    g = Trace(transformer_trace).graphs[0]
    target = next(n.name for n in g.stage_graph(g.stages[0]).nodes
                  if n.op == "call_function" and not any(n.name in s.name for s in g.stages))
    async with open_ui(transformer_trace) as ui:
        await ui.press("2")
        assert ui.app.focused is ui.app.screen.query_one("#stages")
        stage = ui.app.screen.current_stage()
        await ui.press("slash")
        await ui.pilot.press(*f"{target}:")
        await ui.press("enter")
        assert ui.cursor_line("#graph-view").startswith(f"  {target}:")
        assert "no match" not in ui.text() and "matching lines" in ui.text()
        assert ui.app.screen.current_stage().index == stage.index  # the list did not move
        await ui.press("escape")
        assert ui.app.focused is ui.app.screen.query_one("#graph-view")


async def test_command_palette_runs_actions(open_ui, transformer_trace: Path) -> None:
    async with open_ui(transformer_trace) as ui:
        await ui.press("ctrl+p")
        await ui.pilot.press(*"IR & fusion")
        await ui.settle()
        assert "Go to IR & fusion" in ui.text()
        await ui.press("enter")
        assert ui.app.current_mode == "ir"


async def test_command_palette_offers_every_action_graph_and_kernel(open_ui, transformer_trace: Path) -> None:
    from tuidebug.tui.commands import TraceCommands

    trace = Trace(transformer_trace)
    async with open_ui(transformer_trace) as ui:
        await ui.press("2")
        provider = TraceCommands(ui.app.screen)
        titles = [t for t, _, _ in provider._commands()]
        for k in keymap.KEYS:
            if k.palette and k.scope in ("app", "screen", "passes"):
                assert any(k.description in t for t in titles), k.id
        for g in trace.graphs:
            assert f"Graph: {g.id}" in titles
        generated = [k for k in ui.app.current_graph.kernels if k.kind != "extern"]
        assert generated
        for kern in generated:
            assert f"Kernel: {kern.name}" in titles
        # a palette command from a screen's scope runs on that screen
        run = next(r for t, _, r in provider._commands() if t == "Passes: Next pass")
        result = run()
        if inspect.isawaitable(result):
            await result
        await ui.settle()
        assert ui.app.screen.current_stage().index == trace.graphs[0].stages[1].index


async def test_help_lists_every_key(open_ui, transformer_trace: Path) -> None:
    # tall enough for the whole help (one row per key; it scrolls on a real terminal)
    async with open_ui(transformer_trace, size=(160, 60 + 2 * len(keymap.KEYS))) as ui:
        await ui.press("question_mark")
        from tuidebug.tui.screens.modals import HelpScreen

        assert isinstance(ui.app.screen, HelpScreen)
        text = ui.text()
        for k in keymap.KEYS:
            assert k.id in text, k.id
        await ui.press("escape")
        assert not isinstance(ui.app.screen, HelpScreen)


async def test_bindings_have_ids_and_can_be_remapped(open_ui, transformer_trace: Path) -> None:
    async with open_ui(transformer_trace) as ui:
        ui.app.set_keymap({"app.screen.ir": "f9"})  # a key no screen has
        await ui.press("f9")
        assert ui.app.current_mode == "ir"


async def test_choose_another_graph(open_ui, graph_break_trace: Path) -> None:
    trace = Trace(graph_break_trace)
    assert len(trace.graphs) > 1
    async with open_ui(graph_break_trace) as ui:
        await ui.press("2", "G")
        second = trace.graphs[1]
        await ui.press("down", "enter")
        assert ui.app.current_graph.id == second.id
        text = ui.text()
        assert f"graph {second.id}" in text
        assert f"{second.id}: {len(second.stages)} stages" in text
        await ui.press("ctrl+right")
        assert ui.app.current_graph.id == trace.graphs[2 % len(trace.graphs)].id


async def test_svg_export_from_the_ui(open_ui, transformer_trace: Path, tmp_path: Path,
                                      monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # the exporter writes to the working directory
    async with open_ui(transformer_trace) as ui:
        await ui.press("2", "right_square_bracket", "right_square_bracket", "e")
        for _ in range(200):  # graphviz may take a while
            await ui.settle()
            notes = " ".join(ui.notifications())
            if "SVG written" in notes or "failed" in notes:
                break
        notes = " ".join(ui.notifications())
        assert "SVG written to" in notes, notes
        written = Path(notes.split("SVG written to ", 1)[1].split()[0])
        assert written.parent == tmp_path.resolve() and written.suffix == ".svg"
        assert "<svg" in written.read_text()[:2000]


def test_opening_a_trace_never_imports_torch(transformer_trace: Path, tmp_path: Path) -> None:
    """Every screen (flags: its registry, and the recompile worker it starts in the
    background; compare: a diff against another trace), and an SVG export."""
    code = textwrap.dedent(f"""
        import asyncio, json, sys
        from pathlib import Path
        from tuidebug.trace.format.reader import Trace
        from tuidebug.tui.app import TuidebugApp

        async def main():
            app = TuidebugApp(Trace({str(transformer_trace)!r}), prewarm=True)
            async with app.run_test(size=(160, 45)) as pilot:
                async def press(*keys):
                    for key in keys:
                        await pilot.press(key)
                        await pilot.pause()
                        await app.workers.wait_for_complete()
                await press(*"12345678")
                flags = app._flags_screen()
                worker = app.recompile_worker
                app.compare_with = Path({str(transformer_trace)!r})
                await press("1", "8")
                compared = len(app.screen.query_one("#compare-view").source)
                await press("2", "enter", "2", "e")
                for _ in range(300):  # graphviz may take a while
                    await pilot.pause(0.1)
                    await app.workers.wait_for_complete()
                    svg = [str(n.title) + ": " + n.message for n in app._notifications
                           if "SVG written" in n.message or "SVG export" in (n.title or "")]
                    if svg:
                        break
                shown = app.current_mode
                flags_ok = flags is not None and flags.registry is not None
                started = worker is not None and worker.pid is not None
            print(json.dumps({{"torch": "torch" in sys.modules,
                               "inductor": "torch._inductor" in sys.modules, "mode": shown,
                               "flags": flags_ok, "worker": started, "compared": compared,
                               "svg": svg}}))
        asyncio.run(main())
    """)
    env = dict(os.environ, PYTHONPATH=pythonpath())
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=300, cwd=tmp_path)  # the SVG is written to the working directory
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["flags"] and out["worker"] and out["compared"] > 3, out
    assert out["svg"] and "SVG written" in out["svg"][0], out
    assert {k: out[k] for k in ("torch", "inductor")} == {"torch": False, "inductor": False}


async def test_big_text_is_one_line_api_widget(open_ui, mlp_trace: Path, transformer_trace: Path) -> None:
    """The graph text is virtual: the widget count does not grow with the node count."""
    counts = []
    for path in (mlp_trace, transformer_trace):
        async with open_ui(path) as ui:
            await ui.press("2")
            ui.app.screen.goto_node(Trace(path).graphs[0].final_graph().nodes[0].name)
            await ui.settle()
            counts.append((len(list(ui.app.screen.walk_children())), len(ui.lines("#graph-view"))))
    assert counts[0][1] != counts[1][1]
    assert counts[0][0] == counts[1][0]


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (160, 45), (220, 60)])
async def test_every_terminal_size_paints_every_screen(open_ui, mlp_trace: Path, size) -> None:
    """The title bar shortens its tabs on narrow terminals; every screen must still paint."""
    from tuidebug.tui.keymap import SCREENS, screen_key

    async with open_ui(mlp_trace, size=size) as ui:
        for i, _ in enumerate(SCREENS):
            await ui.press(screen_key(i))
        await ui.press("1")
        text = ui.text()
        title = text.splitlines()[0]
        assert "mlp" in text and " 1 Over" in title
        # every tab is on the bar (at 80 columns it was cut after 7: the keys 8, 9, 0 unseen);
        # where names do not fit, the other tabs are their keys
        keys = [screen_key(i) for i, _ in enumerate(SCREENS)]
        assert all(f" {k} " in title for k in keys), title
        assert "7 Flag" in title or size[0] < 100, title
        from tuidebug.tui.widgets.bars import TitleBar

        await ui.pilot.click(TitleBar, offset=(title.index(" 9 ") + 1, 0))  # a tab, clicked
        await ui.settle()
        assert ui.app.current_mode == "shapes", title


async def test_a_long_trace_name_gives_way_to_the_tabs(open_ui, mlp_trace: Path, copy_trace) -> None:
    """``tuidebug demo`` names its trace ``transformer_block-20261124-070501``: at 120 columns
    the name is cut in its middle (its end tells two runs apart) and every tab stays whole."""
    name = "a_model_with_a_rather_long_name_here-20261124-070501"
    async with open_ui(copy_trace(mlp_trace, name), size=(120, 40)) as ui:
        title = ui.text().splitlines()[0]
        assert "…-070501" in title and name not in title, title
        assert " 0 Prof" in title and " 1 Over" in title, title


async def test_a_key_in_the_footer_is_pressed_by_a_click(open_ui, mlp_trace: Path) -> None:
    """The footer is one line drawn by one widget: a click on a key's place presses it (help
    opens), the palette's key sits at the right end, and the key under the pointer gives its
    tooltip."""
    from tuidebug.tui.screens.modals import HelpScreen
    from tuidebug.tui.widgets.bars import KeyFooter

    async with open_ui(mlp_trace, size=(120, 40)) as ui:
        line = ui.text().splitlines()[-1]
        assert " ? Help " in line and line.rstrip().endswith("^p palette"), line
        footer = ui.app.screen.query_one(KeyFooter)
        x = line.index(" ? Help ") + 1
        await ui.pilot.hover(KeyFooter, offset=(x, 0))
        help_key = next(k for k in keymap.KEYS if k.id == "app.help")
        assert footer.tooltip == help_key.help, footer.tooltip
        await ui.pilot.click(KeyFooter, offset=(x, 0))
        await ui.settle()
        assert isinstance(ui.app.screen, HelpScreen)
