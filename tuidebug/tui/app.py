"""The terminal UI: ``run_app(trace)`` opens a trace; ``TuidebugApp`` is the Textual app.

One screen per question (overview, passes, IR & fusion, code, autotune, errors), each a Textual
mode, created the first time it is shown; a screen reads only what it shows, in worker threads.
This package never imports torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import events, work
from textual.app import App
from textual.binding import Binding

from tuidebug.trace.format import schema
from tuidebug.trace.format.reader import GraphRecord, Trace
from tuidebug.inert import inert
from tuidebug.tui import keymap
from tuidebug.tui.commands import TraceCommands
from tuidebug.tui.messages import GraphChosen, ShowKernel, ShowNode
from tuidebug.tui.open_traces import OpenTraces
from tuidebug.tui.prebuild import Prebuilder
from tuidebug.tui.screens.autotune import AutotuneScreen
from tuidebug.tui.screens.base import TraceScreen
from tuidebug.tui.screens.code import CodeScreen
from tuidebug.tui.screens.compare import CompareScreen, compare_ahead
from tuidebug.tui.screens.consent import ConfirmScreen
from tuidebug.tui.screens.errors import ErrorsScreen
from tuidebug.tui.screens.flags import FlagsScreen
from tuidebug.tui.screens.ir import IRScreen
from tuidebug.tui.screens.modals import HelpScreen, InputScreen, PickScreen
from tuidebug.tui.screens.overview import OverviewScreen
from tuidebug.tui.screens.passes import PassesScreen
from tuidebug.tui.screens.profile import ProfileScreen
from tuidebug.tui.screens.ranks import RanksScreen
from tuidebug.tui.screens.shapes import ShapesScreen

if TYPE_CHECKING:
    from tuidebug.compiler.recompile_spec import RecompileSpec


class TuidebugApp(App[int]):
    """Explore one trace."""

    TITLE = "tuidebug"
    CSS = """
    TraceScreen { background: $background; }
    TraceScreen > #body { height: 1fr; }
    .pane-title { height: 1; width: 100%; background: $boost; color: $text-accent;
                  text-style: bold; padding: 0 1; }
    .detail { height: 8; background: $boost; padding: 0 1; border-top: solid $primary 40%; }
    .empty { padding: 1 2; color: $text-muted; }
    """
    MODES: ClassVar[dict[str, Any]] = {
        "overview": OverviewScreen, "passes": PassesScreen, "ir": IRScreen,
        "code": CodeScreen, "autotune": AutotuneScreen, "errors": ErrorsScreen,
        "flags": FlagsScreen, "compare": CompareScreen, "shapes": ShapesScreen,
        "profile": ProfileScreen, "ranks": RanksScreen,
    }
    # built in the background after the first paint (prebuild.py); not the flags screen (shown,
    # it starts the recompile worker) nor ranks; compare says there is nothing compared yet,
    # even once a trace is named (after o, on a rank switch): it compares when shown
    PREBUILT = ("passes", "ir", "code", "autotune", "errors", "shapes", "profile", "compare")
    COMMANDS = App.COMMANDS | {TraceCommands}
    BINDINGS: ClassVar[list[Binding]] = keymap.bindings("app")  # type: ignore[assignment]

    def __init__(self, trace: Trace, *, start: str = "overview",
                 recompile_timeout: float = 600.0, prewarm: bool = True,
                 allow_run: bool = True, job: Path | None = None,
                 prebuild: bool = True) -> None:
        super().__init__()
        self.trace = trace
        self.job = job  # the distributed job ``trace`` is a rank of (the ranks screen)
        self.job_report: dict[str, Any] | None = None  # its cross-rank report, once read
        self.back_to = "overview"  # the screen the ranks screen returns to on a rank switch
        self.start_screen = start
        self.recompile_timeout = recompile_timeout  # seconds before a recompile is killed
        # start the recompile worker (torch import and warm-up, seconds) in the background when
        # the flags screen is first shown, so that the first recompile is already warm
        self.prewarm = prewarm
        # False under `tuidebug serve` without --allow-run: nothing that runs code (recompile,
        # its worker and priming, minify, bisect) starts; may_run() says why
        self.allow_run = allow_run
        self.worker_error: str | None = None  # why the worker could not start
        self.current_graph: GraphRecord | None = self._first_graph()
        self.pending_flags: dict[str, Any] = {}  # flag name -> new value (flags screen)
        self.compare_with: Path | None = None  # the trace the compare screen diffs against
        self.open_traces = OpenTraces()  # this one and those compared with it, read once
        self.open_traces.add(trace)
        self.recompile_worker: Any = None  # RecompileWorker, started on first use
        self.recompile_job: Any = None  # the last RecompileJob
        self.prime_job: Any = None  # the background recompile that fills the kernel cache
        # the other screens built while nobody presses a key, after the first paint (off: each
        # is built when first shown)
        self.prebuilder = Prebuilder(self, [m for m in self.PREBUILT if m != start]
                                     if prebuild else [],
                                     lambda s: isinstance(s, TraceScreen) and s.prepare_ahead(),
                                     (lambda: compare_ahead(self.trace)) if prebuild else None)

    def _first_graph(self) -> GraphRecord | None:
        graphs = self.trace.graphs
        if not graphs:
            return None
        failed = self.trace.error.graph if self.trace.error is not None else None
        for g in graphs:
            if g.id == failed:
                return g
        return graphs[0]

    def on_mount(self) -> None:
        self.switch_mode(self.start_screen)
        self.prebuilder.start()

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, (events.Key, events.MouseDown)):
            self.prebuilder.input_seen()  # building screens waits for a quiet moment
        if isinstance(event, (events.Key, events.Paste)) and isinstance(self.screen, TraceScreen) \
                and self.screen.search_takes(event):
            return  # typed into the open search bar (it takes keys without the focus)
        await super().on_event(event)

    def on_unmount(self) -> None:
        if self.recompile_worker is not None:
            self.recompile_worker.close(timeout=2.0)
            self.recompile_worker = None

    # -- recompile, compare, open another trace ---------------------------------------------------

    def _from_worker_thread(self, fn: Any, *args: Any, **kwargs: Any) -> None:
        try:
            self.call_from_thread(fn, *args, **kwargs)
        except RuntimeError:  # the app is shutting down
            pass

    def _ensure_worker(self) -> Any:
        """The app's RecompileWorker, started (spawning it is quick: the server process
        imports torch and warms up on its own; ``worker.ready`` says when it has)."""
        from tuidebug.compiler.worker import RecompileWorker

        if self.recompile_worker is None:
            self.recompile_worker = RecompileWorker(
                timeout=self.recompile_timeout,
                on_progress=lambda j, m: self._from_worker_thread(self._recompile_progress, j),
                on_done=lambda j: self._from_worker_thread(self._recompile_done, j))
        self.recompile_worker.start()
        self.worker_error = None
        return self.recompile_worker

    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Every toast shows its text as written: messages carry names, paths and errors from
        the trace, so never as markup, with control characters shown visibly (screens' and
        widgets' ``notify`` come here too)."""
        super().notify(inert(message), title=inert(title, multiline=False), severity=severity,
                       timeout=timeout, markup=False)

    def warm_worker(self) -> None:
        """Start the recompile worker in the background (the flags screen calls this when it is
        first shown), unless ``prewarm`` is off or it runs already. Never blocks, never raises:
        a worker that cannot start is reported in the flags screen's status."""
        if not self.prewarm or not self.allow_run or self.recompile_worker is not None:
            return
        try:
            # only tuidebug's own worker process: nothing the trace recorded runs before the
            # user confirms it (docs/security.md); priming the kernel cache re-runs the trace's
            # command, so it is asked for like a recompile
            self._ensure_worker()
        except Exception as e:
            self.worker_error = f"{type(e).__name__}: {e}"

    def _primed(self, job: Any) -> None:
        screen = self._flags_screen()
        if screen is not None and screen.is_mounted:
            screen.update_status()

    def worker_state(self) -> str:
        """``off`` (not started), ``starting`` (importing torch, warming up), ``ready``,
        ``error`` (``worker_error`` says why)."""
        w = self.recompile_worker
        if self.worker_error:
            return "error"
        if w is None:
            return "off"
        return "ready" if w.ready else "starting"

    def may_run(self, what: str) -> bool:
        """Whether ``what`` (recompile, minify, bisect: each runs code) may start here; when not
        (a served view started without --allow-run) the user is told why."""
        if self.allow_run:
            return True
        self.notify(f"{what} runs code on the server, and this view was served without "
                    "--allow-run (tuidebug serve --allow-run TRACE allows it)",
                    title=f"cannot {what} here", severity="warning", timeout=10)
        return False

    def start_recompile(self, sets: dict[str, Any]) -> None:
        """Show what a recompile with ``sets`` will run and ask (``ConfirmScreen``); on yes,
        ``recompile_confirmed``, with the trace's risky flags whose names the user typed.
        Nothing the trace recorded runs unasked (docs/security.md)."""
        if not self.may_run("recompile"):
            return
        from tuidebug.compiler import recompile
        from tuidebug.compiler.consent import spec_plan

        job = self.recompile_job
        if job is not None and not job.done:
            self.notify("a recompile is already running (x cancels it)", severity="warning")
            return
        try:
            spec = recompile.recompile_spec(self.trace.root, recompile.parse_sets(dict(sets)))
            plan = spec_plan(spec, self.trace.manifest)
        except Exception as e:  # bad input, an untrusted config: report, stay alive
            self.notify(inert(f"{type(e).__name__}: {e}"), title="cannot recompile",
                        severity="error", timeout=10, markup=False)
            return

        def answered(answer: Any) -> None:
            if answer:  # the spec shown, with the risky flags whose names the user typed
                self.recompile_confirmed(spec.confirmed(answer.names))
        self.push_screen(ConfirmScreen(plan.lines(), "Recompile: run this?", plan.confirm),
                         answered)

    def recompile_confirmed(self, spec: RecompileSpec) -> None:
        """Run ``spec`` — the recompile the user confirmed — in the warm worker (a separate
        process), into a new trace directory beside the trace. Never blocks; progress goes to
        the flags screen."""
        from tuidebug.compiler.recompile import format_sets

        job = self.recompile_job
        if job is not None and not job.done:
            self.notify("a recompile is already running (x cancels it)", severity="warning")
            return
        try:
            self._ensure_worker()
            prime = self.prime_job
            if prime is not None and not prime.done:  # the user's recompile goes first
                self.recompile_worker.cancel(prime)
            self.recompile_job = self.recompile_worker.submit_spec(spec)
        except Exception as e:  # bad input, or the worker cannot start: report, stay alive
            self.notify(f"{type(e).__name__}: {e}", title="cannot recompile", severity="error",
                        timeout=10)
            return
        self.notify(f"recompiling with {format_sets(spec.sets)}…", timeout=4)
        self._recompile_progress(self.recompile_job)

    def cancel_recompile(self) -> None:
        job = self.recompile_job
        if job is None or job.done or self.recompile_worker is None:
            self.notify("no recompile is running", severity="warning")
            return
        self.recompile_worker.cancel(job)

    def _flags_screen(self) -> FlagsScreen | None:
        for s in self.screen_stack:
            if isinstance(s, FlagsScreen):
                return s
        try:
            stack = self._screen_stacks.get("flags") or []
        except AttributeError:
            stack = []
        return next((s for s in stack if isinstance(s, FlagsScreen)), None)

    def _recompile_progress(self, job: Any) -> None:
        screen = self._flags_screen()
        if screen is not None and screen.is_mounted:
            screen.update_status()

    async def _recompile_done(self, job: Any) -> None:
        self._recompile_progress(job)
        wrote = (job.out / schema.MANIFEST).exists()
        if job.state == "ok" or (job.state == "failed" and wrote):
            sev = "information" if job.state == "ok" else "warning"
            self.notify(job.summary(), title="recompile finished", severity=sev, timeout=8)
            self.compare_with = job.out
            await self.action_show_screen("compare")
            if isinstance(self.screen, CompareScreen):
                self.screen.refresh_graph()
        else:
            self.notify(job.summary(), title=f"recompile {job.state}", severity="error",
                        timeout=15)

    def action_compare_with(self) -> None:
        def valid(text: str) -> str | None:
            p = Path(text).expanduser()
            return None if p.exists() else f"no such file or directory: {text}"

        def chosen(text: str | None) -> None:
            if text:
                self._compare_with_named(text)
        self.push_screen(InputScreen("Compare with trace…", str(self.compare_with or ""),
                                     "a trace, a .tar.gz, a TORCH_TRACE log, a debug or job "
                                     "folder   enter: compare, escape: cancel", valid), chosen)

    @work(thread=True, exclusive=True, group="compare")
    def _compare_with_named(self, text: str) -> None:
        """Make what the user named a trace (unpacked, imported: the one door), then compare."""
        from tuidebug.errors import TuidebugError
        from tuidebug.trace.open import trace_dir

        try:
            path = trace_dir(text, on_note=lambda n: self._from_worker_thread(
                self.notify, inert(n), markup=False))
            # a folder that is no trace says so here, not on the compare screen; read once
            self.open_traces.get(path)
        except (TuidebugError, OSError) as e:
            self._from_worker_thread(self.notify, inert(e), title="cannot compare",
                                     severity="error", timeout=10, markup=False)
            return
        self._from_worker_thread(self._compare_with, path)

    async def _compare_with(self, path: Path) -> None:
        self.compare_with = path.expanduser().resolve()
        await self.action_show_screen("compare")
        if isinstance(self.screen, CompareScreen):
            self.screen.refresh_graph()

    async def open_trace(self, path: Path, *, screen: str = "overview") -> None:
        """Replace the open trace with the one at ``path``; every screen is made afresh, and
        ``screen`` shown (on the graph of the same id, when the new trace has one)."""
        old = self.trace.root
        self.prebuilder.stop()
        graph = self.current_graph.id if self.current_graph else None
        self.trace = self.open_traces.get(path)  # the one just compared: read already
        self.current_graph = next((g for g in self.trace.graphs if g.id == graph),
                                  None) or self._first_graph()
        self.pending_flags = {}
        self.compare_with = Path(old)
        current = self.current_mode
        for mode, cls in self.MODES.items():
            if mode != current:
                await self.remove_mode(mode)
                self.add_mode(mode, cls)
        await self.switch_mode("overview" if current != "overview" else "passes")
        await self.remove_mode(current)
        self.add_mode(current, self.MODES[current])
        await self.switch_mode(screen)
        self.prebuilder.start()
        self.notify(f"opened {path} (compare: 8 shows it against {old})", timeout=6)

    async def switch_rank(self, path: Path) -> None:
        """Open another rank's trace on the screen shown before the ranks screen."""
        await self.open_trace(path, screen=self.back_to)

    # -- navigation ----------------------------------------------------------------------------

    async def action_show_screen(self, name: str) -> None:
        if name in self.MODES and self.current_mode != name:
            if name == "ranks" and self.current_mode:
                self.back_to = self.current_mode
            await self.switch_mode(name)

    def set_graph(self, graph_id: str) -> None:
        g = next((g for g in self.trace.graphs if g.id == graph_id), None)
        if g is None or g is self.current_graph:
            return
        self.current_graph = g
        if isinstance(self.screen, TraceScreen):
            self.screen.refresh_graph()
        self.prebuilder.start()  # the screens built earlier: brought up to date when idle

    def on_graph_chosen(self, message: GraphChosen) -> None:
        self.set_graph(message.graph_id)

    def action_pick_graph(self) -> None:
        graphs = self.trace.graphs
        if not graphs:
            self.notify("this trace has no compiled graphs", severity="warning")
            return
        items = [(g.id, f"{g.id}  ({g.kind}, {g.status})") for g in graphs]
        current = self.current_graph.id if self.current_graph else None

        def chosen(graph_id: str | None) -> None:
            if graph_id:
                self.set_graph(graph_id)
        self.push_screen(PickScreen("Choose a graph", items, current), chosen)

    def action_cycle_graph(self, step: int) -> None:
        graphs = self.trace.graphs
        if len(graphs) < 2 or self.current_graph is None:
            return
        i = graphs.index(self.current_graph)
        self.set_graph(graphs[(i + step) % len(graphs)].id)

    async def action_pick_rank(self) -> None:
        if self.job is not None:  # a job: every rank side by side, and the switch
            await self.action_show_screen("ranks")
            return
        imp = self.trace.imported_from or {}
        ranks = [int(r) for r in imp.get("ranks") or []]
        if len(ranks) < 2 or not imp.get("path"):
            self.notify("one rank only: choosing a rank is for traces imported from a "
                        "multi-rank TORCH_TRACE log", severity="warning")
            return
        current = imp.get("rank")

        def chosen(rank: str | None) -> None:
            if rank is not None and int(rank) != current:
                self._open_rank(str(imp["path"]), int(rank))
        self.push_screen(PickScreen("Open the log of rank…",
                                    [(str(r), f"rank {r}") for r in ranks],
                                    str(current)), chosen)

    @work(thread=True, exclusive=True, group="rank")
    def _open_rank(self, source: str, rank: int) -> None:
        """Import the log of ``rank`` (once, cached like any import) and open it."""
        from tuidebug.errors import TuidebugError
        from tuidebug.trace.open import trace_dir

        self._from_worker_thread(self.notify, f"importing rank {rank} of {source}…")
        try:
            path = trace_dir(source, rank)
        except (TuidebugError, OSError) as e:
            self._from_worker_thread(self.notify, str(e), title=f"cannot open rank {rank}",
                                     severity="error", timeout=10)
            return
        self._from_worker_thread(self.open_trace, path, screen=self.current_mode or "overview")

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def on_show_node(self, message: ShowNode) -> None:
        self.set_graph(message.graph_id)
        await self.action_show_screen("passes")
        screen = self.screen
        if isinstance(screen, PassesScreen):
            screen.goto_node(message.node, stage=message.stage, marks=message.marks,
                             reason=message.reason)

    async def on_show_kernel(self, message: ShowKernel) -> None:
        self.set_graph(message.graph_id)
        await self.action_show_screen("code")
        screen = self.screen
        if isinstance(screen, CodeScreen):
            screen.goto_kernel(message.kernel, line=message.line)


def run_app(trace: Trace, job: Path | None = None, start: str | None = None) -> int:
    """Open ``trace`` in the terminal UI (a rank of distributed ``job``: on the ranks screen,
    unless ``start`` names another); returns the exit code."""
    app = TuidebugApp(trace, job=job,
                      start=start or ("ranks" if job is not None else "overview"))
    app.run()
    return int(app.return_code or 0)
