"""The shapes & guards screen (key 9) on the real dynamic-shapes trace (shared fixture)."""

from __future__ import annotations

from pathlib import Path

from tuidebug.trace.queries.dynamic import compile_dynamic
from tuidebug.trace.format.reader import Trace
from tuidebug.tui.keymap import SCREENS, screen_key
from tuidebug.tui.messages import ShowNode
from tuidebug.tui.screens.source_line import SourceLineScreen, source_line_text

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dynamic_shapes.py"

KEY = screen_key(SCREENS.index("shapes"))


def line_of(text: str) -> int:
    return next(i for i, ln in enumerate(EXAMPLE.read_text().splitlines(), 1) if text in ln)


def _marked_line(screen: str) -> str:
    """The painted row of the modal that marks the user line (▶)."""
    return next(ln for ln in screen.splitlines() if "▶ " in ln and "│" in ln)


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
        # the advice is wrapped to the screen, all of it on it (one 300-character line was
        # read by scrolling sideways)
        advice = compile_dynamic(trace, "0/1")["recompile"]["suggestion"]
        painted = ui.text().splitlines()
        flat = " ".join(ln.strip().removeprefix("avoid it: ") for ln in painted)
        assert len(advice) > 150 and " ".join(advice.split()) in flat, (advice, painted)
        assert "maybe_mark_dynamic(x, 0)" in flat
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
        # the user line in its source (a branch: no node comes from it)
        assert isinstance(ui.app.screen, SourceLineScreen)
        body = ui.app.screen.query_one("#source-line-view").render()
        here = _marked_line(ui.text())
        assert f"{line_of('if x.shape[0] == 8:')} │     if x.shape[0] == 8:" in here
        assert "def pick(x):" in ui.text() and "return x + 1" in ui.text()  # its context
        assert "specialized: L['x'].size()[0] = 8 by Eq(" in str(body)
        assert "No FX node of 1_0-inference comes from this line" in str(body)
        await ui.press("n")  # nothing to go to: the modal stays
        assert isinstance(ui.app.screen, SourceLineScreen)
        await ui.press("escape")
        assert ui.app.current_mode == "shapes" and not isinstance(ui.app.screen,
                                                                   SourceLineScreen)
        ui.app.set_graph(limited.id)
        assert await ui.wait_for(lambda: "3/2" in "".join(ui.lines("#shapes-view")), 20)
        text = "\n".join(ui.lines("#shapes-view"))
        assert "recompile limit hit" in text and "3/2" in text


async def test_a_guard_shows_its_line_and_goes_to_its_nodes(open_ui, dynamic_trace: Path) -> None:
    """Enter on a guard added by torch._check: its line in the source, then its FX nodes marked
    in the pass stepper."""
    trace = Trace(dynamic_trace)
    take = next(g for g in trace.graphs if g.compile_id == "2/0")
    check = line_of("torch._check(k >= 0)")
    dynamo = take.stage_graph(take.snapshots()[0])
    # the check's comparison and its assert (torch 2.11 puts Dynamo's runtime asserts at the
    # line that made the symbol, the .item(): then no node comes from the check's line)
    expected = [n.name for n in dynamo.nodes if (n.source or {}).get("line") == check
                and n.op != "placeholder"]
    async with open_ui(dynamic_trace, notifications=True) as ui:
        ui.app.set_graph(take.id)
        await ui.press(KEY)
        assert await ui.wait_for(lambda: "Guards by input" in "".join(ui.lines("#shapes-view")),
                                 20)
        lines = ui.lines("#shapes-view")
        row = next(i for i, ln in enumerate(lines) if "SHAPE_ENV: u0 >= 0" in ln)
        assert f"dynamic_shapes.py:{check}" in lines[row]
        ui.app.screen.query_one("#shapes-view").move_to(row)
        await ui.press("enter")
        assert isinstance(ui.app.screen, SourceLineScreen)
        screen_text = ui.text()
        assert f"{check} │     torch._check(k >= 0)" in _marked_line(screen_text)
        assert "k = (x[:, 0] > 0).sum().item()" in screen_text  # the lines around it
        assert "guard SHAPE_ENV at dynamic_shapes.py:" in screen_text
        if not expected:
            assert f"No FX node of {take.id} comes from this line" in screen_text
            await ui.press("n")  # nothing to go to: the modal stays
            assert isinstance(ui.app.screen, SourceLineScreen)
            await ui.press("escape")
        else:
            assert f"{len(expected)} FX node(s) of {take.id} come from this line" in screen_text
            await ui.press("n")
            assert await ui.wait_for(lambda: ui.app.current_mode == "passes", 10)
            await ui.settle()
            passes = ui.app.screen
            assert passes.marks == set(expected)
            assert passes.current_stage().index == take.snapshots()[0].index
            assert ui.cursor_line("#graph-view").startswith(f"  {expected[0]}")
            assert any(f"nodes from dynamic_shapes.py:{check}" in n for n in ui.notifications())
        # a symbol made again after Dynamo (renamed to u0): its line comes from a node, and
        # enter marks the nodes that use what it became
        later = next(s for s in compile_dynamic(trace, "2/0")["symbols"] if s["replaced_by"])
        await ui.press(KEY)
        lines = ui.lines("#shapes-view")
        row = next(i for i, ln in enumerate(lines) if ln.startswith(f"  {later['name']} "))
        assert f"dynamic_shapes.py:{line_of('.sum().item()')} (via node item)" in lines[row]
        ui.app.screen.query_one("#shapes-view").move_to(row)
        await ui.press("enter")
        assert await ui.wait_for(lambda: ui.app.current_mode == "passes", 10)
        uses = {n.name for n in dynamo.nodes if "u0" in str(n.tensor)}
        assert "item" in uses and ui.app.screen.marks == uses


def test_the_source_line_is_shown_inert() -> None:
    """A trace's user line, its context and node names shown as text: escape sequences visible,
    markup not read; a trace without context shows the line it has."""
    evil = "[bold red]x[/]\x1b]52;c;aGk=\x07\u202e"
    line = {"file": evil, "line": 7, "fn": evil, "code": evil,
            "context": [{"line": 6, "code": evil}, {"line": 7, "code": evil}]}
    text = source_line_text(f"guard {evil}: {evil}", line, evil, [evil])
    assert "\x1b" not in text.plain and "\x07" not in text.plain and "\u202e" not in text.plain
    assert "[bold red]x[/]\\x1b]52;c;aGk=\\x07\\u202e" in text.plain
    assert "▶ 7 │ [bold red]" in text.plain and "  6 │ [bold red]" in text.plain
    old = source_line_text("guard X: y", {"file": "m.py", "line": 3, "fn": "f",
                                          "code": "if x.shape[0] > 4:"}, "g", [])
    assert "▶ 3 │ if x.shape[0] > 4:" in old.plain and "no source around" in old.plain
    assert "No FX node of g comes from this line" in old.plain


async def test_one_guard_count_in_every_view(open_ui, dynamic_trace: Path) -> None:
    """The same compile's guards counted once, Dynamo's own count, on the overview, the shapes
    screen, the compile's modal and in ``info --json`` (the overview said 841 where the shapes
    screen and JSON said 610)."""
    from tuidebug.trace.queries.summary import trace_summary

    trace = Trace(dynamic_trace)
    graph = next(g for g in trace.graphs if g.compile_id == "0/1")
    want = trace.compiles["0/1"]["metrics"]["guard_count"]
    assert isinstance(want, int) and want > 0
    as_json = next(c for c in trace_summary(trace)["compiles"] if c["id"] == "0/1")
    assert as_json["guards"]["count"] == want, as_json["guards"]
    async with open_ui(dynamic_trace) as ui:
        lines = ui.lines("#overview")
        row = next(ln for ln in lines if ln.strip().startswith("0/1  "))
        assert f"  {want}  " in row, row  # the guards column
        ui.app.set_graph(graph.id)
        await ui.press(KEY)
        assert await ui.wait_for(lambda: "Guards by input" in "".join(ui.lines("#shapes-view")),
                                 20)
        heading = next(ln for ln in ui.lines("#shapes-view") if ln.startswith("Guards by input"))
        assert heading.split()[3] == str(want), heading
