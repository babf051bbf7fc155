"""The shapes & guards screen (key 9) on the real dynamic-shapes trace (shared fixture)."""

from __future__ import annotations

from pathlib import Path

from tuidebug.trace.dynamic import compile_dynamic
from tuidebug.trace.reader import Trace
from tuidebug.tui.keymap import SCREENS, screen_key
from tuidebug.tui.messages import ShowNode

KEY = screen_key(SCREENS.index("shapes"))


async def test_symbols_guards_and_the_recompile_chain(open_ui, dynamic_trace: Path) -> None:
    trace = Trace(dynamic_trace)
    shown: list[ShowNode] = []
    graph = next(g for g in trace.graphs if g.compile_id == "0/1")
    sym = compile_dynamic(trace, "0/1")["symbols"][0]["name"]
    async with open_ui(dynamic_trace, notifications=True,
                       message_hook=lambda m: shown.append(m) if isinstance(m, ShowNode)
                       else None) as ui:
        ui.app.set_graph(graph.id)
        await ui.press(KEY)
        assert await ui.wait_for(lambda: "Recompile chain" in "".join(ui.lines("#shapes-view")), 20)
        lines = ui.lines("#shapes-view")
        text = "\n".join(lines)
        assert "Recompile chain" in text and "guard failed: tensor 'x' size mismatch" in text
        assert "maybe_mark_dynamic(x, 0)" in text
        now = next(ln for ln in lines if ln.strip().startswith("▶ 0/1"))
        assert "vs 0/0: nodes" in now  # the graph diff of the two compiles
        row = next(i for i, ln in enumerate(lines) if ln.strip().startswith(sym))
        assert "L['x'].size()[0]" in lines[row] and "hint 3" in lines[row]
        assert "Guards by input" in text and "L['x']" in text and "TENSOR_MATCH" in text
        view = ui.app.screen.query_one("#shapes-view")
        view.move_to(row)
        await ui.press("enter")
        await ui.settle()
        assert shown and shown[-1].graph_id == graph.id and shown[-1].marks
        assert ui.app.current_mode == "passes"


async def test_specialization_and_the_limit_hit(open_ui, dynamic_trace: Path) -> None:
    trace = Trace(dynamic_trace)
    pick = next(g for g in trace.graphs if g.compile_id == "1/0")
    limited = next(g for g in trace.graphs if g.compile_id == "3/1")
    async with open_ui(dynamic_trace, notifications=True) as ui:
        ui.app.set_graph(pick.id)
        await ui.press(KEY)
        assert await ui.wait_for(lambda: "Recompile chain" in "".join(ui.lines("#shapes-view")), 20)
        lines = ui.lines("#shapes-view")
        row = next(i for i, ln in enumerate(lines) if "L['x'].size()[0] = 8" in ln)
        assert "marked dynamic" in lines[row] and "dynamic_shapes.py:" in lines[row]
        ui.app.screen.query_one("#shapes-view").move_to(row)
        await ui.press("enter")
        await ui.settle()
        assert any("if x.shape[0] == 8:" in n for n in ui.notifications())
        ui.app.set_graph(limited.id)
        assert await ui.wait_for(lambda: "3/2" in "".join(ui.lines("#shapes-view")), 20)
        text = "\n".join(ui.lines("#shapes-view"))
        assert "recompile limit hit" in text and "3/2" in text
