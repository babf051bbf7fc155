"""The terminal UI: ``run_app(trace)`` opens a trace; ``TuidebugApp`` is the Textual app.

One screen per question (overview, passes, IR & fusion, code, autotune, errors), each a Textual
mode, created the first time it is shown; a screen reads only what it shows, in worker threads.
This package never imports torch.
"""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import App
from textual.binding import Binding

from tuidebug.trace.reader import GraphRecord, Trace
from tuidebug.tui import keymap
from tuidebug.tui.commands import TraceCommands
from tuidebug.tui.messages import GraphChosen, ShowKernel, ShowNode
from tuidebug.tui.screens.autotune import AutotuneScreen
from tuidebug.tui.screens.base import TraceScreen
from tuidebug.tui.screens.code import CodeScreen
from tuidebug.tui.screens.errors import ErrorsScreen
from tuidebug.tui.screens.ir import IRScreen
from tuidebug.tui.screens.modals import HelpScreen, PickScreen
from tuidebug.tui.screens.overview import OverviewScreen
from tuidebug.tui.screens.passes import PassesScreen


class TuidebugApp(App[int]):
    """Explore one trace."""

    TITLE = "tuidebug"
    CSS = """
    TraceScreen { background: $background; }
    TraceScreen > #body { height: 1fr; }
    .pane-title { height: 1; width: 100%; background: $boost; color: $text-accent;
                  text-style: bold; padding: 0 1; }
    .detail { height: 8; background: $boost; padding: 0 1; border-top: solid $primary 40%; }
    .empty { padding: 1 2; color: $text-muted; }
    """
    MODES: ClassVar[dict[str, Any]] = {
        "overview": OverviewScreen, "passes": PassesScreen, "ir": IRScreen,
        "code": CodeScreen, "autotune": AutotuneScreen, "errors": ErrorsScreen,
    }
    COMMANDS = App.COMMANDS | {TraceCommands}
    BINDINGS: ClassVar[list[Binding]] = keymap.bindings("app")  # type: ignore[assignment]

    def __init__(self, trace: Trace, *, start: str = "overview") -> None:
        super().__init__()
        self.trace = trace
        self.start_screen = start
        self.current_graph: GraphRecord | None = self._first_graph()

    def _first_graph(self) -> GraphRecord | None:
        graphs = self.trace.graphs
        if not graphs:
            return None
        failed = (self.trace.error or {}).get("graph")
        for g in graphs:
            if g.id == failed:
                return g
        return graphs[0]

    def on_mount(self) -> None:
        self.switch_mode(self.start_screen)

    # -- navigation ----------------------------------------------------------------------------

    async def action_show_screen(self, name: str) -> None:
        if name in self.MODES and self.current_mode != name:
            await self.switch_mode(name)

    def set_graph(self, graph_id: str) -> None:
        g = next((g for g in self.trace.graphs if g.id == graph_id), None)
        if g is None or g is self.current_graph:
            return
        self.current_graph = g
        if isinstance(self.screen, TraceScreen):
            self.screen.refresh_graph()

    def on_graph_chosen(self, message: GraphChosen) -> None:
        self.set_graph(message.graph_id)

    def action_pick_graph(self) -> None:
        graphs = self.trace.graphs
        if not graphs:
            self.notify("this trace has no compiled graphs", severity="warning")
            return
        items = [(g.id, f"{g.id}  ({g.kind}, {g.status})") for g in graphs]
        current = self.current_graph.id if self.current_graph else None

        def chosen(graph_id: str | None) -> None:
            if graph_id:
                self.set_graph(graph_id)
        self.push_screen(PickScreen("Choose a graph", items, current), chosen)

    def action_cycle_graph(self, step: int) -> None:
        graphs = self.trace.graphs
        if len(graphs) < 2 or self.current_graph is None:
            return
        i = graphs.index(self.current_graph)
        self.set_graph(graphs[(i + step) % len(graphs)].id)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def on_show_node(self, message: ShowNode) -> None:
        self.set_graph(message.graph_id)
        await self.action_show_screen("passes")
        screen = self.screen
        if isinstance(screen, PassesScreen):
            screen.goto_node(message.node, stage=message.stage, marks=message.marks,
                             reason=message.reason)

    async def on_show_kernel(self, message: ShowKernel) -> None:
        self.set_graph(message.graph_id)
        await self.action_show_screen("code")
        screen = self.screen
        if isinstance(screen, CodeScreen):
            screen.goto_kernel(message.kernel, line=message.line)


def run_app(trace: Trace) -> int:
    """Open ``trace`` in the terminal UI; returns the exit code."""
    app = TuidebugApp(trace)
    app.run()
    return int(app.return_code or 0)
