"""Autotuning: per tuned op, every choice with its config, time or error, and the winner."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from tuidebug.trace.format.reader import GraphRecord
from tuidebug.tui import model
from tuidebug.tui.messages import Read
from tuidebug.tui.screens.base import TraceScreen
from tuidebug.tui.widgets.lists import PickList, Row
from tuidebug.tui.widgets.render import to_lines
from tuidebug.tui.widgets.textview import RichLines, TextView

EMPTY_HELP = (
    "No autotuning was recorded for {graph}.\n\n"
    "Inductor benchmarks alternative kernels (\"autotunes\") only when asked to, typically for "
    "matrix multiplications and convolutions. Trace again with, for example:\n\n"
    "  tuidebug trace --set max_autotune=true SCRIPT\n"
    "  tuidebug trace --set max_autotune=true --set freezing=true \\\n"
    "      --set max_autotune_gemm_backends='\"CPP,ATEN\"' SCRIPT   (on CPU: the C++ GEMM "
    "template is tuned for frozen weights)\n\n"
    "and this screen lists every tuned op, each choice's config and time, and the winner."
)


def op_prompt(i: int, e: dict[str, Any]) -> Row:
    """``  3 triton_per_fused_…layer_norm_1  3 choices``: a long name loses its middle, the
    counts are kept."""
    t = Text()
    t.append(f"{i:>3} ", style="dim")
    t.append(str(e.get("op") or "?"), style="bold")
    choices = e.get("choices") or []
    errors = sum(1 for c in choices if isinstance(c, dict) and c.get("error"))
    tail = Text(f"  {len(choices)} choices", style="dim")
    if errors:
        tail.append(f", {errors} failed", style="red")
    return Row(t, tail, middle=True)


def _fmt_config(cfg: Any) -> str:
    if isinstance(cfg, dict):
        return ", ".join(f"{k}={v}" for k, v in cfg.items())
    return "" if cfg is None else str(cfg)


def choices_table(e: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    head = Text.assemble(("op ", "dim"), (str(e.get("op") or "?"), "bold"))
    winner = model.winner_name(e)
    if winner:
        head.append("   winner ", style="dim")
        head.append(winner, style="bold green")
    out.append(head)
    inputs = e.get("inputs")
    if inputs:
        out.append(Text("inputs  " + ("; ".join(_fmt_input(x) for x in inputs)
                                     if isinstance(inputs, list) else str(inputs)), style="dim"))
    t = Table(box=None, padding=(0, 2), header_style="bold", expand=False)
    t.add_column("", no_wrap=True)
    t.add_column("choice", no_wrap=True)
    t.add_column("time", justify="right", no_wrap=True)
    t.add_column("vs best", justify="right", no_wrap=True)
    t.add_column("config / description")
    rows = model.autotune_rows(e)
    best = next((c.get("time_ms") for c in rows if isinstance(c.get("time_ms"), (int, float))
                 and not c.get("error")), None)
    for c in rows:
        name = str(c.get("name") or "?")
        is_winner = winner is not None and name == winner
        tm = c.get("time_ms")
        err = c.get("error")
        if err:
            time_s, rel = Text("error", style="bold red"), ""
        elif isinstance(tm, (int, float)):
            time_s = Text(f"{tm:.4f} ms", style="green" if is_winner else "")
            rel = f"{tm / best:.2f}×" if best else ""
        else:
            time_s, rel = Text("–", style="dim"), ""
        detail = _fmt_config(c.get("config"))
        desc = str(c.get("description") or "")
        if desc and desc not in detail:
            detail = f"{detail}  {desc}".strip()
        if err:
            detail = f"{detail}\n{err}".strip()
        t.add_row(Text("★", style="bold green") if is_winner else "",
                  Text(name, style="bold green" if is_winner else ""), time_s, rel,
                  Text(detail, style="red" if err else ""))
    out.append(t)
    return out


def _fmt_input(x: Any) -> str:
    if isinstance(x, dict):
        shape = x.get("shape", x.get("size"))
        dims = ", ".join(str(d) for d in shape) if isinstance(shape, list) else str(shape or "")
        name = f"{x['name']} " if x.get("name") else ""
        return f"{name}{x.get('dtype', '?')}[{dims}]"
    return str(x)


class AutotuneScreen(TraceScreen):
    class EntriesRead(Read):
        """The graph's tuned ops (key: the graph id)."""

        data: list[dict[str, Any]]

    SCREEN_NAME = "autotune"
    DEFAULT_CSS = """
    AutotuneScreen #ops-pane { width: 44; border-right: solid $primary 40%; }
    AutotuneScreen #choices-pane { width: 1fr; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[dict[str, Any]] = []

    def compose_body(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="ops-pane"):
                yield Label("tuned ops", id="ops-title", classes="pane-title")
                yield PickList(id="ops")
            with Vertical(id="choices-pane"):
                yield Label("choices", id="choices-title", classes="pane-title")
                yield TextView(id="choices-view", show_cursor=False, placeholder="reading…")

    def is_loaded(self) -> bool:
        return self.shown_graph is not None and self._loaded_for == self.shown_graph

    _loaded_for: str | None = None

    def show_graph(self, g: GraphRecord | None) -> None:
        self.entries = []
        if g is None:
            self._empty("this trace has no compiled graph")
            return
        self.load(self.EntriesRead, g.id, lambda: list(g.autotune))

    def on_autotune_screen_entries_read(self, message: AutotuneScreen.EntriesRead) -> None:
        g = self.graph
        if g is None or message.key != g.id:
            return
        self._loaded_for = g.id
        self.entries = [e for e in message.data if isinstance(e, dict)]
        lst = self.query_one(PickList)
        self.set_text("#ops-title", f"{g.id}: {len(self.entries)} tuned ops")
        self.query_one("#ops-pane").display = bool(self.entries)
        if not self.entries:
            lst.set_items([])
            others = [f"{o.id} ({len(o.autotune)} tuned ops)" for o in self.trace.graphs
                      if o is not g and o.autotune]
            missing = self.trace.not_in_log("autotune choices")
            message = missing if missing else EMPTY_HELP.format(graph=g.id)
            if others:
                message += "\n\nOther graphs of this trace were autotuned: " + ", ".join(others) + \
                    "  (G: choose a graph)"
            self._empty(message)
            return
        lst.set_items([Option(op_prompt(i, e), id=str(i)) for i, e in enumerate(self.entries)],
                      highlighted=None)
        lst.highlighted = 0
        lst.focus()

    def _empty(self, message: str) -> None:
        self._draw([Text(message)], 40)
        self.set_text("#choices-title", "no autotuning")

    _drawn: tuple[list[Any], int, int] | None = None  # what the view shows: items, least, width

    def _draw(self, items: list[Any], least: int = 60, *, keep: bool = False) -> None:
        """``items`` drawn to the view's width (again when its width changes: a screen built
        ahead draws before it is laid out, at the app's width)."""
        view = self.query_one(TextView)
        width = view.line_width(least)
        self._drawn = (items, least, width)
        view.set_source(RichLines(to_lines(self.app.console, items, width)),
                        cursor=view.cursor if keep else 0, keep_scroll=keep)
        view.set_query(self.search_query)

    def on_resize(self, event: events.Resize) -> None:
        if self._drawn is not None:
            items, least, width = self._drawn
            if self.query_one(TextView).line_width(least) != width:
                self._draw(items, least, keep=True)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        i = int(event.option.id or 0)
        if not 0 <= i < len(self.entries):
            return
        e = self.entries[i]
        self._draw(choices_table(e))
        self.set_text("#choices-title",
            f"{e.get('op')}: {len(e.get('choices') or [])} choices")
