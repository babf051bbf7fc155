"""Overview: status, graphs, timings, errors, config differences, problems.

Reads only the manifest, config, runtime and each graph's meta.json — never a graph snapshot —
so it paints at once even for a trace of a very large model.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import ComposeResult

from tuidebug.trace.queries import failure
from tuidebug.trace.queries.provenance import generated_kernels
from tuidebug.trace.format import schema
from tuidebug.trace.format.reader import GraphRecord, Trace
from tuidebug.trace.queries.dynamic import guard_counts
from tuidebug.trace.queries.frames import skipped_frames
from tuidebug.trace.queries.failed_guard import reasons_of
from tuidebug.trace.queries.verdict import format_duration
from tuidebug.trace.queries.summary import (changed_passes, compile_place, cudagraphs_state,
                                            script_outcome, summary_status)
from tuidebug.trace.queries import advice, graph_breaks
from tuidebug.trace.queries.vllm import vllm_summary
from tuidebug.trace.queries.numerics import numerics_summary
from tuidebug.tui import keymap, model
from tuidebug.tui.screens.consent import ConfirmScreen
from tuidebug.tui.messages import Read, ShowKernel
from tuidebug.tui.screens.base import TraceScreen
from tuidebug.tui.screens.error_site import (hint, open_error_site, progress_line, site_cursor,
                                             site_hint)
from tuidebug.tui.screens.modals import TextScreen
from tuidebug.tui.widgets.render import Rendered, render_in_worker
from tuidebug.tui.widgets.textview import RichLines, TextView
from tuidebug.viewers.advice_view import advice_section
from tuidebug.viewers.breaks_view import break_notes, skipped_notes
from tuidebug.viewers.fitted import Row
from tuidebug.inert import inert, inert_text
from tuidebug.viewers.info import STATUS_STYLE, script_outcome_text, status_word
from tuidebug.viewers.numerics_view import kernel_at, numerics_lines
from tuidebug.viewers.summary_text import compile_cache, phase_text
from tuidebug.viewers.summary_view import accuracy_renderables, error_line, imported_renderables
from tuidebug.viewers.vllm_view import vllm_renderables


def _heading(title: str) -> Text:
    return Text(f"── {title} " + "─" * max(0, 60 - len(title)), style="bold cyan")


def _or_dash(n: int | None) -> int | str:
    return "–" if n is None else n


def _graph_row(g: GraphRecord) -> list[Any]:
    stages = g.stages
    snaps = [s for s in stages if s.file]
    nodes = snaps[-1].nodes if snaps and snaps[-1].nodes is not None else None
    passes = [s for s in stages if s.kind == "pass"]
    changed = changed_passes(stages)
    fusion = g.meta.fusion
    return [g.id, g.kind, Text(g.status, STATUS_STYLE.get(g.status, "")),
            str(nodes if nodes is not None else "–"),
            f"{'?' if changed is None else len(changed)}/{len(passes)}",
            str(_or_dash(generated_kernels(g))),
            f"{_or_dash(fusion.fused)}/{_or_dash(fusion.rejected)}",
            format_duration(model.total_compile_s(g))]


def overview_renderables(trace: Trace) -> list[RenderableType]:
    """What the overview shows, top to bottom."""
    m = trace.manifest
    out: list[RenderableType] = []
    status = summary_status(trace)  # as info says it: script_failed where the script was
    head = Text.assemble(("trace  ", "dim"), (str(trace.root), "bold"), "  ",
                         (f" {status_word(status)} ", STATUS_STYLE.get(status, "bold")))
    head.append("   " + "  ".join(f"{k} {v}" for k, v in m.versions.items() if v), style="dim")
    out.append(head)
    script = script_outcome_text(script_outcome(m, trace.compiles))
    if script:  # the compile was fine (or not: its own lines below); the script was not
        out.append(Text.assemble(("script  ", "bold yellow"), inert_text(script[1])))
    if m.command:
        out.append(Text.assemble(("command  ", "dim"), " ".join(m.command)))
    started, finished = m.started_at, m.finished_at
    if started is not None:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started))
        took = f", took {finished - started:.1f}s" if finished is not None else ""
        out.append(Text.assemble(("captured ", "dim"), when + took))
    out.extend(_imported(trace))
    vllm = vllm_summary(trace)
    if vllm is not None:
        out.append(Text(""))
        out.extend(vllm_renderables(vllm))
    report = failure.error_report(trace)
    if status not in (schema.STATUS_OK, schema.STATUS_SCRIPT_FAILED):
        out.append(Text(""))
        out.append(_heading("how far compilation got"))
        out.append(progress_line(trace, report))
        if report.type or report.message:
            out.append(error_line(report.type or status, report.message,
                                  where=phase_text(report.phase)))
        for line in failure.key_error_lines(report.message, 3):
            out.append(Text("  " + line[:300], style="red"))
        if report.site:
            out.append(site_hint(report))
        for h in report.hints:
            out.append(hint(h))
        out.append(Text("  press 6 for the errors screen (phase, traceback)", style="dim"))
    out.append(Text(""))
    out.append(_heading("compiled graphs (enter opens one in the pass stepper)"))
    if trace.graphs:
        rows = [_graph_row(g) for g in trace.graphs]
        t = Table(box=None, padding=(0, 1), header_style="bold")
        for i, (col, just) in enumerate((
                ("graph", "left"), ("kind", "left"), ("status", "left"), ("nodes", "right"),
                ("passes changed", "right"), ("kernels", "right"),
                ("fused/ rejected", "right"), ("compile", "right"))):
            widest = max(len(r[i].plain if isinstance(r[i], Text) else str(r[i])) for r in rows)
            # values are never cut; a header wider than its values wraps instead
            t.add_column(col, justify=just, min_width=widest,  # type: ignore[arg-type]
                         overflow="fold")
        for r in rows:
            t.add_row(*r)
        out.append(t)
        out.append(Text(""))
        out.append(_heading("time per compile phase"))
        out.extend(_timings(trace.graphs))
        out.extend(_cudagraphs(trace.graphs))
    else:
        out.append(Text("  no graph was recorded: compilation stopped before Inductor started",
                        style="yellow"))
    out.extend(_compiles(trace))
    out.extend(_accuracy(trace))
    out.extend(_config(trace))
    warnings = list(m.warnings)
    if warnings:
        out.append(Text(""))
        out.append(_heading(f"warnings ({len(warnings)})"))
        out.extend(Text(f"  {w}", style="yellow") for w in warnings)
    problems = trace.problems
    out.append(Text(""))
    out.append(_heading(f"problems reading the trace ({len(problems)})"))
    if problems:
        out.extend(Text(f"  {p}", style="yellow") for p in problems)
    else:
        out.append(Text("  none", style="dim"))
    return out


PHASE_SHORT = {"joint_graph": "joint", "scheduling": "sched", "kernel_compile": "kernels",
               "post_grad": "post_grad", "pre_grad": "pre_grad"}


def _imported(trace: Trace) -> list[RenderableType]:
    """Where an imported trace came from, its rank, and what its source does not hold."""
    imp = trace.imported_from
    out: list[RenderableType] = list(imported_renderables(imp))
    if out and imp and imp.get("rank") is not None and len(imp.get("ranks") or []) > 1:
        out[0].append("  (R: another rank)", style="dim")
    return out


def _timings(graphs: list[GraphRecord]) -> list[RenderableType]:
    """One row per graph, one column per phase; each graph's slowest phase stands out."""
    per_graph = [(g, dict(g.meta.phase_durations())) for g in graphs]
    phases = [p for p in schema.PHASES if any(p in d for _, d in per_graph)]
    phases += sorted({p for _, d in per_graph for p in d} - set(phases))
    if not phases:
        return [Text("  no timings recorded", style="dim")]
    t = Table(box=None, padding=(0, 1), header_style="bold")
    t.add_column("graph", no_wrap=True)
    for p in phases:
        t.add_column(PHASE_SHORT.get(p, p), justify="right", no_wrap=True)
    t.add_column("total", justify="right", no_wrap=True, style="bold")
    for g, d in per_graph:
        slowest = max(d, key=lambda k: d[k]) if d else None
        cells = [Text(format_duration(d[p]), style="bold yellow" if p == slowest else "")
                 if p in d else Text("–", style="dim") for p in phases]
        t.add_row(g.id, *cells, format_duration(sum(d.values())) if d else "–")
    return [t]


def _cudagraphs(graphs: list[GraphRecord]) -> list[RenderableType]:
    """Shown when some compile asked for CUDA graphs (mode="reduce-overhead"/"max-autotune",
    or triton.cudagraphs): per graph, used or skipped and Inductor's reason."""
    states = [(g.id, cudagraphs_state(g)) for g in graphs]
    if all(s in (None, "off") for _, s in states):
        return []
    out: list[RenderableType] = [Text(""), _heading("CUDA graphs")]
    for gid, s in states:
        style = "green" if s == "on" else "yellow" if s and s != "off" else "dim"
        out.append(Text.assemble(("  " + gid.ljust(22), "bold"), (str(s or "not recorded"), style)))
    return out


def _compiles(trace: Trace) -> list[RenderableType]:
    compiles = trace.compiles
    if not compiles:
        return []
    out: list[RenderableType] = [
        Text(""), _heading("Dynamo compiles (enter: guards, breaks, recompiles, cache events)")]
    t = Table(box=None, padding=(0, 2), header_style="bold")
    for col in ("id", "function", "where", "compile", "inductor", "guards", "cache", "graphs"):
        t.add_column(col, no_wrap=col != "where")
    notes: list[Text] = []
    for cid, c in compiles.items():
        metrics = c.get("metrics") or c.get("summary") or {}
        place = compile_place(compiles, cid)
        # cut at its start when narrow: the file's name and line are what tell compiles apart
        where = (Row(Text(str(place["file"])), Text(f":{place['line'] or '?'}"), start=True)
                 if place["file"] else Text("–"))
        t.add_row(Text(cid), Text(str(place["function"] or "–")), where,
                  # a restarted compile has a summary (its cache counts) but no time of its own
                  format_duration(metrics.get("entire_frame_compile_time_s"))
                  if metrics.get("entire_frame_compile_time_s") is not None
                  or not place["restarted"] else "restart",
                  format_duration(metrics.get("inductor_compile_time_s")),
                  model.guards_text(guard_counts(c, trace.compile_shapes_brief(cid)), brief=True),
                  compile_cache(c),
                  ", ".join(c.get("graphs") or []))
        for r in reasons_of(c):
            notes.append(Text(f"  {cid} recompiled because: {_reason(r)}", style="yellow"))
        failed = model.compile_failure(metrics)
        if failed:  # Dynamo gave up on the frame (the recompile limit, an error)
            notes.append(Text(f"  {cid} failed: {failed}", style="red"))
    per_compile = graph_breaks.trace_breaks(trace)
    breaks = [b for bs in per_compile.values() for b in bs]
    notes += break_notes(graph_breaks.summarize(breaks).headline, [b.to_json() for b in breaks])
    notes += skipped_notes([f.to_json() for f in skipped_frames(trace.manifest.skipped_frames)])
    notes += advice_section([a.to_json() for a in advice.suggestions(trace)],
                            {t.id: t.to_json() for t in advice.verdicts(trace).values()})
    return out + [t] + notes


def _reason(r: Any) -> str:
    text = str(r.get("reason") or r.get("msg") or r) if isinstance(r, dict) else str(r)
    lines = [ln for ln in text.strip().splitlines() if ln.strip()][:6]
    return "\n      ".join(lines)[:600]


def _accuracy(trace: Trace) -> list[RenderableType]:
    checks = trace.runtime.get("checks") or {}
    if not checks:
        return []
    out: list[RenderableType] = [Text(""), _heading("compiled vs eager")]
    numerics = numerics_summary(trace)
    for cid, c in checks.items():
        if isinstance(c, dict):
            out.extend(accuracy_renderables(cid, c))
            out.extend(numerics_lines(numerics.get(cid) or {}))
    return out


def _config(trace: Trace) -> list[RenderableType]:
    changed = trace.config.get("changed") or {}
    by_tool = set(trace.config.get("set_by_tuidebug") or [])
    out: list[RenderableType] = [
        Text(""), _heading(f"config differences from defaults ({len(changed)})")]
    if not changed:
        out.append(Text("  none", style="dim"))
        return out
    t = Table(box=None, padding=(0, 2), header_style="bold")
    t.add_column("flag", no_wrap=True)
    t.add_column("value")
    t.add_column("default")
    t.add_column("", style="dim")
    for name, v in sorted(changed.items()):
        v = v if isinstance(v, dict) else {"value": v}
        t.add_row(name, repr(v.get("value")), repr(v.get("default")),
                  "set by tuidebug" if name in by_tool else "")
    out.append(t)
    return out


class OverviewScreen(TraceScreen):
    class SummaryRead(Read):
        """The trace's summary, as renderables and their lines (key: None)."""

        data: Rendered

    class LinesRendered(Read):
        """The summary's lines again, at another width (key: the width)."""

        data: Rendered

    SCREEN_NAME = "overview"
    BINDINGS = keymap.bindings("overview")

    def compose_body(self) -> ComposeResult:
        yield TextView(id="overview", show_cursor=True, placeholder="reading the trace…")

    def on_mount(self) -> None:
        self.query_one(TextView).focus()

    def show_graph(self, g: GraphRecord | None) -> None:
        trace, console, width = self.trace, self.app.console, self._width()
        self.load(self.SummaryRead, None,
                  lambda: render_in_worker(console, overview_renderables(trace), width))

    def is_loaded(self) -> bool:
        return self.query_one(TextView).line_count > 0

    def _width(self) -> int:
        return self.query_one(TextView).line_width()

    def on_overview_screen_summary_read(self, message: OverviewScreen.SummaryRead) -> None:
        self._renderables = message.data.items
        self._show_lines(message.data, keep=False)

    def on_overview_screen_lines_rendered(self, message: OverviewScreen.LinesRendered) -> None:
        self._show_lines(message.data, keep=True)

    def _render_lines(self) -> None:
        """The summary rendered again at the view's width, in a worker."""
        items, console, width = self._renderables, self.app.console, self._width()
        self.load(self.LinesRendered, width, lambda: render_in_worker(console, items, width))

    def _show_lines(self, rendered: Rendered, keep: bool) -> None:
        if rendered.width != self._width():  # resized meanwhile: shown, and drawn again
            self._render_lines()
        view = self.query_one(TextView)
        lines = rendered.lines
        self._graph_lines = {}
        self._compile_lines: dict[int, str] = {}
        ids = [g.id for g in self.trace.graphs]
        compiles = self.trace.compiles
        for i, line in enumerate(lines):
            first = line.plain.strip().split("  ")[0] if line.plain.strip() else ""
            if first in ids:
                self._graph_lines[i] = first
            elif first in compiles:
                self._compile_lines[i] = first
        view.set_source(RichLines(lines), cursor=view.cursor if keep else site_cursor(lines),
                        keep_scroll=keep)

    def action_advise_try(self) -> None:
        """``advise --try`` from the TUI: the plan shown and confirmed (ConfirmScreen), the
        runs in a worker thread, the overview read again with the verdicts."""
        if getattr(self, "_advising", False):
            self.notify("the advice is being tried already", timeout=5)
            return
        from tuidebug.compiler import advise

        found = advice.suggestions(self.trace)
        tries = [s for s in found if s.apply is not None]
        if not tries:
            self.notify("no suggestion here can be tried without editing the script",
                        timeout=8)
            return
        try:
            plan = advise.plan(self.trace.root, found)
        except Exception as e:  # the script is gone, a trace not made by `tuidebug trace`
            self.notify(inert(f"{e}"), title="cannot try the advice", severity="error",
                        timeout=10, markup=False)
            return
        root = self.trace.root
        out = Path(tempfile.mkdtemp(prefix="tuidebug-advise-"))

        def work() -> None:
            def progress(msg: str) -> None:
                self.app.call_from_thread(self.notify, inert(msg), timeout=5, markup=False)
            try:
                advise.try_all(root, found, out, progress=progress)
                error = None
            except Exception as e:  # reported, never a crash
                error = f"{type(e).__name__}: {e}"
            self.app.call_from_thread(self._advice_tried, error)

        def answered(answer: Any) -> None:
            if answer:
                self._advising = True
                self.run_worker(work, name="advise", group="advise", thread=True,
                                exit_on_error=False)
        self.app.push_screen(ConfirmScreen(plan.lines(), "Try the advice: run this?",
                                           plan.confirm), answered)

    def _advice_tried(self, error: str | None) -> None:
        self._advising = False
        if error:
            self.notify(inert(error), title="trying the advice failed", severity="error",
                        timeout=10, markup=False)
            return
        self.trace.__dict__.pop("advice", None)  # advice.json was written: read it again
        self.notify("advice tried: each suggestion is marked on the overview", timeout=8)
        self.show_graph(None)

    def on_resize(self, event: events.Resize) -> None:
        if getattr(self, "_renderables", None):
            self._render_lines()

    async def on_text_view_activated(self, event: TextView.Activated) -> None:
        if open_error_site(self, event):
            return
        diverging = kernel_at(event.view.source.rich(event.index))
        if diverging:  # the first diverging kernel: its code, the line that went wrong
            self.app.post_message(ShowKernel(*diverging))
            return
        cid = getattr(self, "_compile_lines", {}).get(event.index)
        if cid:
            self.app.push_screen(TextScreen(f"Dynamo compile {cid}",
                                            model.compile_detail(cid, self.trace.compiles,
                                                                 self.trace.compile_shapes(cid))))
            return
        graph_id = getattr(self, "_graph_lines", {}).get(event.index)
        if graph_id:
            self.app.set_graph(graph_id)  # type: ignore[attr-defined]
            await self.app.run_action("show_screen('passes')")
