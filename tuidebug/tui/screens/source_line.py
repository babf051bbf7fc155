"""The user line behind a guard or a specialization (shapes screen, enter): what it is, the
source around the line as capture saw it (the line highlighted), and the FX nodes that come from
that line, with a way to go to them. Everything from the trace is shown inert."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from tuidebug.viewers.dynamic_view import where
from tuidebug.inert import inert_text
from tuidebug.tui.screens.modals import dialog_css

MAX_NODES_LISTED = 12


def source_line_text(what: str, line: dict[str, Any], graph_id: str,
                     nodes: list[str]) -> Text:
    """The modal's body: ``what`` (the guard or specialization), the user line in its context,
    and the nodes of ``graph_id`` that come from it."""
    out = Text()
    out.append_text(inert_text(what, "bold", limit=400))
    out.append("\n\n")
    out.append_text(inert_text(f"{line.get('file')}:{line.get('line')}", "dim"))
    if line.get("fn"):
        out.append_text(inert_text(f" in {line['fn']}", "dim"))
    out.append("\n")
    context = line.get("context") or [{"line": line.get("line"), "code": line.get("code")}]
    width = max(len(str(c.get("line"))) for c in context)
    for c in context:
        here = c.get("line") == line.get("line")
        out.append("▶ " if here else "  ", "bold yellow")
        out.append(f"{str(c.get('line')).rjust(width)} │ ", "dim")
        out.append_text(inert_text(c.get("code") or "", "bold reverse" if here else "",
                                   limit=300))
        out.append("\n")
    if not line.get("context"):
        out.append("(the trace has no source around this line)\n", "dim")
    out.append("\n")
    if nodes:
        listed = ", ".join(nodes[:MAX_NODES_LISTED])
        more = f" … {len(nodes) - MAX_NODES_LISTED} more" if len(nodes) > MAX_NODES_LISTED else ""
        out.append_text(inert_text(f"{len(nodes)} FX node(s) of {graph_id} come from this "
                                   f"line: {listed}{more}"))
    else:
        out.append_text(inert_text(f"No FX node of {graph_id} comes from this line: Python code "
                                   "such as a branch on a size (if x.shape[0] > 4:) adds a guard "
                                   "without adding a node.", "dim"))
    return out


class SourceLineScreen(ModalScreen[bool]):
    """Dismisses with True when the person asks to go to the line's nodes."""

    DEFAULT_CSS = dialog_css("SourceLineScreen", "$primary") + """
    SourceLineScreen Button { margin: 0 1; }
    """
    BINDINGS = [Binding("escape,q", "close", "Close", id="source_line.close"),
                Binding("n", "nodes", "Go to the nodes", id="source_line.nodes")]

    def __init__(self, title: str, what: str, line: dict[str, Any], graph_id: str,
                 nodes: list[str]) -> None:
        super().__init__()
        self.title_text = title
        self.body = source_line_text(what, line, graph_id, nodes)
        self.nodes = nodes
        self.line = line

    def compose(self) -> ComposeResult:
        with Vertical():
            keys = "n: go to the nodes · " if self.nodes else ""
            yield Label(Text.assemble(inert_text(f"{self.title_text} at {where(self.line)}"),
                                      (f"   ({keys}escape closes)", "dim")))
            with VerticalScroll():
                yield Static(self.body, id="source-line-view")
            if self.nodes:
                yield Button(Text(f"Go to the {len(self.nodes)} node(s) from this line (n)"),
                             id="source-line-nodes")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_nodes()

    def action_nodes(self) -> None:
        if self.nodes:
            self.dismiss(True)

    def action_close(self) -> None:
        self.dismiss(False)
