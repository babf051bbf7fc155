"""The capture session: starts and stops the concerns, holds what they share (the trace writer,
the graphs, the current graph of each thread)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, TypeVar

import torch

from tuidebug.compiler import compat
from tuidebug.compiler.capture import (autotune, cache_keys, collectives, compiled_calls,
                                       config, events, frames, fusion, graphs, kernels,
                                       numerics, outcome, profile, returned, shapes, triton,
                                       whole_call)
from tuidebug.compiler.capture.state import CallMarks, Concern, GraphState, ThreadState
from tuidebug.trace.format import layout, schema
from tuidebug.trace.format.error_record import ErrorRecord
from tuidebug.trace.format.graph_meta import StageEntry
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.queries.frames import nothing_compiled, skipped_frames

NOTHING_COMPILED = nothing_compiled([], {})  # no frame was handed to Dynamo

# Testing only (like Inductor's inject_relu_bug_TESTING_ONLY): SIGKILL this process when the
# capture reaches this phase, so that tests can check what a crash leaves on disk.
_KILL_AT_PHASE = os.environ.get("TUIDEBUG_TESTING_KILL_AT_PHASE")

# Every concern of a capture, in the order their hooks are installed. A new concern (ranks and
# collectives, symbols and guards, profiling…) is a module with a state.Concern subclass, added
# here.
CONCERNS: tuple[type[Concern], ...] = (
    config.Config,        # config.json
    graphs.Graphs,        # Dynamo graph, stages and passes, partitioned graphs
    fusion.Fusion,        # IR before/after fusion, fusion decisions
    kernels.Kernels,      # output code, provenance, kernel compile and run times
    autotune.Autotune,    # max-autotune choices and why one failed
    triton.Triton,        # Triton launches and config benchmarks, CUDA graph skips (GPU)
    outcome.Outcome,      # errors, the eager comparison
    compiled_calls.CompiledCalls,  # the user's calls of torch.compile results, told to listeners
    returned.Returned,    # the user's call returned: the checked outputs named by it
    profile.Profile,      # --profile N: kernels and FX nodes measured, compiled vs eager
    whole_call.WholeCall,  # --profile N: the user's whole call, compiled vs eager, its ledger
    events.Events,        # the structured trace log (metrics, guards, output code, …)
    collectives.Collectives,  # collectives per graph in program order; DDPOptimizer buckets
    shapes.Shapes,        # symbols, guards, specializations, recompiled inputs
    cache_keys.CacheKeys,  # graph-cache lookups and their keys' components
    frames.Frames,        # frames Dynamo skipped, and why
    numerics.Numerics,    # what each graph lowered: the first diverging kernel of a mismatch
)

C = TypeVar("C", bound=Concern)


class CaptureSession:
    """One capture: hooks installed on ``start()``, removed on ``stop()``.

    ``user_sets``: Inductor flags the caller sets for this capture (it applies them itself); a
    graph-level cache flag among them, and the caches layered on it, is left to the caller
    (``compat.caches_off``) instead of being turned off. ``profile_runs``: profile each
    compile's compiled and eager graph this many times after its eager check (0: off).
    ``numerics``: judge every compile's kernels one by one (the first diverging kernel), not
    only a mismatch's.
    """

    def __init__(self, out_dir: str | Path, *, check_accuracy: bool = True,
                 use_cache: bool = False, command: list[str] | None = None,
                 on_progress: Callable[[str], None] | None = None,
                 user_sets: Mapping[str, Any] | None = None,
                 accuracy_tol: float | None = None, profile_runs: int = 0,
                 numerics: bool = False) -> None:
        self.out_dir = Path(out_dir)
        self.check_accuracy = check_accuracy
        self.accuracy_tol = accuracy_tol  # the judge's tolerance; None: each dtype's default
        self.use_cache = use_cache
        self.profile_runs = profile_runs  # --profile N (0: off); needs the eager check
        self.numerics = numerics  # --numerics: every compile's kernels judged
        self.user_sets = dict(user_sets or {})
        self.command = command
        self.on_progress = on_progress
        self.writer: TraceWriter | None = None
        self.tls = ThreadState()
        self.lock = threading.RLock()
        self.graphs: dict[str, GraphState] = {}
        self.frame_graph: dict[str, GraphState] = {}  # compile id -> its Dynamo graph's state
        self.compiles: dict[str, dict[str, Any]] = {}
        self.stack_cache: dict[str, Any] = {}
        self.errors: list[ErrorRecord] = []
        # a rank of a job: the collectives this process issued so far (RankProgress.issued);
        # None where nothing counts them
        self.collectives: Callable[[], int] | None = None
        self.uncounted: str | None = None  # why not, where counting them failed
        self.concerns: list[Concern] = [c(self) for c in CONCERNS]
        self._patcher: compat.Patcher | None = None
        self._config: config.Changes | None = None  # compiler config changes in force
        self._first: compat.FirstCompile | None = None  # the triggers at the compiler's entries
        self._anon = 0
        # while --profile clocks a whole call: each compiled graph's (graph id, compile id,
        # start mark, end mark) is appended (outcome.Outcome.wrap_runtime)
        self.call_clock: CallMarks | None = None

    def concern(self, kind: type[C]) -> C:
        """The session's instance of concern class ``kind``."""
        for c in self.concerns:
            if isinstance(c, kind):
                return c
        raise LookupError(kind.__name__)

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> "CaptureSession":
        """Start recording: the trace begins, and what must see the script from its first line
        (its torch.compile calls, the config modules as they load) is in place. Dynamo and
        Inductor are hooked only when the script first reaches them (``compat.FirstCompile``,
        ``reach_compiler``): a script that never compiles loads no more of torch than
        without tuidebug."""
        _check_empty(self.out_dir)
        self.writer = TraceWriter(self.out_dir, command=self.command, versions={
            "torch": compat.TORCH_VERSION, "triton": compat.triton_version(load=False),
            "cuda": torch.version.cuda})
        patches = dict(config.TUIDEBUG_CONFIG)
        caches_off = {} if self.use_cache else compat.caches_off(self.user_sets)
        recorded = dict(patches, **caches_off)
        self.writer.update(tuidebug_config=recorded, check_accuracy=self.check_accuracy,
                           accuracy_tol=self.accuracy_tol, profile_runs=self.profile_runs,
                           numerics=self.numerics)
        self._config = config.Changes(
            lambda apply: self.guarded("a compiler config change", apply), self.writer.warn)
        self._patcher = compat.Patcher(self.writer.not_available)
        self._first = compat.FirstCompile(self.reach_compiler, self._reach_failed).watch()  # before what wraps an
        # entry at start: a wrapper of the script's torch.compile calls sees the first one
        self.set_config(patches)
        self.set_config(caches_off, known_only=True)
        for c in self.concerns:
            c.install_at_start(self._patcher)
        self._first.fire_if_loaded()
        return self

    def set_config(self, changes: Mapping[str, Any], *, known_only: bool = False) -> None:
        """Compiler config changes in force during the capture (undone at ``stop``), each
        applied as soon as its config module is loaded: before the script can read or set
        a flag, as if applied before the script ran. Keys: an Inductor flag, or
        ``dynamo.NAME`` / ``functorch.NAME`` (``compat.CACHES_OFF``). ``known_only``: a flag
        this torch lacks is left out. A ``--set`` comes after tuidebug's own, so it wins."""
        assert self._config is not None
        self._config.set(changes, known_only=known_only)

    def reach_compiler(self) -> None:
        """The script reached torch's compiler (its first torch.compile call, Dynamo context
        or Inductor compile): every concern installs its hooks, before the call goes on."""
        assert self.writer is not None and self._patcher is not None
        if not self.guarded("any compile: the compiler's modules failed to import",
                            _imported(compat.import_inductor)):
            return  # the user's compile goes on (and fails, or not) as it would untraced
        compat.mark_pending()  # wrappers installed before Dynamo was loaded: never its frames
        self.config_here()
        for c in self.concerns:
            self.guarded(f"the hooks of {type(c).__name__}", lambda c=c: c.install(self._patcher))
        self.guarded("the Triton version", self._record_triton)

    def config_here(self) -> None:
        """The capture's config changes made in this thread's values where not yet (torch's
        config is per thread: a thread other than the one that loaded the config modules
        compiles with the defaults otherwise). At the first compile, and at each compile_fx."""
        if self._config is not None:
            self.guarded("the config changes in this thread", self._config.reach)

    def _record_triton(self) -> None:
        assert self.writer is not None
        triton = compat.triton_version()
        if triton != self.writer.manifest["versions"].get("triton"):
            self.writer.update(versions={**self.writer.manifest["versions"], "triton": triton})

    def _reach_failed(self, e: Exception) -> None:
        """An error in ``reach_compiler`` (outside what ``guarded`` ran): a trace warning."""
        if self.writer:
            self.writer.warn(f"capture could not hook the compiler: {type(e).__name__}: {e}")

    def stop(self, exc: BaseException | None = None) -> None:
        assert self.writer is not None
        try:
            if self._patcher:
                self._patcher.restore()
            if self._first is not None:
                self._first.cancel()
            for c in self.concerns:  # each undoes what it did, whichever install ran
                c.uninstall()
            if self._config is not None:
                self._config.close()
        finally:
            for gs in list(self.graphs.values()):
                if gs.status != "restarted":
                    self.finish_graph(gs, "failed" if gs.status == "failed" else "ok")
            for c in self.concerns:
                c.stopping()
            if not self.graphs:
                self.writer.warn(nothing_compiled(
                    skipped_frames(self.concern(frames.Frames).records()),
                    self.compiles))
            status = schema.STATUS_FAILED if self.errors else schema.STATUS_OK
            self.writer.finish(status, self.errors[0] if self.errors else None)

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    def progress(self, msg: str) -> None:
        if self.on_progress:
            try:
                self.on_progress(msg)
            except Exception:
                pass

    # -- what every concern uses ----------------------------------------------------------------
    def guarded(self, what: str, fn: Callable[[], Any]) -> Any:
        """Run recording code; a failure to record never breaks the user's compile."""
        try:
            return fn()
        except Exception as e:
            if self.writer:
                self.writer.warn(f"capture could not record {what}: {type(e).__name__}: {e}")
            return None

    @contextlib.contextmanager
    def reentrant(self, key: str) -> Iterator[bool]:
        """Yields True for the outermost call of ``key`` on this thread."""
        depth = self.tls.depth.get(key, 0)
        self.tls.depth[key] = depth + 1
        try:
            yield depth == 0
        finally:
            self.tls.depth[key] = depth

    def current(self) -> GraphState | None:
        """The graph this thread is compiling (or running), if any."""
        return self.tls.graph

    def as_current(self, gs: GraphState | None) -> "_Current":
        """``with s.as_current(gs):`` — ``gs`` is this thread's current graph in the block."""
        return _Current(self.tls, gs)

    @contextlib.contextmanager
    def bare(self) -> Iterator[None]:
        """This thread's calls inside the block as the program makes them without tuidebug:
        compiled modules' calls not watched (``compiled_calls``) and the capture's wrapper
        around each compiled graph passing straight through (``ThreadState.bare``). For the
        whole call's timed calls, which the eager calls they are compared with make with no
        instrumentation either. Only this thread's: another thread calling a compiled module
        or graph meanwhile is traced as ever."""
        tls = self.tls
        was, tls.bare = tls.bare, True
        try:
            yield
        finally:
            tls.bare = was

    def phase(self, phase: str) -> None:
        """The current graph reached compilation phase ``phase`` (schema.PHASES)."""
        gs = self.current()
        assert self.writer is not None
        self.writer.set_phase(phase, gs.graph_id if gs else None)
        if gs is not None:
            gs.phase_starts.setdefault(phase, time.perf_counter() - gs.started)
        if phase == _KILL_AT_PHASE:  # fault injection for tests/faults only
            os.kill(os.getpid(), signal.SIGKILL)

    def new_compile_id(self) -> str:
        """The current Dynamo compile id, or one made up for a direct call of compile_fx."""
        cid = compat.current_compile_id()
        if cid is None:
            self._anon += 1
            cid = f"direct/{self._anon}"
        return cid

    # -- graphs ---------------------------------------------------------------------------------
    def graph_state(self, cid: str, kind: str, piece: int = 0) -> GraphState:
        """The graph ``kind`` of compile ``cid`` (its piece ``piece``: DDPOptimizer compiles
        one per bucket), made (and announced in the trace) if new."""
        gid = layout.graph_id(cid, kind) + (f"-{piece + 1}" if piece else "")
        with self.lock:
            if gid in self.graphs:
                return self.graphs[gid]
            assert self.writer is not None
            gs = GraphState(gid, kind, cid, self.writer.graph(gid), piece=piece)
            self.graphs[gid] = gs
            self.writer.add_graph(gid, kind=kind, compile_id=cid)
            c = self.compiles.setdefault(cid, {"graphs": []})
            c["graphs"].append(gid)
            self.writer.add_compile(cid, {"graphs": c["graphs"]})
            self.write_meta(gs)
            return gs

    def add_stage(self, gs: GraphState, entry: StageEntry) -> None:
        entry["index"] = len(gs.stages)
        gs.stages.append(entry)
        if entry.get("file"):  # passes that changed nothing reach disk with the next write
            self.write_meta(gs)

    def write_meta(self, gs: GraphState) -> None:
        gs.out.write_meta(
            kind=gs.kind, compile_id=gs.compile_id, status=gs.status, stages=gs.stages,
            phase_starts=gs.phase_starts,
            end=gs.ended if gs.ended is not None else time.perf_counter() - gs.started,
            kernels=len(gs.kernel_index),
            fusion={"fused": sum(1 for f in gs.fusion if f["action"] == "fused"),
                    "rejected": sum(1 for f in gs.fusion if f["action"] == "rejected")},
            cudagraphs=gs.cudagraphs, **gs.extra_meta)

    def set_status(self, gs: GraphState, status: str) -> None:
        """``gs`` is now ``status`` (failed, restarted): its meta.json and the manifest say so."""
        gs.status = status
        self.write_meta(gs)
        assert self.writer is not None
        self.writer.set_graph_status(gs.graph_id, status)

    def finish_graph(self, gs: GraphState, status: str) -> None:
        if gs.status in ("ok", "failed") and status == "ok":
            return
        gs.status = status if gs.status != "failed" else "failed"
        if gs.ended is None:
            gs.ended = time.perf_counter() - gs.started
        for c in self.concerns:
            c.graph_finished(gs)
        self.write_meta(gs)
        assert self.writer is not None
        self.writer.set_graph_status(gs.graph_id, gs.status)


def _imported(load: Callable[[], None]) -> Callable[[], bool]:
    """``load`` as a ``guarded`` function: True once it ran (``guarded`` gives None on error)."""
    def run() -> bool:
        load()
        return True
    return run


def _check_empty(out_dir: Path) -> None:
    """A capture writes a new trace: into a missing or empty directory, never over another."""
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise FileExistsError(f"trace directory {out_dir} is not empty (a capture never writes "
                              "over another trace or other files); choose a new directory")


@contextlib.contextmanager
def capture(out_dir: str | Path, *, check_accuracy: bool = True, use_cache: bool = False,
            command: list[str] | None = None) -> Iterator[CaptureSession]:
    """Record every Inductor compile inside the block into the trace directory ``out_dir``."""
    session = CaptureSession(out_dir, check_accuracy=check_accuracy, use_cache=use_cache,
                             command=command).start()
    try:
        yield session
    except BaseException as e:
        session.stop(e)
        raise
    else:
        session.stop()


class _Current:
    """``Session.as_current``: a class, not a generator, for it wraps every call of a compiled
    graph (the capture's wrapper): entering and leaving it costs about 0.5 µs, a generator's
    context manager 2.7 µs (measured interleaved, 7 rounds of 200k)."""

    __slots__ = ("_tls", "_gs", "_prev")

    def __init__(self, tls: Any, gs: GraphState | None) -> None:
        self._tls, self._gs = tls, gs

    def __enter__(self) -> None:
        self._prev = self._tls.graph
        self._tls.graph = self._gs

    def __exit__(self, *exc: object) -> None:
        self._tls.graph = self._prev
