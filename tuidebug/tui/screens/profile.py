"""Where the time goes (a trace made with ``tuidebug trace --profile``): every kernel call, FX
node, source line and module by time, compiled next to eager, each row of the forward ("fwd")
or, when the backward was profiled, of the backward ("bwd"); enter jumps to the kernel's code
(a line or module: to the kernel with the most time in it) or to the FX node."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from tuidebug.trace.queries.profile import ProfileView, Row, profile_view
from tuidebug.trace.format.reader import GraphRecord
from tuidebug.tui import keymap
from tuidebug.tui.messages import Read, ShowKernel, ShowNode
from tuidebug.tui.screens.base import TraceScreen
from tuidebug.tui.widgets.lists import PickList
from tuidebug.tui.widgets.lists import Row as ListRow
from tuidebug.tui.widgets.render import to_lines
from tuidebug.tui.widgets.textview import RichLines, TextView
from tuidebug.inert import inert
from tuidebug.viewers.fitted import Row as Fitted
from tuidebug.viewers.profile_view import duration, line_label, several_compiles, whole_text

TABLES = ("kernels", "nodes", "lines", "modules")
TABLE_TITLES = {"kernels": "kernel calls", "nodes": "FX nodes", "lines": "source lines",
                "modules": "modules"}
NOT_PROFILED = (
    "This trace was not profiled.\n\n"
    "Trace again with --profile: after the eager check, each compiled graph and its eager graph "
    "run N more times (default 10) under torch.profiler, and this screen lists the time of "
    "every kernel call, FX node, source line and module, compiled next to eager:\n\n"
    "  tuidebug trace --profile 10 SCRIPT")


def row_name(which: str, r: Row, graphs: bool = False) -> str:
    """What a row of table ``which`` is called: a line's file:line and code, a node's graph and
    name, a kernel's name (``graphs``: after its graph), else its key; shown inert."""
    if which == "lines":
        name = line_label(r.as_json())
    elif which == "nodes" or (which == "kernels" and graphs):
        name = f"{r.graph} {r.node or r.key}"
    else:
        name = r.key
    return inert(name, multiline=False)


def row_prompt(which: str, r: Row, width: int, phased: bool = False,
               graphs: bool = False) -> ListRow:
    """A row of table ``which``: its name padded (or cut, in the middle but for a source line)
    to ``width`` columns, then (``phased``: the
    trace has backward rows) its phase, fwd or bwd, then kind and times (a narrow pane cuts the
    name, never the times)."""
    name = row_name(which, r, graphs)
    if len(name) > width:  # cut to the column, or the row's times sit right of the others'
        name = Fitted(Text(name), middle=which != "lines").fit(width).plain.rstrip("\n")
    head = Text(f"{name:<{width}}", style="bold" if which == "kernels" else "")
    tail = Text()
    if phased:
        tail.append(f"  {inert(r.phase, multiline=False)[:3]:<3}",
                    style="magenta" if r.phase == "bwd" else "dim")
    if which in ("kernels", "nodes"):
        tail.append(f"  {inert(r.kind, multiline=False)[:24]:<24}", style="dim")
    tail.append(f" {duration(r.compiled_s):>10}")
    if which in ("lines", "modules"):
        slower = (r.compiled_s or 0) > (r.eager_s or 0) > 0
        tail.append(f" {duration(r.eager_s):>10}", style="bold red" if slower else "dim")
    return ListRow(head, tail, middle=which != "lines")


class ProfileScreen(TraceScreen):
    class ProfileRead(Read):
        """The trace's joined profile (key: the trace's directory); None: not profiled."""

        data: ProfileView | None

    SCREEN_NAME = "profile"
    BINDINGS = keymap.bindings("profile")
    DEFAULT_CSS = """
    ProfileScreen #profile-totals { width: 100%; height: auto; max-height: 14; padding: 0 1; }
    ProfileScreen #profile-empty { height: 1fr; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.view: ProfileView | None = None
        self.table = "kernels"
        self._loaded = False

    def compose_body(self) -> ComposeResult:
        with Vertical():
            yield Label("reading…", id="profile-totals")
            yield Label("", id="profile-title", classes="pane-title")
            yield PickList(id="profile-rows")
            yield TextView(id="profile-empty", show_cursor=False)

    def is_loaded(self) -> bool:
        return self._loaded

    def show_graph(self, g: GraphRecord | None) -> None:
        if not self._loaded:
            trace = self.trace
            self.load(self.ProfileRead, str(trace.root), lambda: profile_view(trace))

    def on_profile_screen_profile_read(self, message: ProfileScreen.ProfileRead) -> None:
        self._loaded = True
        self.view = message.data
        empty = self.query_one("#profile-empty", TextView)
        rows = self.query_one("#profile-rows", PickList)
        empty.display = self.view is None
        rows.display = self.view is not None
        if self.view is None:
            self.set_text("#profile-totals", "not profiled")
            self.set_text("#profile-title", "")
            width = empty.line_width(40)
            empty.set_source(RichLines(to_lines(self.app.console, [Text(NOT_PROFILED)], width)))
            return
        self.query_one("#profile-totals", Label).update(whole_text(self.view))
        self.show_table(self.table)
        rows.focus()

    def show_table(self, which: str) -> None:
        self.table = which
        if self.view is None:
            return
        rows = self.view.table(which)
        eager = which in ("lines", "modules")
        phased = "backward" in self.view.totals
        self.set_text("#profile-title", f"{TABLE_TITLES[which]} ({len(rows)}) by time: "
                      + ("phase | " if phased else "") + "compiled"
                      + (" | eager" if eager else "") + "   t: kernels/nodes/lines/modules   "
                      "enter: " + ("FX node" if which == "nodes" else "kernel code"))
        graphs = which == "kernels" and several_compiles(r.graph for r in rows)
        width = min(72, max((len(row_name(which, r, graphs)) for r in rows), default=0))
        self.query_one("#profile-rows", PickList).set_items(
            [Option(row_prompt(which, r, width, phased, graphs), id=str(i))
             for i, r in enumerate(rows)])

    def action_next_table(self) -> None:
        self.show_table(TABLES[(TABLES.index(self.table) + 1) % len(TABLES)])

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if self.view is None:
            return
        rows = self.view.table(self.table)
        i = int(event.option.id or 0)
        if not 0 <= i < len(rows):
            return
        r = rows[i]
        if self.table == "nodes" and r.node:
            self.app.post_message(ShowNode(r.graph, r.node, reason=f"{r.node}: "
                                                     f"{duration(r.compiled_s)} compiled"))
        elif r.kernel and r.graph:
            self.app.post_message(ShowKernel(r.graph, r.kernel))
        else:
            self.notify("no kernel to show for this row", severity="warning")
