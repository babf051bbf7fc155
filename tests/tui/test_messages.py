"""The typed messages a screen's workers post to it (``Read`` subclasses nested in each screen):
which ones arrive, in what order, and what a late one for an old selection does (nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tuidebug.trace.format.reader import Trace
from tuidebug.tui import model
from tuidebug.tui.messages import Read
from tuidebug.tui.screens import code as code_screen
from tuidebug.tui.screens.code import CodeScreen
from tuidebug.tui.screens.overview import OverviewScreen
from tuidebug.tui.screens.passes import PassesScreen
from tuidebug.tui.widgets.highlight import Highlighted
from tuidebug.tui.widgets.textview import TextView


class Recorder:
    """``message_hook`` for ``open_ui``: every ``Read`` message the app processes, in order."""

    def __init__(self) -> None:
        self.messages: list[Read] = []

    def __call__(self, message: object) -> None:
        if isinstance(message, Read):
            self.messages.append(message)

    def of(self, kind: type[Read]) -> list[Read]:
        return [m for m in self.messages if type(m) is kind]


async def test_opening_reads_the_overview_once(open_ui, transformer_trace: Path) -> None:
    seen = Recorder()
    async with open_ui(transformer_trace, message_hook=seen) as ui:
        assert [type(m) for m in seen.messages] == [OverviewScreen.SummaryRead]
        assert seen.messages[0].key is None
        assert "0_0-forward" in ui.text()  # what the message carried is on screen
        assert not OverviewScreen.SummaryRead.bubble  # for the screen that asked, not the app


async def test_each_stage_selected_is_read_once_and_a_late_read_is_dropped(
        open_ui, transformer_trace: Path) -> None:
    g = Trace(transformer_trace).graphs[0]
    seen = Recorder()
    async with open_ui(transformer_trace, message_hook=seen) as ui:
        await ui.press("2", "n", "n")
        screen = ui.app.screen
        assert isinstance(screen, PassesScreen)
        # the first stage is read in a worker; a stage whose snapshot is parsed already (the
        # same as the one before, or read ahead) is shown at once, with no worker and no message
        keys = [m.key for m in seen.of(PassesScreen.StageRead)]
        selected = [(g.id, g.stages[i].index) for i in range(3)]
        assert keys[:1] == selected[:1] and len(set(keys)) == len(keys)
        assert all(k in selected for k in keys)
        shared = [i for i in (1, 2) if model.snapshot_at(g, g.stages[i]).file == g.stages[0].file]
        assert shared and len(keys) <= 3 - len(shared), (keys, shared)
        shown = screen.stage_view
        assert isinstance(shown, model.StageView) and shown.stage.index == g.stages[2].index
        # a worker that finished late, for a stage no longer selected: nothing changes
        stale = model.stage_view(g, g.stages[0])
        screen.post_message(PassesScreen.StageRead((g.id, g.stages[0].index), stale))
        await ui.settle()
        assert screen.stage_view is shown
        assert f"[2] {g.stages[2].name}" in ui.text()
        assert f"[0] {g.stages[0].name}" not in ui.text()


def _first_kernel(trace: Path) -> tuple[Any, Any]:
    g = Trace(trace).graphs[0]
    return g, next(k for k in g.kernels if k.kind != "extern" and k.file)


async def _show_kernel(ui: Any, kernel: Any) -> CodeScreen:
    await ui.press("4")
    screen = ui.app.screen
    assert isinstance(screen, CodeScreen)
    screen.goto_kernel(str(kernel.name))
    await ui.settle()
    return screen


async def test_code_is_shown_plain_then_highlighted(open_ui, transformer_trace: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A long file (here: any, QUICK_LINES 0) is shown plain at once, then highlighted."""
    monkeypatch.setattr(code_screen, "QUICK_LINES", 0)
    g, kernel = _first_kernel(transformer_trace)
    seen = Recorder()
    async with open_ui(transformer_trace, message_hook=seen) as ui:
        await _show_kernel(ui, kernel)
        reads = [m for m in seen.messages
                 if type(m) in (CodeScreen.DocRead, CodeScreen.DocHighlighted)]
        last = [(type(m), m.key) for m in reads if m.key == (g.id, kernel.name)]
        assert last == [(CodeScreen.DocRead, (g.id, kernel.name)),
                        (CodeScreen.DocHighlighted, (g.id, kernel.name))]
        # every DocHighlighted follows the DocRead of its key
        for i, m in enumerate(reads):
            if type(m) is CodeScreen.DocHighlighted:
                assert any(type(p) is CodeScreen.DocRead and p.key == m.key for p in reads[:i])
        code = g.code(str(kernel.file)) or ""
        assert ui.lines("#code-view") == code.expandtabs(4).rstrip("\n").split("\n")


async def test_a_short_kernel_is_shown_highlighted_at_once(open_ui, transformer_trace: Path) -> None:
    """A kernel's file (a few ms to lex) comes highlighted in its one DocRead: one paint."""
    g, kernel = _first_kernel(transformer_trace)
    code = g.code(str(kernel.file)) or ""
    assert code.count("\n") <= code_screen.QUICK_LINES
    seen = Recorder()
    async with open_ui(transformer_trace, message_hook=seen) as ui:
        screen = await _show_kernel(ui, kernel)
        mine = [m for m in seen.messages if type(m) in (CodeScreen.DocRead,
                                                        CodeScreen.DocHighlighted)
                and m.key == (g.id, kernel.name)]
        assert [type(m) for m in mine] == [CodeScreen.DocRead]
        assert isinstance(mine[0].data.highlighted, Highlighted)
        assert screen.query_one("#code-view", TextView).source is mine[0].data.highlighted
        assert ui.lines("#code-view") == code.expandtabs(4).rstrip("\n").split("\n")


async def test_the_wrapper_is_highlighted_once_for_every_extern_call(open_ui,
                                                                      transformer_trace: Path) -> None:
    """An extern call shows the whole wrapper at its line: the wrapper's highlighted lines are
    made once and reused (they were lexed again for each call selected)."""
    g = Trace(transformer_trace).graphs[0]
    externs = [str(k.name) for k in g.kernels if k.kind == "extern"]
    assert len(externs) >= 2, "the transformer's graph has several extern calls (matmuls)"
    seen = Recorder()
    async with open_ui(transformer_trace, message_hook=seen) as ui:
        await ui.press("4")
        screen = ui.app.screen
        assert isinstance(screen, CodeScreen)
        for name in externs[:2]:
            screen.goto_kernel(name)
            await ui.settle()
        shown = [(m.key[1], m.data if type(m) is CodeScreen.DocHighlighted
                  else m.data.highlighted) for m in seen.messages
                 if type(m) in (CodeScreen.DocRead, CodeScreen.DocHighlighted)
                 and m.key[1] in externs[:2]
                 and (type(m) is CodeScreen.DocHighlighted or m.data.highlighted is not None)]
        assert [k for k, _ in shown] == externs[:2]
        assert shown[0][1] is shown[1][1]  # the same highlighted wrapper, not lexed twice


async def test_an_extern_call_is_shown_at_once_from_the_wrapper_shown(
        open_ui, transformer_trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the wrapper is shown highlighted (here whole: a long wrapper's path, QUICK_LINES
    0), an extern call selected next is shown at once from its lines — no read in a worker,
    no ``DocRead`` — at the call's line; and a read still running for the kernel selected
    before it is cancelled: its worker is (held inside its read until then), and it posts
    nothing once let go."""
    import threading

    from tuidebug.tui.widgets.lists import PickList

    monkeypatch.setattr(code_screen, "QUICK_LINES", 0)
    real_read = code_screen.read_code
    held, started, let_go = "", threading.Event(), threading.Event()

    def read_code(g: Any, item: str, kernels: Any) -> Any:  # the kernel's read: held
        if item == held:
            started.set()
            let_go.wait(30)
        return real_read(g, item, kernels)
    monkeypatch.setattr(code_screen, "read_code", read_code)
    seen = Recorder()
    async with open_ui(transformer_trace, message_hook=seen) as ui:
        await ui.press("4")
        screen = ui.app.screen
        assert isinstance(screen, CodeScreen) and screen.graph is not None
        g = screen.graph
        lst = screen.query_one(PickList)
        lst.focus()
        lst.highlighted = 0
        await ui.settle()
        wrapper = screen.query_one("#code-view", TextView).source
        assert isinstance(wrapper, Highlighted) and wrapper.lexed() == len(wrapper)
        externs = [i for i in range(lst.option_count)
                   if (k := screen.kernels.get(str(lst.get_option_at_index(i).id))) is not None
                   and k.kind == "extern"]
        kernels = [i for i in range(lst.option_count)
                   if (k := screen.kernels.get(str(lst.get_option_at_index(i).id))) is not None
                   and k.kind != "extern"]
        assert len(externs) >= 3 and kernels
        seen.messages.clear()
        view = screen.query_one("#code-view", TextView)
        for i in externs[:3]:
            lst.highlighted = i
            await ui.settle()
            name = str(lst.get_option_at_index(i).id)
            doc = code_screen.read_code(g, name, screen.kernels)
            assert view.source is wrapper and view.cursor == doc.cursor, name
            assert f"{name}: extern call, wrapper.py line {doc.cursor + 1}" in ui.text()
        assert seen.of(CodeScreen.DocRead) == [], "shown at once, not read in a worker"
        # a kernel selected, then an extern call while the kernel's read is still running
        kernel = str(lst.get_option_at_index(kernels[0]).id)
        held = kernel
        lst.highlighted = kernels[0]
        assert await ui.wait_for(started.is_set, 30, poll=0.01), "the kernel's read started"
        reading = [w for w in ui.app.workers if w.group == "load-code" and w.node is screen
                   and not w.is_finished]
        assert len(reading) == 1, reading
        name = str(lst.get_option_at_index(externs[0]).id)
        lst.highlighted = externs[0]
        assert await ui.wait_for(lambda: screen.shown_key == (g.id, name), 30, poll=0.01)
        assert reading[0].is_cancelled, "the kernel's read cancelled when the call was shown"
        let_go.set()
        await ui.settle()
        assert view.source is wrapper
        assert view.cursor == real_read(g, name, screen.kernels).cursor
        assert [m for m in seen.of(CodeScreen.DocRead) if m.key == (g.id, kernel)] == [], \
            "the cancelled read posted what it read"
        assert f"{name}: extern call" in ui.text()
