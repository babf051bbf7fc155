"""Ranks: every rank of a distributed job (``tuidebug open JOBDIR``) × its compiles.

One row per rank: status, identical-rank group, and per compile id the short content hash of
what the rank compiled for it (``tuidebug.trace.jobs.ranks``); the first divergence is highlighted
and explained below the table, with where each rank waited when the job hung. Enter: the diff
of the open rank against the selected one (the compare screen, on the diverging graph); ``o``:
open the selected rank on the screen shown before this one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from tuidebug.trace.jobs.job import rank_of, rank_trace
from tuidebug.trace.format.reader import GraphRecord
from tuidebug.tui import keymap
from tuidebug.tui.messages import Read
from tuidebug.tui.screens.base import TraceScreen
from tuidebug.inert import inert_text
from tuidebug.viewers.info import STATUS_STYLE
from tuidebug.viewers.ranks_view import divergence_lines, slow_rank_lines, wait_headings

DIVERGING = "bold white on red"
FIXED = 3  # the columns before the compiles: rank, status, group
REFERENCE = "bold black on yellow"
LEGEND = ("columns 0/0, 0/1, …: the rank's Dynamo compiles, each cell the content hash of what "
          "it compiled (equal: the same graphs); –: not compiled on that rank; red: the first "
          "divergence, yellow: the ranks it is compared with; group: ranks alike in everything")


def job_report(job: Path) -> dict[str, Any]:
    from tuidebug.trace.jobs.ranks import analyze_job

    return analyze_job(job)


def compile_ids(report: dict[str, Any]) -> list[str]:
    """Every compile id of the job, in the order the ranks compiled them."""
    out: list[str] = []
    for r in report["ranks"]:
        out += [c for c in r.get("compile_hashes") or {} if c not in out]
    return out


class RanksScreen(TraceScreen):
    class ReportRead(Read):
        """The job's cross-rank report (key: the job directory)."""

        data: dict[str, Any]

    SCREEN_NAME = "ranks"
    BINDINGS = keymap.bindings("ranks")
    DEFAULT_CSS = """
    RanksScreen #ranks-table { height: 1fr; }
    RanksScreen #ranks-detail { height: auto; max-height: 14; background: $boost; padding: 0 1;
                                border-top: solid $primary 40%; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.report: dict[str, Any] | None = None
        self.row_ranks: list[int] = []

    @property
    def job(self) -> Path | None:
        return self.app.job  # type: ignore[attr-defined]

    def compose_body(self) -> ComposeResult:
        yield Static("ranks", classes="pane-title", id="ranks-title")
        # rank, status and group stay in view while the compiles scroll by
        yield DataTable(id="ranks-table", cursor_type="row", zebra_stripes=True,
                        fixed_columns=FIXED)
        yield Static("", id="ranks-detail")

    def is_loaded(self) -> bool:
        return self.report is not None or self.job is None

    def show_graph(self, g: GraphRecord | None) -> None:
        job = self.job
        if job is None:
            self.set_text("#ranks-detail", Text(
                "One process only: the ranks screen is for a distributed job "
                "(tuidebug trace --nproc-per-node N; tuidebug open JOBDIR).", style="dim"))
            return
        saved = self.app.job_report  # type: ignore[attr-defined]
        if self.report is None and saved is not None:  # read before another rank was opened
            self.report = saved
            self._fill()
        elif self.report is None:
            self.set_text("#ranks-detail", Text(f"comparing the ranks of {job}…", style="dim"))
            self.load(self.ReportRead, job, lambda: job_report(job))
        else:
            self._mark_open_rank()

    def on_ranks_screen_report_read(self, message: RanksScreen.ReportRead) -> None:
        if message.key != self.job:
            return
        self.report = message.data
        self.app.job_report = message.data  # type: ignore[attr-defined]
        self._fill()

    def _fill(self) -> None:
        report = self.report
        assert report is not None
        d = report["divergence"] or {}
        cids = compile_ids(report)
        table = self.query_one(DataTable)
        table.clear(columns=True)
        # compile ids come from the ranks' manifests: shown inert (a str label is markup)
        table.add_columns("rank", "status", "group", *(inert_text(c) for c in cids))
        group_of = {r: i for i, gr in enumerate(report["groups"]) for r in gr["ranks"]}
        self.row_ranks = []
        for r in report["ranks"]:
            rank = r["rank"]
            status = str(r.get("status") or "?")
            cells: list[Text] = []
            hashes = r.get("compile_hashes") or {}
            for cid in cids:
                style = ""
                if cid == d.get("compile_id"):
                    style = (DIVERGING if rank in d.get("diverging_ranks", [])
                             else REFERENCE if rank in d.get("reference_ranks", []) else "")
                cells.append(Text(hashes[cid][:8] if cid in hashes else "–", style=style))
            table.add_row(Text(str(rank), style="bold"), inert_text(status, STATUS_STYLE.get(
                status, "")), Text(chr(ord("A") + group_of[rank] % 26) if rank in group_of
                                   else "–"), *cells, key=str(rank))
            self.row_ranks.append(rank)
        lines = divergence_lines(report["divergence"], report["ranks"], report.get("notes"))
        detail = Text()
        detail.append("first divergence: " if report["divergence"] else "",
                      style="bold red")
        detail.append_text(inert_text(lines[0], "bold red" if report["divergence"]
                                      else "bold green" if lines == ["ranks agree"]
                                      else "bold yellow"))
        for line in lines[1:]:
            detail.append("\n")
            detail.append_text(inert_text(line))
        waits = report.get("waits")
        label, style, texts = wait_headings(waits) if waits else ("", "", [])
        for text in texts:
            detail.append(f"\n{label}", style=style)
            detail.append_text(inert_text(text))
        for line in (waits or {}).get("lines") or []:
            detail.append("\n  ")
            detail.append_text(inert_text(line))
        for line in slow_rank_lines(report.get("slow_ranks"), report.get("late_rank")):
            detail.append("\n")
            detail.append_text(inert_text(line, "" if line.startswith(" ") else "yellow"))
        detail.append(f"\n{LEGEND}", style="dim")
        detail.append("\nenter: diff the open rank against the selected one   o: open the "
                      "selected rank", style="dim")
        # every piece from the traces is inert already; the line breaks are ours
        self.query_one("#ranks-detail", Static).update(detail)
        self._mark_open_rank()
        table.focus()
        if d.get("compile_id") in cids:  # the red cell in view, however many compiles before it
            table.call_after_refresh(self._show_column, FIXED + cids.index(d["compile_id"]))

    def _show_column(self, index: int) -> None:
        """Scroll the table sideways until column ``index`` is in view beside the fixed rank,
        status and group columns."""
        table = self.query_one(DataTable)
        widths = [c.get_render_width(table) for c in table.ordered_columns]
        if index >= len(widths):
            return
        room = table.scrollable_content_region.width - sum(widths[:FIXED])
        first = FIXED  # the first column after the fixed ones, whole: no cut cell beside them
        while first < index and sum(widths[first:index + 1]) > room:
            first += 1
        table.scroll_to(x=sum(widths[FIXED:first]), animate=False, force=True)

    def open_rank(self) -> int | None:
        """The rank whose trace the app shows."""
        job = self.job
        return rank_of(job, self.trace.root) if job is not None else None

    def _mark_open_rank(self) -> None:
        r = self.open_rank()
        self.set_text("#ranks-title", Text.assemble(
            "ranks of ", inert_text(str(self.job)), f"   open: rank {r}" if r is not None else ""))

    def selected_rank(self) -> int | None:
        table = self.query_one(DataTable)
        if not self.row_ranks or table.cursor_row is None:
            return None
        return self.row_ranks[min(table.cursor_row, len(self.row_ranks) - 1)]

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.run_worker(self.action_diff_rank(), exclusive=True, group="ranks-diff")

    async def action_diff_rank(self) -> None:
        """The compare screen: the open rank against the selected one (or, on the open rank's
        own row, against a rank of the other side of the first divergence)."""
        job, sel, mine = self.job, self.selected_rank(), self.open_rank()
        if job is None or sel is None or self.report is None:
            return
        d = self.report["divergence"] or {}
        other = sel
        if sel == mine:
            ref, odd = d.get("reference_ranks") or [], d.get("diverging_ranks") or []
            side = odd if mine in ref else ref
            other = side[0] if side else sel
        if other == mine:
            self.notify("this is the open rank; select another row", severity="warning")
            return
        theirs = rank_trace(job, other)
        if theirs is None:  # none, or a link out of the job (not followed)
            self.notify(f"rank {other} has no trace", severity="warning")
            return
        self.app.compare_with = theirs  # type: ignore[attr-defined]
        if d.get("graph"):
            self.app.set_graph(d["graph"])  # type: ignore[attr-defined]
        await self.app.action_show_screen("compare")  # type: ignore[attr-defined]
        self.app.screen.refresh_graph()  # type: ignore[attr-defined]

    async def action_open_selected(self) -> None:
        sel, job = self.selected_rank(), self.job
        if sel is None or job is None:
            return
        if sel == self.open_rank():
            self.notify(f"rank {sel} is open", timeout=3)
            return
        theirs = rank_trace(job, sel)
        if theirs is None:  # none, or a link out of the job (not followed)
            self.notify(f"rank {sel} has no trace", severity="warning")
            return
        await self.app.switch_rank(theirs)  # type: ignore[attr-defined]
