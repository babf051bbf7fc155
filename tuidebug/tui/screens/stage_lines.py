"""What the pass stepper draws: a stage's row in the list, the graph's lines with their change
marks (and numerics verdicts), and the detail panel of the node under the cursor."""

from __future__ import annotations

from rich.text import Text
from textual.widgets.option_list import Option

from tuidebug.inert import inert
from tuidebug.trace.format.reader import GraphRecord, StageInfo
from tuidebug.trace.queries import provenance
from tuidebug.trace.queries.numerics import NodeNumerics
from tuidebug.tui import model
from tuidebug.tui.widgets.lists import Row
from tuidebug.viewers.numerics_view import node_mark

_NO_TAIL = Text()

MARK_STYLE = {model.ADDED: ("+ ", "green"), model.CHANGED: ("~ ", "yellow"),
              model.REMOVED: ("- ", "red strike"), model.SAME: ("  ", "")}


def stage_prompt(s: StageInfo) -> Row:
    """`` 12 pattern_matcher  +13 -48 ~4``: a long name is cut, the counts are kept."""
    t = Text()
    t.append(f"{s.index:>3} ", style="dim")
    name = inert(s.name, multiline=False)  # from the trace: control characters shown, not sent
    if s.kind == "stage":
        t.append(name, style="bold cyan")
    elif s.changed and s.file:
        t.append(name, style="bold")
    else:
        t.append(name, style="dim")
    tail = Text()
    if s.file and (s.added or s.removed or s.modified) and s.kind == "pass":
        tail.append("  ")
        if s.added:
            tail.append(f"+{s.added} ", style="green")
        if s.removed:
            tail.append(f"-{s.removed} ", style="red")
        if s.modified:
            tail.append(f"~{s.modified}", style="yellow")
        tail.rstrip()
    elif s.kind == "stage" and s.nodes is not None:
        tail.append(f"  {s.nodes} nodes", style="dim")
    return Row(t, tail)


def stage_options(stages: list[StageInfo]) -> list[Option]:
    """One option per stage (id: its position), with a disabled heading per pass subsystem."""
    out: list[Option] = []
    last: str | None = None
    for i, s in enumerate(stages):
        if s.subsystem and s.subsystem != last:
            out.append(Option(Text(f"    {inert(s.subsystem, multiline=False)}",
                                           style="italic #87afd7"), disabled=True))
        last = s.subsystem
        out.append(Option(stage_prompt(s), id=str(i)))
    return out


class GraphLines:
    """The lines of a ``StageView`` for a ``TextView``, styled by change.

    What search reads (``plain``) and what is drawn (``rich``) are made by one function,
    ``_tail`` (a judged node's verdict, never on a removed line): search never finds a mark
    that is not shown, nor misses one that is."""

    def __init__(self, view: model.StageView, marks: set[str], changes_only: bool,
                 judged: dict[str, NodeNumerics] | None = None) -> None:
        self.view = view
        self.marks = marks
        lines = view.lines
        if changes_only:
            lines = [ln for ln in lines if ln.mark != model.SAME or ln.node in marks]
        self.lines = lines
        self.judged = judged or {}  # FX node -> its numerics verdict (the lowered graph only)

    def _tail(self, ln: model.GraphLine) -> Text:
        """What follows the node's text: its numerics verdict, where it was judged."""
        if ln.mark == model.REMOVED or not self.judged:
            return _NO_TAIL
        return node_mark(self.judged.get(ln.node))

    def __len__(self) -> int:
        return len(self.lines)

    def plain(self, i: int) -> str:  # made when asked (search): a step builds no 5k strings
        ln = self.lines[i]
        return MARK_STYLE[ln.mark][0] + ln.text + self._tail(ln).plain

    def line_key(self, i: int) -> tuple[str, str, str, bool, str]:
        """What line ``i`` draws (``TextView`` keeps its painted strip by it)."""
        ln = self.lines[i]
        return (ln.mark, ln.node, ln.text, ln.node in self.marks, self._tail(ln).plain)

    def max_width(self) -> int:
        """The widest line's length (what ``TextView`` scrolls across)."""
        if not self.lines:
            return 0
        judged = self.judged  # (none judged: no walk over every line for its tail)
        tails = (len(self._tail(ln)) for ln in self.lines if ln.node in judged) if judged \
            else ()
        text = self.view.text_width() if self.lines is self.view.lines \
            else max(map(len, (ln.text for ln in self.lines)))
        return 2 + text + max(tails, default=0)

    def rich(self, i: int) -> Text:
        ln = self.lines[i]
        prefix, style = MARK_STYLE[ln.mark]
        t = Text(prefix, style=style or "dim")
        t.append(ln.text, style=style)
        t.stylize("bold", 2, 2 + len(ln.node))
        if ln.node in self.marks:
            t.stylize("on #5f005f", 0, 2 + len(ln.node))
        t.append_text(self._tail(ln))
        return t

    def index_of(self, node: str) -> int | None:
        for i, ln in enumerate(self.lines):
            if ln.node == node and ln.mark != model.REMOVED:
                return i
        return next((i for i, ln in enumerate(self.lines) if ln.node == node), None)


def node_detail(g: GraphRecord, sv: model.StageView | None, line: model.GraphLine | None,
                judged: NodeNumerics | None = None) -> Text:
    if line is None or sv is None:
        return Text("no node selected", style="dim")
    t = Text()
    if judged is not None:  # first: the panel is only a few lines high
        t.append_text(Text.assemble(("numerics", "bold"), node_mark(judged), "\n"))
    graph = sv.prev if line.mark == model.REMOVED else sv.graph
    node = graph.get(line.node) if graph is not None else None
    t.append(line.node, style="bold")
    if line.mark != model.SAME:
        color = MARK_STYLE[line.mark][1].replace(" strike", "")
        t.append(f"  ({line.mark} {change_origin(sv.stage)})", style=color)
    if node is None:
        t.append("\n(no longer in the graph)", style="dim")
        return t
    t.append(f"  {node.op}  {node.target}", style="cyan")
    meta = node.meta_label()
    if meta:
        t.append(f"  {meta}")
    # the kernels second: the lines below may wrap, and the panel is only a few lines high
    kernels = provenance.kernels_for_node(g, node.name)
    if kernels and line.mark != model.REMOVED:
        t.append("\nkernels ", style="bold")
        t.append(", ".join(kernels[:6]) + (" …" if len(kernels) > 6 else ""), style="magenta")
        t.append("   (enter or k: open)", style="dim")
    elif node.op in ("call_function", "call_method", "call_module") and line.mark != model.REMOVED:
        t.append("\nkernels none recorded for this node (a view, fused away, or removed later)",
                 style="dim")
    if node.module:
        kind = f" ({node.module_type})" if node.module_type else ""
        t.append(f"\nmodule  {node.module}{kind}")
    src = node.source or {}
    if src.get("file"):
        t.append(f"\nsource  {src.get('file')}:{src.get('line')} in {src.get('fn')}   ",
                 style="")
        t.append(str(src.get("code") or "").strip(), style="italic")
    for label, names in (("inputs  ", node.inputs), ("users   ", node.users)):
        if names:
            t.append(f"\n{label}" + ", ".join(names[:12]) + (" …" if len(names) > 12 else ""))
    return t


def change_origin(stage: StageInfo) -> str:
    """What a change mark is relative to: a pass's own change, or (a stage: AOT tracing,
    partitioning…) whatever happened since the snapshot before it."""
    return "by this pass" if stage.kind == "pass" else "since the previous snapshot"
