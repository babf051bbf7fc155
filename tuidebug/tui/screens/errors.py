"""Errors: how far compilation got, the exception, its traceback, and what to do next."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.widgets import Static
from textual.worker import get_current_worker

from tuidebug.trace.queries import failure
from tuidebug.trace.queries.provenance import generated_kernels
from tuidebug.trace.format import schema
from tuidebug.trace.format.reader import GraphRecord, Trace
from tuidebug.tui import keymap
from tuidebug.tui.messages import Read
from tuidebug.tui.screens.base import TraceScreen
from tuidebug.tui.screens.consent import ConfirmScreen
from tuidebug.tui.screens.modals import TextScreen
from tuidebug.tui.screens.error_site import hint, open_error_site, progress_line, site_cursor, \
    site_hint
from tuidebug.tui.widgets.render import to_lines
from tuidebug.tui.widgets.textview import RichLines, TextView
from tuidebug.inert import inert


def error_renderables(trace: Trace) -> list[Any]:
    r = failure.error_report(trace)
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
                                 (_kernels_said(g), "dim")))
    if r.hints or r.site:
        out.append(Text(""))
        out.append(Text("what to do next", style="bold cyan"))
        if r.site:
            out.append(site_hint(r))
        for h in r.hints:
            out.append(hint(h, "bold"))
    if r.type or r.message:
        out.append(Text(""))
        if r.type:  # a crash recorded none
            out.append(Text.assemble(("exception  ", "bold cyan"), (str(r.type), "bold red")))
        key = failure.key_error_lines(r.message)
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


class TaskCancelled(Exception):
    """The user cancelled a minify (raised from its progress callback)."""


class ErrorsScreen(TraceScreen):
    class ReportRead(Read):
        """The error report and its hints, as renderables (key: None)."""

        data: list[Any]

    SCREEN_NAME = "errors"
    BINDINGS = keymap.bindings("errors")
    DEFAULT_CSS = """
    ErrorsScreen #errors-task { height: auto; max-height: 8; padding: 0 1; background: $boost; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.task_items: list[Any] = []  # the last minify / bisect result, shown first
        self.repro_path: Path | None = None
        self.task_running: str | None = None
        self._task_lines = 0
        self._bisect: Any = None  # the running BisectTask (not `_task`: Textual's message loop)

    def compose_body(self) -> ComposeResult:
        yield Static(self._idle_hint(), id="errors-task")
        yield TextView(id="errors-view", placeholder="reading…")

    def _idle_hint(self) -> Text:
        if self.app.trace.status != schema.STATUS_FAILED:  # type: ignore[attr-defined]
            return Text("")
        return Text.assemble(("m", "bold cyan"), (": minify into a repro.py   ", "dim"),
                             ("b", "bold cyan"), (": bisect the responsible pass   ", "dim"),
                             ("x", "bold cyan"), (": cancel", "dim"))

    # -- minify / bisect -------------------------------------------------------------------------

    def _can_run(self, what: str) -> bool:
        if not self.app.may_run(what):  # type: ignore[attr-defined]
            return False
        status = self.trace.status
        if status == schema.STATUS_CRASHED:
            self.notify(f"this trace crashed (during {self.trace.phase!r}): the capturing process "
                        f"died without recording an error, so there is no failure to {what}. "
                        "Run the trace again; if it then fails with an error, "
                        f"{what} that trace", title=f"cannot {what} a crash",
                        severity="warning", timeout=10)
            return False
        if status != schema.STATUS_FAILED:
            self.notify(f"this trace did not fail: nothing to {what}", severity="warning")
            return False
        if self.task_running:
            self.notify(f"a {self.task_running} is already running (x cancels it)",
                        severity="warning")
            return False
        return True

    def _progress(self, text: str) -> None:
        self.query_one("#errors-task", Static).update(Text(text, style="bold"))

    def _confirm(self, what: str, plan_of: Any, then: Any) -> None:
        """Show what ``what`` will run (``plan_of()``, a consent Plan) and ask; on y,
        ``then(names)`` with the trace's risky flags confirmed by typing their names."""
        try:
            plan = plan_of()
        except Exception as e:  # cannot be minified/bisected, an untrusted config: say why
            self.notify(inert(f"{e}"), title=f"cannot {what}", severity="error", timeout=10,
                        markup=False)
            return

        def answered(answer: Any) -> None:
            if answer and self._can_run(what):
                then(answer.names)
        self.app.push_screen(ConfirmScreen(plan.lines(), f"{what.capitalize()}: run this?",
                                           plan.confirm), answered)

    def action_minify(self) -> None:
        if not self._can_run("minify"):
            return
        from tuidebug.minify.plans import minify_plan

        self._confirm("minify", lambda: minify_plan(self.trace.root), self._run_minify)

    def _run_minify(self, allowed: dict[str, Any]) -> None:
        self.task_running = "minify"
        trace_path = str(self.trace.root)
        out = Path(tempfile.mkdtemp(prefix="tuidebug-repro-")) / "repro.py"
        self._progress("⠿ minify: starting worker processes…")

        def work() -> None:
            from tuidebug.minify import minify

            worker = get_current_worker()

            def on_progress(p: Any) -> None:
                if worker.is_cancelled:
                    raise TaskCancelled()
                line = (f"⠿ minify: {p.step}  attempts {p.attempts} (cache {p.cache_hits})  "
                        f"nodes {p.nodes}/{p.nodes_before}  {p.elapsed_s:.0f}s"
                        + (f"  {p.message}" if p.message else ""))
                self.app.call_from_thread(self._progress, line)

            try:
                result = minify(trace_path, out, jobs=2, timeout=60, on_progress=on_progress,
                                allowed=allowed)
            except TaskCancelled:
                self.app.call_from_thread(self._task_done, "minify", None, "cancelled")
                return
            except Exception as e:  # MinifyError and anything else: report, never crash
                self.app.call_from_thread(self._task_done, "minify", None,
                                          f"{type(e).__name__}: {e}")
                return
            self.app.call_from_thread(self._task_done, "minify", result, None)

        self.run_worker(work, name="minify", group="task", thread=True, exit_on_error=False)

    def action_bisect(self) -> None:
        if not self._can_run("bisect"):
            return
        from tuidebug.minify.plans import bisect_plan

        repro = str(self.repro_path) if self.repro_path is not None and \
            self.repro_path.is_file() else None
        self._confirm("bisect", lambda: bisect_plan(self.trace.root, repro), self._run_bisect)

    def _run_bisect(self, allowed: dict[str, Any]) -> None:
        self.task_running = "bisect"
        # the user confirmed what it runs in the dialog (action_bisect)
        trace_path = self.trace.root
        repro = self.repro_path if self.repro_path is not None and self.repro_path.is_file() \
            else None
        self._progress("⠿ bisect: starting…")

        def work() -> None:
            # The bisector imports torch: it runs in a child process, never in the UI's.
            from tuidebug.minify.bisect_task import BisectTask

            t0 = time.monotonic()
            try:
                task = BisectTask(trace_path, repro, allowed=allowed)
            except OSError as e:
                self.app.call_from_thread(self._task_done, "bisect", None, str(e))
                return
            self._bisect = task
            report, error = None, None
            for msg in task.messages():
                event = msg.get("event")
                if event == "progress":
                    run = f"run {msg['run']}: " if msg.get("run") is not None else ""
                    self.app.call_from_thread(
                        self._progress, f"⠿ bisect: {run}{msg.get('message')}  "
                                        f"{time.monotonic() - t0:.0f}s")
                elif event == "result":
                    report = msg.get("result")
                elif event == "error":
                    error = str(msg.get("message"))
            tail = task.log_tail()
            rc = task.close()
            self._bisect = None
            if get_current_worker().is_cancelled or task.cancelled or rc < 0:
                self.app.call_from_thread(self._task_done, "bisect", None, "cancelled")
            elif report is None:
                error = error or next((t for t in reversed(tail) if t.strip()),
                                      f"the bisection exited with status {rc}")
                self.app.call_from_thread(self._task_done, "bisect", None, error)
            else:
                self.app.call_from_thread(self._task_done, "bisect", report, None)

        self.run_worker(work, name="bisect", group="task", thread=True, exit_on_error=False)

    def action_cancel_task(self) -> None:
        if not self.task_running:
            self.notify("nothing is running", severity="warning")
            return
        for w in self.workers:
            if w.group == "task":
                w.cancel()
        self._kill_task()
        self._progress(f"cancelling the {self.task_running}…")

    def on_unmount(self) -> None:
        self._kill_task()

    def _kill_task(self) -> None:
        """Stop the bisect child and every run it started, if it still runs."""
        if self._bisect is not None:
            self._bisect.kill()

    def _task_done(self, what: str, result: Any, error: str | None) -> None:
        self.task_running = None
        if error:
            self.query_one("#errors-task", Static).update(Text(f"{what}: {error}", style="bold red"))
            if error != "cancelled":
                self.notify(error, title=f"{what} failed", severity="error", timeout=10)
            return
        items: list[Any] = []
        if what == "minify":
            self.repro_path = Path(result.repro_path) if result.repro_path else None
            ok = "verified" if result.verified else "NOT verified"
            if result.interrupted:  # cancelled (x): the best repro so far was kept
                ok = "cancelled: the best so far, NOT verified"
            items.append(Text("minified repro", style="bold cyan"))
            if self.repro_path is not None:
                items.append(Text.assemble(("  repro  ", "dim"), (str(self.repro_path), "bold"),
                                           ("   (enter / o: open)", "dim")))
            if result.message:
                items.append(Text(f"  {result.message}", style="dim"))
            items.append(Text(f"  nodes {result.nodes_before} → {result.nodes_after}, "
                              f"{result.attempts} attempts ({result.cache_hits} cached), "
                              f"{result.wall_s:.1f}s, {ok}",
                              style="green" if result.verified else "yellow"))
            verb = "minify cancelled" if result.interrupted else "minify done"
            done = f"{verb}: {self.repro_path}  ({ok})" if self.repro_path else \
                f"{verb}: no repro written"
            self.query_one("#errors-task", Static).update(
                Text(done, style="bold green" if result.verified else "bold yellow"))
        else:
            items.append(Text("bisect", style="bold cyan"))
            items.append(Text.assemble(("  responsible  ", "dim"),
                                       (str(result.get("found")), "bold")))
            items.append(Text(f"  {result.get('runs')} runs in {result.get('wall_s')}s",
                              style="dim"))
            self.query_one("#errors-task", Static).update(Text(f"bisect done: {result.get('found')}",
                                               style="bold green"))
        items.append(Text(""))
        self.task_items = items
        self._task_lines = len(items)
        if getattr(self, "_items", None) is not None:
            self._render_lines(keep=False)

    def action_open_repro(self) -> None:
        if self.repro_path is None:
            self.notify("no repro yet: press m to minify", severity="warning")
            return
        self.app.push_screen(TextScreen.of_file(self.repro_path))

    _done = False

    def is_loaded(self) -> bool:
        return self._done

    def show_graph(self, g: GraphRecord | None) -> None:
        self.load(self.ReportRead, None, lambda: error_renderables(self.trace))

    def on_text_view_activated(self, event: TextView.Activated) -> None:
        if self.repro_path is not None and event.index < self._task_lines:
            self.action_open_repro()
            return
        open_error_site(self, event)

    def on_errors_screen_report_read(self, message: ErrorsScreen.ReportRead) -> None:
        self._done = True
        self._items = message.data
        self._render_lines(keep=False)
        self.query_one(TextView).focus()

    def _render_lines(self, keep: bool) -> None:
        view = self.query_one(TextView)
        width = view.line_width()
        lines = to_lines(self.app.console, self.task_items, width) if self.task_items else []
        self._task_lines = len(lines)
        lines += to_lines(self.app.console, self._items, width)
        # the cursor starts on a minify / bisect result, else on the error site (enter opens it)
        start = 0 if self.task_items else site_cursor(lines)
        view.set_source(RichLines(lines), cursor=view.cursor if keep else start, keep_scroll=keep)
        view.set_query(self.search_query)

    def on_resize(self, event: events.Resize) -> None:
        if getattr(self, "_items", None):
            self._render_lines(keep=True)


def _kernels_said(g: GraphRecord) -> str:
    """``  3 kernels, 9 extern calls`` (as ``info`` and the code screen count them)."""
    if not g.kernels:
        return ""
    made = generated_kernels(g) or 0
    extern = len(g.kernels) - made
    return f"  {made} kernels" + (f", {extern} extern calls" if extern else "")
