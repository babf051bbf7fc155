"""The pass stepper: every stage and pass in order; the graph after it, its changes marked.

Left: the stage list (index, name, nodes added/removed/changed). Right: the graph as FX-like text
(``node_line``), added nodes green ``+``, changed yellow ``~``, removed ones struck red ``-`` where
they stood in the previous snapshot. On the last snapshot (the post-grad graph Inductor
lowered), each FX node whose value the numerics check judged carries its verdict
(``✗ first diverging 0.309 vs eager 4.37e-08``, ``✗``, ``✓``). Below: the node under the cursor,
with the kernels that compute it (enter jumps there). Snapshots are read one at a time, in a
worker, when selected.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, OptionList, Static
from textual.worker import get_current_worker

from tuidebug.trace.queries import provenance
from tuidebug.trace.queries.numerics import NodeNumerics, graph_numerics
from tuidebug.trace.format.reader import GraphRecord, StageInfo
from tuidebug.trace.queries.stages import stage_label
from tuidebug.trace.queries.summary import changed_passes
from tuidebug.trace.queries.verdict import format_duration
from tuidebug.tui import keymap, model
from tuidebug.tui.heap import keep_read, reading
from tuidebug.tui.messages import Read, ShowKernel
from tuidebug.tui.screens.base import TraceScreen
from tuidebug.tui.screens.modals import PickScreen
from tuidebug.tui.screens.stage_lines import GraphLines, change_origin, node_detail, \
    stage_options
from tuidebug.tui.widgets.lists import PickList
from tuidebug.tui.widgets.textview import EMPTY, TextView

def _read_stage(g: GraphRecord, stage: StageInfo) -> model.StageView:
    """A stage's view, with the graph's provenance the node detail below it shows (read here,
    in the worker: 60-120 ms for the 24-layer trace's joint graph, on the UI thread before)."""
    g.provenance
    return model.stage_view(g, stage)


class PassesScreen(TraceScreen):
    class StageRead(Read):
        """The graph after one stage, its changes marked (key: (graph id, stage index))."""

        data: model.StageView

    SCREEN_NAME = "passes"
    BINDINGS = keymap.bindings("passes")
    DEFAULT_CSS = """
    PassesScreen #stages-pane { width: 34%; min-width: 30; max-width: 52;
                                border-right: solid $primary 40%; }
    PassesScreen #graph-pane { width: 1fr; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.stage_view: model.StageView | None = None
        self.judged: dict[str, NodeNumerics] = {}  # the graph's FX nodes the numerics judged
        self.changes_only = False
        self.marks: set[str] = set()
        self._pending: tuple[str, int | None] | None = None  # (node, stage index)
        self._last_node: str | None = None

    def compose_body(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="stages-pane"):
                yield Label("stages and passes", id="stages-title", classes="pane-title")
                yield PickList(id="stages")
            with Vertical(id="graph-pane"):
                yield Label("", id="graph-title", classes="pane-title")
                yield TextView(id="graph-view", placeholder="select a stage")
                yield Static("", id="node-detail", classes="detail")

    # -- loading -------------------------------------------------------------------------------

    def is_loaded(self) -> bool:
        return self.query_one(PickList).option_count > 0 or self.graph is None

    def show_graph(self, g: GraphRecord | None) -> None:
        stages_list = self.query_one(PickList)
        self.stage_view = None
        if g is None:
            stages_list.set_items([])
            self.query_one(TextView).set_source(EMPTY, placeholder="no graph in this trace")
            return
        stages = g.stages
        self.judged = graph_numerics(self.trace, g.id).nodes
        changed = changed_passes(stages)
        self.set_text("#stages-title", f"{g.id}: {len(stages)} stages, "
                      + ("changes not in this log" if changed is None else f"{len(changed)} changed"))
        if self._pending is None:
            self.marks = set()  # a kernel's FX nodes stay marked only for that jump
        stages_list.set_items(stage_options(stages), highlighted=None)
        if not stages:
            self.query_one(TextView).set_source(
                EMPTY, placeholder="no stages recorded for this graph")
            return
        self._select_stage(self._start_index(stages))
        stages_list.focus()

    def _select_stage(self, position: int) -> None:
        """Highlight the stage at ``position`` in ``graph.stages`` (loads it)."""
        self.query_one(PickList).select_id(str(position))

    def _start_index(self, stages: list[StageInfo]) -> int:
        if self._pending is not None and self._pending[1] is not None:
            for i, s in enumerate(stages):
                if s.index == self._pending[1]:
                    return i
        if self._pending is not None:  # a node to show: the last snapshot
            snaps = [i for i, s in enumerate(stages) if s.file]
            return snaps[-1] if snaps else 0
        return 0

    def current_position(self) -> int | None:
        opt = self.query_one(PickList).highlighted_option
        return int(opt.id) if opt is not None and opt.id is not None else None

    def current_stage(self) -> StageInfo | None:
        g, pos = self.graph, self.current_position()
        if g is None or pos is None or pos >= len(g.stages):
            return None
        return g.stages[pos]

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        g, stage = self.graph, self.current_stage()
        if g is None or stage is None:
            return
        if model.stage_view_ready(g, stage):  # parsed already: shown in this very frame
            self.cancel_load(self.StageRead)
            self._stage_read(g, stage, model.stage_view(g, stage))
            # as a load's worker does (base.py), once the stage is painted: a collection it
            # may start (17-41 ms) is not in the key's frame
            self.call_after_refresh(keep_read)
            return
        self.set_text("#graph-title", Text(f"{stage.name}  reading…", style="dim"))
        self.load(self.StageRead, (g.id, stage.index), lambda: _read_stage(g, stage),
                  debounce=0.03)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.query_one(TextView).focus()

    def on_passes_screen_stage_read(self, message: PassesScreen.StageRead) -> None:
        stage = self.current_stage()
        g = self.graph
        if g is None or stage is None or message.key != (g.id, stage.index):
            return  # a late result for a stage no longer selected
        self._stage_read(g, stage, message.data)

    def _stage_read(self, g: GraphRecord, stage: StageInfo, view: model.StageView) -> None:
        shown = self.stage_view
        if shown is not None and shown.stage is stage and self._pending is None:
            return  # the stage on display read twice (two highlights of one option): kept
        self.stage_view = view
        self._show_view(keep_node=True)
        # once the stage is painted: reading ahead beside the key's own work (a thread holding
        # the interpreter for a JSON parse) made that key's frame slower
        self.call_after_refresh(self._read_ahead, g, self.current_position())

    def _read_ahead(self, g: GraphRecord, position: int | None) -> None:
        """The snapshots next to the one shown, and the views of the stages ``n`` and ``p`` go
        to, read and built in a worker while the user looks at it (a newer read-ahead cancels
        this one); none started when they are read and built already, or
        when another stage was selected meanwhile (its own read-ahead follows)."""
        if position is None or position != self.current_position() or g is not self.graph \
                or not (model.ahead(g, position) or model.neighbours(g, position)):
            return

        def work() -> None:
            worker = get_current_worker()
            with reading():  # what was read lives as long as the app: frozen after
                g.provenance  # what the node detail asks, read here rather than where shown
                model.read_ahead(g, position, lambda: worker.is_cancelled)
        self.run_worker(work, name="read-ahead", group="read-ahead", thread=True,
                        exclusive=True, exit_on_error=False)

    def _show_view(self, keep_node: bool) -> None:
        sv = self.stage_view
        if sv is None:
            return
        view = self.query_one(TextView)
        lines = GraphLines(sv, self.marks, self.changes_only, self._judged_here(sv))
        target: int | None = None
        if self._pending is not None:
            target = lines.index_of(self._pending[0])
            self._pending = None
        elif sv.stage.file and any(ln.mark != model.SAME for ln in lines.lines):
            target = next(i for i, ln in enumerate(lines.lines) if ln.mark != model.SAME)
        elif keep_node and self._last_node:
            target = lines.index_of(self._last_node)
        placeholder = ("no node changed" if self.changes_only else sv.note or "empty graph")
        view.set_source(lines, cursor=target or 0, placeholder=placeholder)
        view.set_query(self.search_query)
        self._update_title()

    def _judged_here(self, sv: model.StageView | None) -> dict[str, NodeNumerics]:
        """The numerics verdicts, where the graph shown is the one Inductor lowered (its last
        snapshot: earlier ones may reuse a node name for another value)."""
        g = self.graph
        snaps = g.snapshots() if g is not None and self.judged else []
        if sv is None or sv.shown is None or not snaps or sv.shown.index != snaps[-1].index:
            return {}
        return self.judged

    def _update_title(self) -> None:
        sv = self.stage_view
        if sv is None:
            return
        s = sv.stage
        t = Text()
        t.append(f"[{s.index}] {s.name}", style="bold")
        unknown = s.kind == "pass" and s.changed is None  # an import: the note comes first
        if s.subsystem and not unknown:
            t.append(f"  {s.subsystem}", style="dim")
        if not unknown:
            t.append(f"  {s.kind}", style="dim")
        if s.duration_s is not None:
            t.append(f"  {format_duration(s.duration_s)}", style="dim")
        if unknown and sv.note:
            t.append(f"   {sv.note}", style="italic yellow")
        ch = sv.changes
        if s.file and s.kind == "pass":
            t.append("   ")
            t.append(f"+{len(ch['added'])} added ", style="green")
            t.append(f"-{len(ch['removed'])} removed ", style="red")
            t.append(f"~{len(ch['changed'])} changed", style="yellow")
        elif s.file and any(ch.values()) and not sv.note.startswith(model.FIRST_SNAPSHOT):
            # a stage (AOT tracing, partitioning…): no pass made these changes; say so
            marked = Counter(ln.mark for ln in sv.lines)
            t.append("   ")
            t.append(f"+{marked[model.ADDED]} ", style="green")
            t.append(f"-{marked[model.REMOVED]} ", style="red")
            t.append(f"~{marked[model.CHANGED]}", style="yellow")
            t.append(f" {change_origin(s)}", style="dim")
        if sv.graph is not None:
            t.append(f"   {len(sv.graph)} nodes", style="dim")
        if sv.note and not unknown:
            t.append(f"   {sv.note}", style="italic dim")
        if self.changes_only:
            t.append("   [changes only: c]", style="bold magenta")
        self.set_text("#graph-title", t)

    # -- node under the cursor -----------------------------------------------------------------

    def _line_at(self, index: int) -> model.GraphLine | None:
        view = self.query_one(TextView)
        src = view.source
        if isinstance(src, GraphLines) and 0 <= index < len(src):
            return src.lines[index]
        return None

    def on_text_view_cursor_moved(self, event: TextView.CursorMoved) -> None:
        line = self._line_at(event.index)
        if line is not None:
            self._last_node = line.node
        g = self.graph
        if g is None:
            return
        judged = self._judged_here(self.stage_view).get(line.node) if line is not None else None
        self.set_text("#node-detail", node_detail(g, self.stage_view, line, judged))

    def on_text_view_activated(self, event: TextView.Activated) -> None:
        self.action_node_kernel()

    def action_node_kernel(self) -> None:
        g = self.graph
        line = self._line_at(self.query_one(TextView).cursor)
        if g is None or line is None:
            return
        kernels = provenance.kernels_for_node(g, line.node)
        if not kernels:
            self.notify(f"no kernel computes {line.node} in {g.id} (it may be a view, an input, "
                        "or removed before code generation)", severity="warning")
            return
        if len(kernels) == 1:
            self.app.post_message(ShowKernel(g.id, kernels[0]))
            return

        def chosen(kernel: str | None) -> None:
            if kernel:
                self.app.post_message(ShowKernel(g.id, kernel))
        self.app.push_screen(PickScreen(f"Kernels that compute {line.node}",
                                        [(k, k) for k in kernels]), chosen)

    # -- stepping ------------------------------------------------------------------------------

    def action_step(self, delta: int) -> None:
        g, pos = self.graph, self.current_position()
        if g is None or pos is None:
            return
        self._select_stage(max(0, min(pos + delta, len(g.stages) - 1)))

    def action_step_changed(self, delta: int) -> None:
        g, pos = self.graph, self.current_position()
        if g is None or pos is None:
            return
        i = pos + delta
        while 0 <= i < len(g.stages):
            s = g.stages[i]
            # passes only, as the title's "N changed" counts them: a stage (aot_joint,
            # aot_forward, post_grad…) always differs from the snapshot before it
            if s.kind == "pass" and s.changed and s.file:
                self._select_stage(i)
                return
            i += delta
        if changed_passes(g.stages) is None:
            self.notify(g.trace.not_in_log("per-pass snapshots") or "not recorded", timeout=5)
            return
        self.notify("no further pass changed the graph" if delta > 0 else
                    "no earlier pass changed the graph", timeout=3)

    def action_toggle_changes_only(self) -> None:
        self.changes_only = not self.changes_only
        self._show_view(keep_node=True)

    def goto_node(self, node: str, *, stage: int | None = None, marks: list[str] | None = None,
                  reason: str = "") -> None:
        """Show ``node`` (at ``stage``, default the last snapshot), emphasising ``marks``."""
        self.marks = set(marks or [])
        self._pending = (node, stage)
        g = self.graph
        if g is None:
            return
        if self.shown_graph != g.id or not self.is_loaded():
            return  # on_screen_resume will load the graph and honour _pending
        target = self._start_index(g.stages)
        if self.current_position() == target and self.stage_view is not None:
            self._show_view(keep_node=False)
        else:
            self._select_stage(target)
        self.query_one(TextView).focus()
        if reason:
            self.notify(reason, timeout=4)

    def svg_request(self) -> dict[str, Any] | None:
        g = self.graph
        if g is None:
            return None
        sv = self.stage_view
        req: dict[str, Any] = {"graph_id": g.id}
        if sv is not None and sv.shown is not None:
            # the stage itself, by the label the SVG titles use: a pass that changed nothing is
            # drawn as the snapshot before it, and its title says so
            req["stage"] = stage_label(sv.stage)
            stage = sv.stage
            if stage.file and stage.kind == "pass" and any(sv.changes.values()):
                req["diff"] = True  # this pass's changes, against the snapshot before it
        return req
