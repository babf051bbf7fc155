"""Shapes & guards: the current compile's symbols and ranges, the dimensions it specialized,
its guards grouped by input, and the recompile chain of its function (compile → the guard that
failed → the next compile, with what changed in the graph). Enter on a symbol marks the nodes
that use it (passes screen); on a guard or specialization, shows the user line that added it in
its source and goes on to the FX nodes that come from that line."""

from __future__ import annotations

import re
import textwrap
from typing import Any

from rich.text import Text
from textual.app import ComposeResult

from tuidebug.trace.diff.graphs import graph_diff
from tuidebug.trace.queries import shape_nodes
from tuidebug.trace.queries.dynamic import compile_dynamic, guard_groups
from tuidebug.trace.format.reader import GraphRecord
from tuidebug.tui import keymap
from tuidebug.tui.messages import Read, ShowNode
from tuidebug.tui.screens.base import TraceScreen
from tuidebug.tui.screens.source_line import SourceLineScreen
from tuidebug.tui.widgets.textview import RichLines, TextView
from tuidebug.viewers.dynamic_view import where
from tuidebug.inert import inert_text
from tuidebug.trace.format import safefile


def _frame(cid: str) -> str:
    return cid.rsplit("/", 1)[0] if "/" in cid else cid


def _order(cid: str) -> tuple[int, ...]:
    return tuple(safefile.to_int(x, 1 << 62) for x in re.findall(r"[0-9]+", cid))


def shapes_lines(trace: Any, g: GraphRecord) -> tuple[list[Text], list[Any]]:
    """The screen's lines and, per line, what enter does there (a user line or a symbol)."""
    lines: list[Text] = []
    targets: list[Any] = []

    def add(text: Text, target: Any = None) -> None:
        lines.append(text)
        targets.append(target)

    cid = g.compile_id
    d = compile_dynamic(trace, cid)
    add(Text.assemble(("Recompile chain", "bold"), (f"  (function of compile {cid})", "dim")))
    chain = sorted((c for c in trace.compiles if _frame(c) == _frame(cid)), key=_order)
    for c in chain:
        rec = compile_dynamic(trace, c)["recompile"]
        if rec:
            value = rec.get("failing_value")
            style = "bold red" if rec.get("limit_hit") else "yellow"
            label = "recompile limit hit" if rec.get("limit_hit") else "guard failed"
            add(Text.assemble(("   ↓ ", "dim"), (f"{label}: ", style),
                              inert_text(str(rec.get("failed_guard") or "?")[:160]),
                              inert_text(f"  (value {value})" if value is not None else "")))
            if rec.get("suggestion"):
                # wrapped: a sentence of 300 characters on one line is read by scrolling
                # sideways, half of it off the screen at a time
                for i, part in enumerate(textwrap.wrap(str(rec["suggestion"])[:600], 96)):
                    add(Text.assemble(("     avoid it: " if i == 0 else " " * 15, "dim"),
                                      inert_text(part)))
        graphs = trace.compiles.get(c, {}).get("graphs") or []
        add(Text.assemble(("▶ " if c == cid else "  ", "bold"), inert_text(c, "bold"),
                          inert_text(f"  graphs: {', '.join(map(str, graphs)) or 'none'}"),
                          _graph_change(trace, chain, c)))
    add(Text(""))
    add(Text.assemble(("Symbols", "bold"), (f"  {len(d['symbols'])}", "dim")))
    for s in d["symbols"]:
        at = where(s.get("user_line"))
        add(Text.assemble(inert_text(f"  {s.get('name')}", "cyan"),
                          inert_text(f"  {s.get('source') or '(' + str(s.get('kind')) + ')'}"),
                          inert_text(f"  hint {s.get('hint')}  {s.get('range') or ''}"),
                          inert_text(f"  {s.get('kind')}", "dim"),
                          inert_text(f"  → {s['replaced_by']}" if s.get("replaced_by") else "",
                                     "yellow"),
                          inert_text(f"  created at {at}" if at else "", "dim"),
                          inert_text(f" (via {str(s['user_line_from']).split(' of ')[0]})"
                                     if at and s.get("user_line_from") else "", "dim")),
            ("symbol", s))
    add(Text(""))
    add(Text.assemble(("Specializations", "bold"), (f"  {len(d['specializations'])}", "dim")))
    for sp in d["specializations"]:
        at = where(sp.get("user_line"))
        add(Text.assemble(inert_text(f"  {sp.get('source') or sp.get('symbol')} = "
                                     f"{sp.get('value')}", "yellow"),
                          inert_text(f"  by {sp.get('guard')}" if sp.get("guard") else ""),
                          inert_text(f"  at {at}" if at else "", "dim"),
                          (" marked dynamic" if sp.get("marked_dynamic") else "", "bold red")),
            ("line", sp.get("user_line"),
             f"specialized: {sp.get('source') or sp.get('symbol')} = {sp.get('value')}"
             + (f" by {sp['guard']}" if sp.get("guard") else "")))
    groups = guard_groups(trace, cid)
    add(Text(""))
    add(Text.assemble(("Guards by input", "bold"), (f"  {d['guards']['count']} "
                                                    f"({d['guards']['shape']} on sizes)", "dim")))
    for source, guards in groups.items():
        add(Text.assemble(inert_text(f"  {source}", "bold cyan"), (f"  {len(guards)}", "dim")))
        for gd in guards:
            at = where(gd.get("user_line"))
            add(Text.assemble(inert_text(f"    {gd.get('kind')}: ", "dim"),
                              inert_text(str(gd.get("text"))[:200]),
                              inert_text(f"  at {at}" if at else "", "dim")),
                ("line", gd.get("user_line"), f"guard {gd.get('kind')}: {gd.get('text')}"))
    return lines, targets


def _graph_change(trace: Any, chain: list[str], cid: str) -> Text:
    """What changed in the graph since the previous compile of the chain (the trace diff's
    graph comparison: nodes, kernels, ops whose count changed)."""
    i = chain.index(cid)
    if i == 0:
        return Text("")

    def first_graph(c: str) -> GraphRecord | None:
        gids = trace.compiles.get(c, {}).get("graphs") or []
        return next((x for x in trace.graphs if x.id in gids), None)
    ga, gb = first_graph(chain[i - 1]), first_graph(cid)
    if ga is None or gb is None:
        return Text("")
    d = graph_diff(gb.id, ga, gb, code=False, context=0, max_diff_lines=0)
    ops = ", ".join(f"{o['op']} {o['a']}→{o['b']}" for o in d["ops"][:4])
    return inert_text(f"  vs {chain[i - 1]}: nodes {d['nodes']['a']} → {d['nodes']['b']}, "
                      f"kernels {d['kernel_count']['a']} → {d['kernel_count']['b']}"
                      + (f"; ops {ops}" if ops else ""), "dim")


class ShapesScreen(TraceScreen):
    class LinesRead(Read):
        """The screen's lines and what enter does on each (key: the graph id)."""

        data: tuple[list[Text], list[Any]]

    SCREEN_NAME = "shapes"
    BINDINGS = keymap.bindings("shapes")

    def __init__(self) -> None:
        super().__init__()
        self._targets: list[Any] = []

    def compose_body(self) -> ComposeResult:
        yield TextView(id="shapes-view", placeholder="no compile to show")

    def show_graph(self, g: GraphRecord | None) -> None:
        view = self.query_one(TextView)
        if g is None:
            view.set_source(RichLines([Text("no compiled graph in this trace")]))
            return
        view.set_source(RichLines([Text(f"reading the shapes of {g.compile_id}…",
                                        style="dim")]))
        self._targets = []
        self.load(self.LinesRead, g.id, lambda: shapes_lines(self.trace, g))

    def on_shapes_screen_lines_read(self, message: ShapesScreen.LinesRead) -> None:
        if self.graph is None or message.key != self.graph.id:
            return
        lines, self._targets = message.data
        view = self.query_one(TextView)
        view.set_source(RichLines(lines), cursor=0)
        view.set_query(self.search_query)
        view.focus()

    def on_text_view_activated(self, message: TextView.Activated) -> None:
        target = self._targets[message.index] if message.index < len(self._targets) else None
        g = self.graph
        if not target or g is None:
            return
        snaps = g.snapshots()
        graph = g.stage_graph(snaps[0]) if snaps else None
        if target[0] == "line":
            self._show_line(g, target[1], target[2], graph)
            return
        sym = target[1]
        value = sym.get("name")
        users = shape_nodes.nodes_using(graph, sym)
        if not users:
            self.notify(f"no node of {g.id} has {value} in its shape", severity="warning")
            return
        self.app.post_message(ShowNode(
            g.id, users[0], stage=snaps[0].index, marks=users,
            reason=f"nodes whose shape uses {' or '.join(shape_nodes.names(sym))}"))

    def _show_line(self, g: GraphRecord, line: Any, what: str, graph: Any) -> None:
        """The user line that added a guard or a specialization, in its source; from there, on
        to the nodes of the graph's first snapshot (Dynamo's) that come from that line."""
        if not line:
            self.notify("no user line recorded for this one", severity="warning")
            return
        nodes = shape_nodes.nodes_at_line(graph, line)
        stage = g.snapshots()[0].index if nodes else None

        def go(to_nodes: bool | None) -> None:
            if to_nodes and nodes:
                self.app.post_message(ShowNode(g.id, nodes[0], stage=stage, marks=nodes,
                                               reason=f"nodes from {where(line)}"))
        self.app.push_screen(SourceLineScreen(what.split(":", 1)[0], what, line, g.id, nodes), go)
