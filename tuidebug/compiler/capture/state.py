"""What a capture keeps per graph, and the shape of one capture concern."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from tuidebug.trace.format.graph_meta import StageEntry
from tuidebug.trace.format.kernel_entry import KernelEntry
from tuidebug.trace.format.writer import GraphWriter

if TYPE_CHECKING:
    from tuidebug.compiler import compat
    from tuidebug.compiler.capture.session import CaptureSession


@dataclass
class GraphState:
    """One graph of the trace (``graphs/<graph_id>/``) while it is being captured."""

    graph_id: str
    kind: str
    compile_id: str
    out: GraphWriter  # writes graphs/<graph_id>/
    stages: list[StageEntry] = field(default_factory=list)
    last_fp: dict[str, Any] | None = None
    last_gm: int | None = None
    last_nodes: list[dict[str, Any]] = field(default_factory=list)
    snapshot_files: dict[str, str] = field(default_factory=dict)  # nodes' digest -> its file
    fusion: list[dict[str, Any]] = field(default_factory=list)
    fusion_seen: set[tuple[str, str, str]] = field(default_factory=set)
    provenance: dict[str, dict[str, Any]] = field(default_factory=dict)
    pre_to_post: dict[str, list[str]] = field(default_factory=dict)
    kernel_index: list[KernelEntry] = field(default_factory=list)
    status: str = "running"
    started: float = field(default_factory=time.perf_counter)
    phase_starts: dict[str, float] = field(default_factory=dict)  # seconds since graph start
    ended: float | None = None
    has_partition: bool = False
    # CUDA graphs asked for by this compile's config, and every reason Inductor gave to skip them
    cudagraphs: dict[str, Any] = field(default_factory=lambda: {"enabled": False, "skipped": []})
    # per-kernel compile and run times (code/timings.json), and the loaded wrapper module
    timings: dict[str, dict[str, Any]] = field(default_factory=dict)
    run_timing: dict[str, Any] = field(default_factory=dict)
    module: Any = None  # weakref to the wrapper module
    # which piece of its compile this graph is: DDPOptimizer compiles one Dynamo graph as several
    # (one per gradient bucket), graphs ``<id>-<kind>``, ``<id>-<kind>-2``, …
    piece: int = 0
    extra_meta: dict[str, Any] = field(default_factory=dict)  # more meta.json keys (ddp_bucket)
    # the tensors its first call wrote in place (a global position, an optimizer's state), named,
    # held weakly: what the whole call's re-runs must put back
    wrote: list[tuple[str, Any]] = field(default_factory=list)

    def replays_cuda_graphs(self, cuda: bool) -> bool:
        """Whether Inductor replays this graph as a CUDA graph: asked for (``reduce-overhead``),
        not skipped, and on CUDA (``cuda``: a CUDA device is in use). A CPU graph (C++ kernels)
        is never captured, and Inductor logs no skip for it: under ``reduce-overhead`` on the
        CPU its kernels run, and are timed, as any graph's."""
        cg = self.cudagraphs
        return (bool(cg.get("enabled")) and not cg.get("skipped") and cuda
                and not any(k.kind == "cpp" for k in self.kernel_index))


@dataclass
class CallMarks:
    """While ``--profile`` clocks a whole call: its clock (``compat.CallClock``) and, per
    compiled graph called, ``(graph id, compile id, start mark, end mark)`` (mark indices);
    with ``backward`` on (a training step), per compiled graph's backward the autograd engine
    ran, ``(compile id, start mark, end mark)``, marked by hooks on its autograd node."""

    clock: Any
    graphs: list[tuple[str, str, int, int]] = field(default_factory=list)
    backward: list[tuple[str, int, int]] | None = None
    fired: dict[str, int] = field(default_factory=lambda: {"graph_marks": 0,
                                                           "backward_hooks": 0})

    def counts(self) -> dict[str, int]:
        """How many graph marks and backward hooks fired so far (never reset): what the
        whole call's timed calls must not have paid."""
        return dict(self.fired)

    def mark_graph(self) -> int:
        """A mark where a compiled graph's call starts or ends."""
        self.fired["graph_marks"] += 1
        return int(self.clock.mark())

    def reset(self, backward: bool = False) -> None:
        self.clock.reset()
        self.graphs.clear()
        self.backward = [] if backward else None

    def watch_backward(self, cid: str, out: Any, inputs: list[Any]) -> None:
        """Mark where the backward of the graph call that returned ``out`` starts and ends:
        a pre-hook and a hook on its autograd node (``compat.compiled_backward_node``: AOTAutograd's
        node behind the outputs, not an earlier graph's that its inputs lead to — ``inputs``:
        their ``grad_fn``s, read before the call; the hooks go with the node when the backward
        frees it). Raises ``compat.NotAvailable`` when this torch has no such node."""
        if self.backward is None:
            return
        from tuidebug.compiler import compat
        from tuidebug.compiler.gradients import tensors

        node = compat.compiled_backward_node(
            [t.grad_fn for t in tensors(out) if t.grad_fn is not None],
            inputs=inputs)
        if node is None:
            return
        clock, done, start, fired = self.clock, self.backward, [-1], self.fired

        def pre(grad_outputs: Any) -> None:
            fired["backward_hooks"] += 1
            start[0] = clock.mark()

        def post(grad_inputs: Any, grad_outputs: Any) -> None:
            fired["backward_hooks"] += 1
            done.append((cid, start[0], clock.mark()))
        node.register_prehook(pre)
        node.register_hook(post)


@dataclass
class FuseCheck:
    """One ``Scheduler.can_fuse`` call in progress: whether Inductor explained a no
    (``WhyNoFuse``), and which backend check said no."""

    explained: bool = False
    backend: str | None = None


class ThreadState(threading.local):
    """What a capture keeps per thread, between its hooks: each thread starts from these
    values (``threading.local`` runs ``__init__`` once per thread)."""

    def __init__(self) -> None:
        self.graph: GraphState | None = None  # the graph this thread compiles (or runs)
        # the graph last code-generated: CUDA graphs are skipped (or not) just after codegen
        self.last_graph: GraphState | None = None
        self.runnable: str | None = None  # torch's fx_graph_runnable, until its graph exists
        # Inductor passes entered and not yet left: (fingerprint on entry, start time)
        self.passes: list[tuple[Any, float]] = []
        self.can_fuse: list[FuseCheck] = []  # can_fuse calls in progress, innermost last
        self.depth: dict[str, int] = {}  # per hook key: calls in progress (``reentrant``)
        # while this thread makes the whole call's timed calls (``CaptureSession.bare``): its
        # compiled graphs called as untraced, its compiled modules' calls not watched; another
        # thread's calls meanwhile are traced as ever
        self.bare = False
        self.wrapped_calls = 0  # this thread's compiled graph calls through the capture's wrapper
        self.watched_calls = 0  # this thread's compiled modules' calls through the watch
        # per graph id, ``wrapped_calls`` at its last call on this thread: the graphs a call
        # ran are those called since the count it started at (``CompiledCall.since``)
        self.last_called: dict[str, int] = {}


class Concern:
    """One concern of a capture (graphs and passes, IR and fusion, kernels, …).

    A concern is a module of ``tuidebug.compiler.capture`` with one subclass of this, listed in
    ``session.CONCERNS``: adding one is adding a module and a line there. ``install`` wraps its
    hook points (named in ``compat``) with the session's patcher, once the script reaches the
    compiler (``install_at_start``: what must be in place before the script runs); the other methods are called
    at points of the capture's life and do nothing unless overridden. A hook records through
    ``session.guarded`` (a failure to record never breaks the user's compile) and asks
    ``compat`` what an Inductor call was about (plain data), never Inductor's objects.
    """

    def __init__(self, session: "CaptureSession") -> None:
        self.session = session

    def install_at_start(self, patcher: "compat.Patcher") -> None:
        """Wrap what must see the script from its first line (public torch only: nothing here
        may import Dynamo or Inductor)."""

    def install(self, patcher: "compat.Patcher") -> None:
        """Wrap this concern's hook points (a missing one becomes a capture warning): called
        when the script first reaches the compiler (``CaptureSession.reach_compiler``), before
        anything compiles."""

    def uninstall(self) -> None:
        """Remove what the patcher does not restore itself (log handlers, feedback savers);
        called at the capture's end whether or not ``install`` ran (the script may never have
        reached the compiler)."""

    def graph_failed(self, gs: GraphState) -> None:
        """``gs`` failed: write what it kept back (its meta.json is written next)."""

    def graph_finished(self, gs: GraphState) -> None:
        """``gs`` is done (or the capture stops): write what it kept back, before meta.json."""

    def stopping(self) -> None:
        """The capture ends: every graph is finished; the final status is written next."""


class LogHandler(logging.Handler):
    """Hands every record of a torch logger to ``on_record``; a failure there is reported to
    ``on_error`` (a warning in the trace), never raised into the compile that logged it."""

    def __init__(self, on_record: Callable[[logging.LogRecord], None],
                 on_error: Callable[[Exception], None]) -> None:
        super().__init__(level=logging.DEBUG)
        self.on_record = on_record
        self.on_error = on_error

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.on_record(record)
        except Exception as e:
            self.on_error(e)
