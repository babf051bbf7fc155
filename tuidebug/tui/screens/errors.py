"""Errors: how far compilation got, the exception, its traceback, and what to do next."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import events
from textual.app import ComposeResult

from tuidebug.trace import schema
from tuidebug.trace.reader import GraphRecord, Trace
from tuidebug.tui import model
from tuidebug.tui.screens.base import TraceScreen
from tuidebug.tui.screens.overview import open_error_site, progress_line
from tuidebug.tui.widgets.render import to_lines
from tuidebug.tui.widgets.textview import RichLines, TextView


def error_renderables(trace: Trace) -> list[Any]:
    r = model.error_report(trace)
    out: list[Any] = []
    status = r.status
    out.append(Text.assemble(("status  ", "dim"), (status.upper(), "bold red" if status in
                                                  (schema.STATUS_FAILED, schema.STATUS_CRASHED)
                                                  else "bold green")))
    if status == schema.STATUS_OK:
        out.append(Text("Compilation succeeded: no error was recorded.", style="green"))
    out.append(Text.assemble(("phase   ", "dim"), (str(r.phase or "?"), "bold")))
    if r.graph:
        out.append(Text.assemble(("graph   ", "dim"), str(r.graph)))
    out.append(Text(""))
    out.append(Text("how far compilation got", style="bold cyan"))
    out.append(progress_line(trace, r))
    for g in trace.graphs:
        snaps = g.snapshots()
        last = f"last snapshot [{snaps[-1].index}] {snaps[-1].name}" if snaps else "no snapshot"
        out.append(Text.assemble("  ", (g.id, "bold"), f"  {g.status}  ", (last, "dim"),
                                 (f"  {len(g.kernels)} kernels" if g.kernels else "", "dim")))
    if r.hints or r.site:
        out.append(Text(""))
        out.append(Text("what to do next", style="bold cyan"))
        if r.site:
            out.append(Text.assemble(("  → ", "bold yellow"), (r.site_hint, "bold")))
        for h in r.hints:
            out.append(Text.assemble(("  → ", "bold yellow"), (h, "bold")))
    if r.type or r.message:
        out.append(Text(""))
        out.append(Text.assemble(("exception  ", "bold cyan"), (str(r.type or ""), "bold red")))
        key = model.key_error_lines(r.message)
        if key:
            out.append(Text("the lines that say what went wrong:", style="dim"))
            out.extend(Text("  " + k, style="bold red") for k in key)
            out.append(Text(""))
        out.append(Text("message", style="bold cyan"))
        out.extend(_styled(r.message))
    if r.traceback:
        out.append(Text(""))
        out.append(Text("traceback", style="bold cyan"))
        out.extend(_styled(r.traceback))
    problems = trace.problems
    if problems:
        out.append(Text(""))
        out.append(Text(f"problems reading the trace ({len(problems)})", style="bold cyan"))
        out.extend(Text(f"  {p}", style="yellow") for p in problems)
    return out


def _styled(block: str) -> list[Text]:
    out = []
    for line in block.expandtabs(4).splitlines():
        low = line.lower()
        style = ""
        if "error" in low and "warning" not in low:
            style = "red"
        elif line.lstrip().startswith('File "'):
            style = "cyan"
        elif "warning" in low:
            style = "dim"
        out.append(Text("  " + line, style=style))
    return out


class ErrorsScreen(TraceScreen):
    SCREEN_NAME = "errors"

    def compose_body(self) -> ComposeResult:
        yield TextView(id="errors-view", placeholder="reading…")

    _done = False

    def is_loaded(self) -> bool:
        return self._done

    def show_graph(self, g: GraphRecord | None) -> None:
        self.load("errors", None, lambda: error_renderables(self.trace))

    def on_text_view_activated(self, event: TextView.Activated) -> None:
        open_error_site(self, event)

    def apply_loaded(self, what: str, key: Any, data: Any) -> None:
        self._done = True
        self._items = data
        self._render_lines(keep=False)
        self.query_one(TextView).focus()

    def _render_lines(self, keep: bool) -> None:
        view = self.query_one(TextView)
        width = max(60, (view.size.width or self.app.size.width) - 2)
        view.set_source(RichLines(to_lines(self.app.console, self._items, width)),
                        cursor=view.cursor if keep else 0, keep_scroll=keep)
        view.set_query(self.search_query)

    def on_resize(self, event: events.Resize) -> None:
        if getattr(self, "_items", None):
            self._render_lines(keep=True)
