"""IR and fusion: Inductor's scheduler nodes before and after fusion, side by side, and every
fusion decision (what fused, what was rejected and why).

Moving the cursor over a pre-fusion node moves the post-fusion view to the group it ended up in
and lists the fusion decisions about it; ``t`` shows Inductor's own IR text dumps instead.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label

from tuidebug.trace.format import schema
from tuidebug.trace.format.reader import GraphRecord
from tuidebug.tui import keymap, model
from tuidebug.tui.messages import Read
from tuidebug.tui.screens.base import TraceScreen
from tuidebug.tui.widgets.textview import RichLines, TextLines, TextView
from tuidebug.inert import inert_content


def ir_text_line(n: dict[str, Any], group: str | None) -> Text:
    plain = model.ir_node_line(n, group)
    name = str(n.get("name", "?"))
    t = Text(plain)
    t.stylize("bold green" if len(n.get("members") or []) > 1 else "bold", 0, len(name))
    if n.get("is_extern"):
        kind = str(n.get("type") or "").replace("SchedulerNode", "")
        t.stylize("cyan", len(name) + 2, len(name) + 2 + len(kind))
    t.highlight_words(["[reduction]"], "magenta")
    if group and group != name:
        start = plain.find(f"⇒ {group}")
        t.stylize("green", start, start + 2 + len(group))
    return t


#: the graph's files this screen shows (their reading problems are shown here too)
IR_FILES = (f"{schema.IR_PRE}.json", f"{schema.IR_POST}.json", f"{schema.IR_PRE}.txt",
            f"{schema.IR_POST}.txt", schema.FUSION)


def ir_problems(g: GraphRecord) -> list[str]:
    """Problems met reading this graph's IR and fusion files (a line skipped, a file cut)."""
    ends = tuple(f"{g.id}/{name}" for name in IR_FILES)
    return [str(p) for p in g.trace.problems if p.file.endswith(ends)]


def ir_text_lines(g: GraphRecord) -> tuple[TextLines, TextLines, int, int]:
    """Both IR texts as display lines (read, split and cut off the UI thread) and their line
    counts."""
    pre, post = g.ir_text("pre") or "", g.ir_text("post") or ""
    return TextLines(pre), TextLines(post), pre.count("\n"), post.count("\n")


class IRData:
    def __init__(self, g: GraphRecord) -> None:
        self.pre = model.ir_nodes(g.ir_pre)
        self.post = model.ir_nodes(g.ir_post)
        self.group = model.group_of(self.post)
        self.post_index = {str(n.get("name")): i for i, n in enumerate(self.post)}
        self.fusion = [d for d in g.fusion if isinstance(d, dict)]
        self.reasons = model.fusion_reasons(self.fusion)
        self.fused = sum(1 for d in self.fusion if d.get("action") == "fused")
        meta_fusion = g.meta.fusion
        self.decisions_recorded = meta_fusion.recorded
        if not self.decisions_recorded:  # an import: the count of fused nodes, no decisions
            self.fused = meta_fusion.fused or 0
        # an imported trace names what its source lacks ("… not in this log; trace with tuidebug")
        self.no_ir = g.trace.not_in_log("Inductor IR")
        self.no_decisions = g.trace.not_in_log("fusion decisions")
        self.by_node: dict[str, list[int]] = {}
        for i, d in enumerate(self.fusion):
            for key in ("node1", "node2"):
                for part in str(d.get(key, "")).split("_op"):
                    name = part if part.startswith("op") else "op" + part
                    self.by_node.setdefault(name, []).append(i)
        self.problems = ir_problems(g)
        # the views' lines, made here in the worker (on the UI thread, the 24-layer trace's
        # thousands of nodes held it 70 ms and more when the read came back)
        self.pre_lines = RichLines(ir_text_line(n, self.group.get(str(n.get("name"))))
                                   for n in self.pre)
        self.post_lines = RichLines(ir_text_line(n, None) for n in self.post)
        self.fused_groups = sum(1 for n in self.post if len(n.get("members") or []) > 1)
        self.fusion_lines = [fusion_text_line(d) for d in self.fusion]


def fusion_text_line(decision: dict[str, Any]) -> Text:
    t = Text(model.fusion_line(decision))
    t.stylize("green" if decision.get("action") == "fused" else "red", 0, 9)
    return t


class IRScreen(TraceScreen):
    class NodesRead(Read, namespace="ir_screen"):
        """The graph's IR nodes and fusion decisions (key: the graph id)."""

        data: IRData

    class TextRead(Read, namespace="ir_screen"):
        """The graph's pre- and post-fusion IR as text (key: the graph id)."""

        data: tuple[TextLines, TextLines, int, int]

    SCREEN_NAME = "ir"
    BINDINGS = keymap.bindings("ir")
    DEFAULT_CSS = """
    IRScreen #ir-summary { height: auto; min-height: 2; max-height: 5; width: 100%;
                           padding: 0 1; background: $boost; }
    IRScreen #pre-pane { width: 1fr; border-right: solid $primary 40%; }
    IRScreen #post-pane { width: 1fr; }
    IRScreen #fusion-pane { height: 40%; border-top: solid $primary 40%; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.data: IRData | None = None
        self.problems: list[str] = []  # reading the IR files shown (ir_problems)
        self.text_mode = False
        self.rejected_only = False
        self.selected_pre: str | None = None

    def compose_body(self) -> ComposeResult:
        yield Label("", id="ir-summary")
        with Vertical():
            with Horizontal():
                with Vertical(id="pre-pane"):
                    yield Label("pre-fusion", id="pre-title", classes="pane-title")
                    yield TextView(id="pre-view", placeholder="reading…")
                with Vertical(id="post-pane"):
                    yield Label("post-fusion", id="post-title", classes="pane-title")
                    yield TextView(id="post-view", placeholder="reading…")
            with Vertical(id="fusion-pane"):
                yield Label("fusion decisions", id="fusion-title", classes="pane-title")
                yield TextView(id="fusion-view", placeholder="no fusion decisions recorded")

    def is_loaded(self) -> bool:
        return self.data is not None or self.graph is None

    def show_graph(self, g: GraphRecord | None) -> None:
        self.data = None
        if g is None:
            return
        self.problems = []
        if self.text_mode:
            self.load(self.TextRead, g.id, lambda: ir_text_lines(g))
        self.load(self.NodesRead, g.id, lambda: IRData(g))

    def _current(self, message: Read) -> bool:
        g = self.graph
        return g is not None and message.key == g.id

    def on_ir_screen_nodes_read(self, message: IRScreen.NodesRead) -> None:
        if not self._current(message):
            return
        self.data = message.data
        self._add_problems(self.data.problems)
        self._show_summary()
        if not self.text_mode:
            self._show_structured()

    def on_ir_screen_text_read(self, message: IRScreen.TextRead) -> None:
        if self._current(message) and self.text_mode:
            pre, post, n_pre, n_post = message.data
            for which, lines, n in (("pre", pre, n_pre), ("post", post, n_post)):
                view = self.query_one(f"#{which}-view", TextView)
                view.set_source(lines, placeholder=f"no {which}-fusion IR text")
                view.set_query(self.search_query)
                self.set_text(f"#{which}-title", f"{which}-fusion IR text ({n} lines)")
            g = self.graph
            if g is not None:
                self._add_problems(ir_problems(g))
                self._show_summary()

    def _add_problems(self, problems: list[str]) -> None:
        self.problems += [p for p in problems if p not in self.problems]

    def _show_summary(self) -> None:
        d = self.data
        if d is None:
            return
        t = Text()
        t.append(f"{len(d.pre)} scheduler nodes before fusion → {len(d.post)} after",
                 style="bold")
        t.append(f"   {d.fused} fused", style="green")
        if d.decisions_recorded:
            t.append(f", {len(d.fusion) - d.fused} rejected", style="red")
        if d.reasons:
            t.append("\nrejected because: ", style="dim")
            t.append("; ".join(f"{n}× {r}" for r, n in d.reasons[:4]))
        if not d.pre and not d.post:
            t.append(f"\n{d.no_ir}" if d.no_ir else
                     "\nno IR recorded for this graph (compilation stopped before lowering)",
                     style="yellow")
        for p in self.problems[:3]:
            t.append(f"\n⚠ {p}", style="yellow")
        if self.problems:  # more lines than the label's two: lay it out again
            self.query_one("#ir-summary", Label).update(inert_content(t))
        else:
            self.set_text("#ir-summary", t)

    def _show_structured(self) -> None:
        d = self.data
        if d is None:
            return
        pre_view = self.query_one("#pre-view", TextView)
        pre_view.set_source(d.pre_lines, placeholder="no pre-fusion IR")
        self.query_one("#post-view", TextView).set_source(d.post_lines,
                                                           placeholder="no post-fusion IR")
        self.set_text("#pre-title", f"pre-fusion: {len(d.pre)} nodes  (⇒ fused group)")
        self.set_text("#post-title",
            f"post-fusion: {len(d.post)} nodes, {d.fused_groups} fused groups")
        for v in self.query(TextView):
            v.set_query(self.search_query)
        if not self.query_one("#post-view").has_focus:
            pre_view.focus()
        self._show_fusion()

    def _show_fusion(self) -> None:
        d = self.data
        if d is None:
            return
        view = self.query_one("#fusion-view", TextView)
        node = self.selected_pre
        idx = range(len(d.fusion))
        scope = "all nodes"
        if node and not self.rejected_only:
            idx = d.by_node.get(node, [])  # type: ignore[assignment]
            scope = node
        if self.rejected_only:
            idx = [i for i in idx if d.fusion[i].get("action") != "fused"]  # type: ignore[assignment]
        decisions = [d.fusion_lines[i] for i in idx]
        view.set_source(RichLines(decisions), placeholder=d.no_decisions
                        or f"no fusion decision about {scope}")
        view.set_query(self.search_query)
        if self.rejected_only:
            what, other = "rejected fusions (all nodes)", "the decisions about the selected node"
        else:
            what, other = f"fusion decisions about {scope}", "every rejected fusion"
        self.set_text("#fusion-title", f"{what}: {len(decisions)}   (r: {other})")

    def on_text_view_cursor_moved(self, event: TextView.CursorMoved) -> None:
        d = self.data
        if d is None or self.text_mode or event.view.id != "pre-view":
            return
        if not 0 <= event.index < len(d.pre):
            return
        name = str(d.pre[event.index].get("name"))
        self.selected_pre = name
        group = d.group.get(name)
        if group in d.post_index:
            self.query_one("#post-view", TextView).move_to(d.post_index[group])
        self._show_fusion()

    def action_toggle_text(self) -> None:
        self.text_mode = not self.text_mode
        g = self.graph
        if g is None:
            return
        if self.text_mode:
            for v in ("#pre-view", "#post-view"):
                self.query_one(v, TextView).set_source(TextLines([]), placeholder="reading…")
            self.load(self.TextRead, g.id, lambda: ir_text_lines(g))
        else:
            self._show_structured()

    def action_toggle_rejected(self) -> None:
        self.rejected_only = not self.rejected_only
        self._show_fusion()
