"""Flags (7), compare (8), and minify and bisect from the errors screen, on real traces."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from textual import events

from tests.conftest import digest
from tuidebug.tui.screens.modals import InputScreen
from tuidebug.tui.screens.consent import ConfirmScreen


async def _filter(ui, text: str) -> None:
    await ui.press("7")
    assert await ui.wait_for(lambda: ui.app.screen.registry is not None, 30)
    ui.app.screen.action_focus_filter()
    await ui.pilot.press(*text)
    await ui.press("enter")


async def test_flags_search_shows_doc_and_rejects_bad_values(open_ui, mlp_trace: Path) -> None:
    async with open_ui(mlp_trace) as ui:
        await _filter(ui, "max_fusion")
        assert ui.app.current_mode == "flags"
        text = ui.text()
        assert "max_fusion_size" in text
        # prewarm is off (open_ui's default): no worker process until r
        assert ui.app.recompile_worker is None and "worker: not started" in text
        doc = ui.app.screen.registry.get("max_fusion_size").doc
        assert doc and doc.split("\n")[0][:40] in text
        assert ui.app.screen.selected().name.startswith("max_fusion")
        lst = ui.app.screen.query_one("#flag-list")
        lst.select_id("max_fusion_size")
        await ui.press("s")
        assert isinstance(ui.app.screen, InputScreen)
        inp = ui.app.screen.query_one("#input-value")
        inp.value = "not-a-number"
        await ui.press("enter")
        assert isinstance(ui.app.screen, InputScreen)
        assert "max_fusion_size expects" in ui.text()
        inp.value = "8"
        await ui.press("enter")
        assert not isinstance(ui.app.screen, InputScreen)
        assert ui.app.pending_flags == {"max_fusion_size": 8}
        assert "max_fusion_size = 8" in ui.text()
        await ui.press("u")
        assert ui.app.pending_flags == {}


@pytest.mark.slow  # recompiles
async def test_recompile_then_compare(open_ui, mlp_trace: Path, copy_trace) -> None:
    src = copy_trace(mlp_trace, "mlp")
    before = digest(src)
    async with open_ui(src, prewarm=True) as ui:
        await _filter(ui, "size_asserts")
        # the flags screen started the worker in the background: torch is imported and warmed
        # up there while the user picks flags, so the first recompile is already warm
        worker = ui.app.recompile_worker
        assert worker is not None and worker.pid is not None
        assert "worker: " in ui.text() and ("starting…" in ui.text() or worker.ready)
        assert await ui.wait_for(lambda: worker.ready, 180), worker.log_tail()
        await ui.pilot.pause(0.5)  # the status follows on its next tick
        assert "worker: ready" in ui.text()
        # but nothing the trace recorded runs before the user asks (docs/security.md): no
        # priming of the kernel cache on opening the screen
        assert ui.app.prime_job is None
        ui.app.screen.query_one("#flag-list").select_id("size_asserts")
        await ui.press("s")
        ui.app.screen.query_one("#input-value").value = "false"
        await ui.press("enter")
        assert ui.app.pending_flags == {"size_asserts": False}
        await ui.pilot.press("r")
        # first what will run: the trace's script, its directory, the flag (docs/security.md)
        assert await ui.wait_for(lambda: isinstance(ui.app.screen, ConfirmScreen), 30)
        await ui.settle()
        plan = ui.text()
        assert "will run" in plan and "size_asserts=False" in plan and "mlp.py" in plan
        assert ui.app.recompile_job is None
        await ui.pilot.press("y")
        await ui.pilot.pause(0.5)
        assert ui.app.recompile_job is not None
        # the UI stays responsive while the worker runs
        assert "recompil" in ui.text() or ui.app.current_mode == "compare"
        assert await ui.wait_for(lambda: ui.app.recompile_job.done, 180), \
            ui.app.recompile_job.summary()
        job = ui.app.recompile_job
        assert job.state == "ok", job.summary()
        assert ui.app.recompile_worker is worker and worker.restarts == 0  # the warm one
        assert await ui.wait_for(lambda: ui.app.current_mode == "compare" and any(
            "size_asserts" in ln for ln in ui.lines("#compare-view")), 60)
        lines = "\n".join(ui.lines("#compare-view"))
        assert "size_asserts" in lines
        assert str(job.out) in lines or job.out.name in lines
        await ui.press("o")
        assert ui.app.trace.root == job.out
        assert ui.app.current_mode == "overview"
    assert digest(src) == before


@pytest.mark.slow  # minifies
async def test_minify_from_errors_screen(open_ui, failing_trace: Path) -> None:
    async with open_ui(failing_trace) as ui:
        await ui.press("6")
        assert "m: minify" in ui.text()
        await ui.pilot.press("m")
        assert await ui.wait_for(lambda: isinstance(ui.app.screen, ConfirmScreen), 30)
        assert ui.app.screen_stack[-2].task_running is None  # nothing runs before the answer
        await ui.pilot.press("y")
        await ui.pilot.pause(0.5)
        screen = ui.app.screen
        assert screen.task_running == "minify"
        assert "minify" in ui.text()
        done = await ui.wait_for(lambda: screen.task_running is None, 240)
        assert done, ui.text()
        assert screen.repro_path is not None and screen.repro_path.is_file(), ui.text()
        assert str(screen.repro_path) in "\n".join(ui.lines("#errors-view"))
        await ui.press("o")
        assert "repro.py" in ui.text()
        await ui.press("escape")


@pytest.mark.slow  # minifies
async def test_minify_cancelled_keeps_the_best_repro(open_ui, failing_trace: Path) -> None:
    """x during the node reduction: the best repro so far is kept (not verified), and said so."""
    async with open_ui(failing_trace) as ui:
        await ui.press("6")
        await ui.pilot.press("m")
        assert await ui.wait_for(lambda: isinstance(ui.app.screen, ConfirmScreen), 30)
        await ui.pilot.press("y")
        await ui.pilot.pause(0.2)
        screen = ui.app.screen
        reducing = await ui.wait_for(lambda: "minify: nodes" in ui.text(), 240)
        assert reducing, ui.text()
        await ui.pilot.press("x")
        done = await ui.wait_for(lambda: screen.task_running is None, 120)
        assert done, ui.text()
        await ui.settle()
        assert "minify cancelled" in ui.text(), ui.text()
        assert "NOT verified" in ui.text()
        assert screen.repro_path is not None and screen.repro_path.is_file()


async def test_bisect_without_a_command_says_why_and_runs_nothing(open_ui, failing_trace: Path,
                                                                  copy_trace) -> None:
    """b on a trace that does not record the script's command line: the reason is shown before
    anything would run (no consent dialog, no task)."""
    import json

    trace = copy_trace(failing_trace, "no-command")
    manifest = json.loads((trace / "manifest.json").read_text())
    manifest["command"] = []
    (trace / "manifest.json").write_text(json.dumps(manifest))
    async with open_ui(trace) as ui:
        await ui.press("6")
        screen = ui.app.screen
        await ui.pilot.press("b")
        said = await ui.wait_for(lambda: any("command line" in str(m)
                                             for m in ui.notifications()), 30)
        assert said, ui.notifications()
        assert not isinstance(ui.app.screen, ConfirmScreen)
        assert screen.task_running is None


@pytest.mark.slow  # bisects (runs the script)
async def test_bisect_progress_then_cancel_kills_its_processes(open_ui, failing_trace: Path) -> None:
    """The child's progress events reach the screen (run 1 of the traced script); x stops the
    bisection and the run it started (in a process group of its own)."""
    async with open_ui(failing_trace) as ui:
        await ui.press("6")
        await ui.pilot.press("b")
        assert await ui.wait_for(lambda: isinstance(ui.app.screen, ConfirmScreen), 30)
        assert ui.app.screen_stack[-2].task_running is None  # nothing runs before the answer
        await ui.pilot.press("y")
        await ui.pilot.pause(0.2)
        screen = ui.app.screen
        running = await ui.wait_for(lambda: "bisect: run 1: " in ui.text(), 180)
        assert running, ui.text()
        bisector = screen._bisect.child.pid
        # the bisection's run of the script: a child of the bisector, in a group of its own
        assert await ui.wait_for(lambda: _descendants(bisector), 60)
        started = {bisector, *_descendants(bisector)}
        await ui.pilot.press("x")
        done = await ui.wait_for(lambda: screen.task_running is None, 60)
        assert done, ui.text()
        await ui.settle()
        assert "bisect: cancelled" in ui.text(), ui.text()
        assert await ui.wait_for(lambda: not (started & _running()), 15), started & _running()


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _running() -> set[int]:
    """Every process that runs (not a zombie)."""
    out = set()
    for p in os.listdir("/proc"):
        if p.isdigit():
            stat = _stat(int(p))
            if stat and stat[0] != "Z":
                out.add(int(p))
    return out


def _descendants(pid: int) -> set[int]:
    parents = {p: int(s[1]) for p in _running() if (s := _stat(p))}
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        kids = {p for p, pp in parents.items() if pp == parent}
        todo += list(kids - found)
        found |= kids
    return found


async def test_compare_screen_reads_noise_between_two_processes_as_no_change(
        open_ui, tmp_path: Path) -> None:
    """Two profiled traces whose whole calls' intervals are apart but whose rounds overlap (two
    processes on a busy machine): the compare screen says no change, never faster or slower."""
    from tests.trace.test_verdict_ledger import _call, _rounds, _trace

    a = _trace(tmp_path / "a", _rounds(_call(0.78, 0.77, 0.80), spread=0.3)).root
    b = _trace(tmp_path / "b", _rounds(_call(0.90, 0.89, 0.91), spread=0.3)).root
    async with open_ui(a) as ui:
        ui.app.compare_with = b
        await ui.press("8")
        assert await ui.wait_for(lambda: any("compiled vs eager" in ln
                                             for ln in ui.lines("#compare-view")), 60)
        lines = "\n".join(ui.lines("#compare-view"))
        assert "no change" in lines and "not compared part by part" in lines, lines
        assert "faster" not in lines and "slower" not in lines, lines


KERNELS = 120


def _many_kernels(root: Path, edit: bool) -> Path:
    """A trace (torch-free writer) of one graph of 120 generated C++ kernels of 90 lines each;
    with ``edit``, every third line of each kernel differs: compared, 120 code diffs to draw
    (15k lines: a second of rendering), read and matched in a fraction of that."""
    from tuidebug.trace.format.writer import TraceWriter

    kernels = []
    for k in range(KERNELS):
        body = "\n".join(f"    x[{i}] = x[{i}] * {(i * 7 + k + (1 if edit and i % 3 == 0 else 0))}"
                         f".0f + y[{i}];" for i in range(90))
        kernels.append(f"cpp_fused_add_mul_{k} = async_compile.cpp_pybinding(['float*', "
                       f"'const float*'], r\'\'\'\nextern \"C\" void kernel(float* x, "
                       f"const float* y) {{\n{body}\n}}\n\'\'\')\n")
    calls = "".join(f"    cpp_fused_add_mul_{k}(buf0, buf1)\n" for k in range(KERNELS))
    w = TraceWriter(root, command=["many.py"])
    w.add_graph("0_0-inference", kind="inference", compile_id="0/0")
    g = w.graph("0_0-inference")
    index = g.write_output_code("".join(kernels) + f"def call(args):\n{calls}")
    assert sum(1 for k in index if not k.extern) == KERNELS
    g.write_meta(kind="inference", compile_id="0/0", status="ok", stages=[],
                 phase_starts={"inductor": 0.0}, end=1.0, kernels=len(index),
                 fusion={"fused": 0, "rejected": 0})
    w.finish("ok")
    return root


async def test_compare_screen_is_drawn_in_a_worker_the_keys_answered_meanwhile(
        open_ui, tmp_path: Path) -> None:
    """The comparison is read and drawn in a worker (its tables and code diffs: 50-200 ms on
    two 24-layer traces, seconds for many changed kernels; on the UI thread before): its first
    screenful is shown while the rest is drawn, and a key pressed then is answered before the
    rest is drawn — it would wait for it if the drawing moved back to the UI thread. Every
    drawing the screen was sent was made in a worker's thread."""
    a = _many_kernels(tmp_path / "a", edit=False)
    b = _many_kernels(tmp_path / "b", edit=True)
    sent: list[Any] = []

    def hook(message: Any) -> None:
        if type(message).__name__ == "DiffRead":
            sent.append(message.data)

    async def key(ui: Any, k: str, done: Callable[[], bool]) -> None:
        """``k`` pressed, and the app run until ``done()``: not through Pilot, which waits
        for the process to be idle (the worker drawing included) after each key."""
        ui.app.post_message(events.Key(k, k))
        deadline = time.monotonic() + 60
        while not done():
            assert time.monotonic() < deadline, f"{k} not answered"
            await asyncio.sleep(0.002)

    async with open_ui(a, message_hook=hook) as ui:
        ui.app.compare_with = b
        await key(ui, "8", lambda: ui.app.current_mode == "compare"
                  and ui.app.screen.query_one("#compare-view").line_count > 3)
        screen = ui.app.screen
        view = screen.query_one("#compare-view")
        assert not screen.complete, ("drawn whole before any of it was shown", sent)
        first = ui.lines("#compare-view")
        assert first[0].startswith("o: open") and len(first) >= view.size.height, first
        await key(ui, "1", lambda: ui.app.current_mode == "overview")  # while it is drawn
        assert not screen.complete, "the key waited for the comparison to be drawn"
        assert await ui.wait_for(lambda: screen.complete, 120, poll=0.05)
        await ui.press("8")
        lines = ui.lines("#compare-view")
        assert lines[:len(first)] == first
        assert sum(1 for ln in lines if "cpp_fused_add_mul_" in ln and " → " in ln) >= KERNELS
        assert [d.complete for d in sent] == [False, True], sent
        assert all(d.drawn_on and d.drawn_on != threading.main_thread().name for d in sent)


async def test_the_rest_of_a_comparison_leaves_its_first_screenful_as_drawn(
        open_ui, tmp_path: Path) -> None:
    """The rest of a comparison follows its first screenful (issue 30): the lines shown are
    not drawn again — the view is given the same lines and more (``extend_source``), keeps
    what it drew of them (here the rest brings a horizontal scroll bar, so every row is
    painted again, from the lines drawn), the cursor and scroll as they were. Before, every
    line shown was drawn again from its text (10-20 ms of the UI thread on two 24-layer
    traces)."""
    from tuidebug.tui.widgets.textview import RichLines

    a = _many_kernels(tmp_path / "a", edit=False)
    b = _many_kernels(tmp_path / "b", edit=True)
    async with open_ui(a) as ui:
        ui.app.compare_with = b
        ui.app.post_message(events.Key("8", "8"))  # not through Pilot: it waits for workers
        assert await ui.wait_for(lambda: ui.app.current_mode == "compare" and ui.app.screen
                                 .query_one("#compare-view").line_count > 3, 60, poll=0.002)
        screen = ui.app.screen
        view = screen.query_one("#compare-view")
        height = view.scrollable_content_region.height
        # the first screenful painted: its lines drawn (the view keeps them drawn)
        assert await ui.wait_for(lambda: len(view._cache) >= height, 30, poll=0.005)
        assert not screen.complete, "drawn whole before any of it was shown"
        first = view.line_count
        assert first >= height
        drawn: list[int] = []  # lines drawn from their text (not found drawn already)
        real = RichLines.rich

        def watched(self: RichLines, i: int) -> Any:
            drawn.append(i)
            return real(self, i)
        RichLines.rich = watched  # type: ignore[method-assign]
        try:
            assert await ui.wait_for(lambda: screen.complete, 120, poll=0.05)
            await ui.settle()
            assert view.line_count > first and view.scroll_offset.y == 0 and view.cursor == 0
            assert drawn == [], sorted(set(drawn))
            view.scroll_end(animate=False, immediate=True)  # the rest is there, drawn when seen
            await ui.settle()
        finally:
            RichLines.rich = real  # type: ignore[method-assign]
        assert drawn and min(drawn) >= first, sorted(set(drawn))
        assert ui.lines("#compare-view")[0].startswith("o: open")


def test_a_drawing_stops_once_cancelled() -> None:
    """A comparison no longer wanted (another asked for, or this one at another width: the
    worker drawing it cancelled) is not drawn to its end: ``draw`` stops between two parts,
    and what it drew is not complete (the screen is sent nothing of it)."""
    import io

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from tuidebug.tui.screens.compare import draw

    def table(i: int) -> Table:
        t = Table(title=f"part {i}")
        t.add_column("kernel")
        t.add_column("A → B")
        for k in range(10):
            t.add_row(f"cpp_fused_{i}_{k}", Text(f"{k} → {k + 1}"))
        return t
    items = [table(i) for i in range(40)]
    console = Console(file=io.StringIO(), width=100, force_terminal=True)
    whole = draw(console, items, 100, 20)
    assert whole.complete and len(whole.lines) > 400
    asked: list[int] = []

    def cancelled() -> bool:
        asked.append(1)
        return len(asked) > 3  # cancelled while the fourth part was drawn
    part = draw(console, items, 100, 20, cancelled=cancelled)
    assert not part.complete
    assert part.lines and len(part.lines) == 3 * len(whole.lines) // 40
    assert [t.plain for t in part.lines] == [t.plain for t in whole.lines[:len(part.lines)]]


async def test_a_comparison_asked_for_meanwhile_replaces_the_one_drawn(
        open_ui, tmp_path: Path) -> None:
    """Another trace named while a comparison is drawn: the stale one is dropped (its worker
    cancelled, nothing more of it shown), the screen shows the one asked for last."""
    from tuidebug.tui.screens.compare import CompareScreen

    a = _many_kernels(tmp_path / "a", edit=False)
    b = _many_kernels(tmp_path / "b", edit=True)
    c = _many_kernels(tmp_path / "c", edit=False)
    sent: list[tuple[Path, bool]] = []

    def hook(message: Any) -> None:
        if isinstance(message, CompareScreen.DiffRead):
            sent.append((message.key, message.data.complete))

    async with open_ui(a, message_hook=hook) as ui:
        ui.app.compare_with = b
        ui.app.post_message(events.Key("8", "8"))
        assert await ui.wait_for(lambda: (b, False) in sent, 60, poll=0.002)
        screen = ui.app.screen
        assert not screen.complete
        await ui.app._compare_with(c)  # what "compare with trace…" does once c is read
        assert await ui.wait_for(lambda: screen.complete and screen.shown_path == c, 60)
        await ui.settle()
        assert sent[-1] == (c, True) and (b, True) not in sent, sent
        lines = ui.lines("#compare-view")
        assert any(str(c) in ln for ln in lines) and not any(str(b) in ln for ln in lines)
        assert not any("cpp_fused_add_mul_" in ln and "changed" in ln for ln in lines)


async def test_compare_screen_is_drawn_again_at_a_new_width(
        open_ui, transformer_trace: Path, mlp_trace: Path) -> None:
    """The comparison is drawn again when the width changes — not when a layout leaves the
    width as it was."""
    async with open_ui(transformer_trace) as ui:
        ui.app.compare_with = mlp_trace
        await ui.press("8")
        screen = ui.app.screen
        assert await ui.wait_for(lambda: ui.app.screen.query_one("#compare-view").line_count > 5,
                                 60)
        wide = max(len(ln) for ln in ui.lines("#compare-view"))
        assert screen._drawn_width == ui.app.size.width - 2
        await ui.pilot.resize_terminal(100, 45)
        await ui.settle()
        assert await ui.wait_for(lambda: screen._drawn_width == 98, 60)
        narrow = max(len(ln) for ln in ui.lines("#compare-view"))
        assert narrow < wide, (narrow, wide)


async def test_compare_view_shows_no_horizontal_scrollbar_and_every_row(
        open_ui, transformer_trace: Path, mlp_trace: Path) -> None:
    """The comparison's tables are drawn to the width the view has: no horizontal scrollbar
    (it was always shown, one column wide, over the view's last row), and at the end the last
    line is painted on the view's last row."""
    async with open_ui(transformer_trace) as ui:
        ui.app.compare_with = mlp_trace
        await ui.press("8")
        screen = ui.app.screen
        assert await ui.wait_for(lambda: screen.complete, 60)
        await ui.settle()
        view = screen.query_one("#compare-view")
        assert view.line_count > view.size.height, view.line_count  # it scrolls down
        widest = max(len(ln) for ln in ui.lines("#compare-view"))
        assert widest == screen._drawn_width == view.scrollable_content_region.width, widest
        assert not view.show_horizontal_scrollbar
        assert view.scrollable_content_region.height == view.size.height
        await ui.press("end")
        bottom = view.region.y + view.region.height - 1
        painted = ui.text().splitlines()[bottom]
        last = ui.lines("#compare-view")[-1]
        assert last.strip() and painted.startswith(last), (painted, last)


async def test_o_then_8_reads_neither_trace_again(open_ui, mlp_trace: Path,
                                                  copy_trace) -> None:
    """``o`` opens the compared trace as it was read for the comparison, and 8 then compares
    it with the trace open before, as read then (issue 30): neither is read again. A trace
    whose manifest is written again is read afresh."""
    other = copy_trace(mlp_trace, "other")
    async with open_ui(mlp_trace) as ui:
        first = ui.app.trace
        ui.app.compare_with = other
        await ui.press("8")
        screen = ui.app.screen
        assert await ui.wait_for(lambda: screen.complete, 60)
        compared = ui.app.open_traces.get(other)
        assert compared is ui.app.open_traces.get(other)  # kept
        await ui.press("o")
        assert ui.app.trace is compared and ui.app.compare_with == Path(mlp_trace)
        await ui.press("8")
        assert await ui.wait_for(lambda: ui.app.screen.complete, 60)
        assert ui.app.open_traces.get(mlp_trace) is first
        assert any(str(other) in ln for ln in ui.lines("#compare-view"))
        manifest = other / "manifest.json"
        text = manifest.read_text()
        manifest.write_text(text + " ")  # written again (a recompile into the same folder)
        assert ui.app.open_traces.get(other) is not compared


async def test_o_compares_nothing_until_the_compare_screen_is_shown(open_ui, mlp_trace: Path,
                                                                    copy_trace) -> None:
    """Review: after ``o`` (and on every rank switch) the trace compared with is named
    before the screens are built again, and the prebuilder worked out the whole comparison
    (``diff_traces`` and its tables) unasked. Built ahead, the compare screen says nothing is
    compared yet; it compares when shown. Counted from the comparisons drawn (``DiffRead``,
    seen by the app's message hook)."""
    from tuidebug.tui.screens.compare import CompareScreen

    other = copy_trace(mlp_trace, "other")
    drawn: list[object] = []

    def hook(message: object) -> None:
        if isinstance(message, CompareScreen.DiffRead):
            drawn.append(message.key)

    async with open_ui(mlp_trace, prebuild=True, message_hook=hook) as ui:
        ui.app.compare_with = other
        await ui.press("8")
        assert await ui.wait_for(lambda: ui.app.screen.complete, 60)
        assert drawn and set(drawn) == {other}  # the hook sees a comparison drawn
        await ui.press("o")
        assert ui.app.trace.root == other and ui.app.current_mode == "overview"
        assert await ui.wait_for(lambda: ui.app.prebuilder.done, 120), ui.app.prebuilder.built
        assert "compare" in ui.app.prebuilder.built
        await ui.settle()
        after_o = [k for k in drawn if k != other]
        assert after_o == [], after_o
        (screen,) = [s for s in ui.app._registry if isinstance(s, CompareScreen)]
        assert not screen.is_current and screen.shown_path is None
        view = screen.query_one("#compare-view")
        assert view.source.plain(0) == "Nothing compared yet.", view.source.plain(0)
        await ui.press("8")
        assert await ui.wait_for(lambda: ui.app.screen.complete, 60)
        assert [k for k in drawn if k != other][-1] == Path(mlp_trace)
        assert any(str(other) in ln for ln in ui.lines("#compare-view"))


async def test_another_graph_chosen_compares_nothing_again(open_ui, transformer_trace: Path,
                                                           mlp_trace: Path) -> None:
    """The comparison does not depend on the graph chosen: choosing another one while the
    compare screen is shown reads and draws nothing again (it compared the two traces anew
    each time: half a second on two 24-layer traces)."""
    sent: list[Any] = []

    def hook(message: Any) -> None:
        if type(message).__name__ == "DiffRead":
            sent.append(message.data)

    async with open_ui(transformer_trace, message_hook=hook) as ui:
        ui.app.compare_with = mlp_trace
        await ui.press("8")
        assert await ui.wait_for(lambda: ui.app.screen.complete, 60)
        drawn = len(sent)
        assert drawn >= 1
        lines = ui.lines("#compare-view")
        graphs = [g.id for g in ui.app.trace.graphs]
        assert len(graphs) == 2
        other = next(g for g in graphs if g != ui.app.current_graph.id)
        ui.app.set_graph(other)
        await ui.settle()
        assert ui.app.current_graph.id == other
        assert len(sent) == drawn and ui.lines("#compare-view") == lines
