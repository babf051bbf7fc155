"""Capture: observe the real Inductor while it compiles, and write a trace directory.

``with tuidebug.capture("DIR"): ...`` records every ``torch.compile`` (Inductor backend) made
inside the block. The observers are wrappers installed on Inductor's own functions (see
``compat.py``) plus a handler on the structured trace log (the one behind TORCH_TRACE); they
record and never change what the compiler does, except for two config settings that tuidebug
needs and writes into the trace: ``trace.provenance_tracking_level=1`` (kernel provenance) and,
unless ``use_cache=True``, the graph-level caches off (``compat.CACHES_OFF``: the FX graph cache,
the AOTAutograd cache, Dynamo's local PGO — a hit would skip the work a trace records; the kernel
code cache stays on).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import statistics
import threading
import time
import traceback
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import torch

from tuidebug.compiler import accuracy, compat, snapshot
from tuidebug.trace import layout
from tuidebug.trace import schema
from tuidebug.trace.writer import GraphWriter, TraceWriter

TUIDEBUG_CONFIG = {"trace.provenance_tracking_level": 1}

NOTHING_COMPILED = ("nothing was compiled during the capture: no torch.compile'd function was "
                    "called (torch.compile is lazy), or it had been compiled before the capture "
                    "started")

# Testing only (like Inductor's inject_relu_bug_TESTING_ONLY): SIGKILL this process when the
# capture reaches this phase, so that tests can check what a crash leaves on disk.
_KILL_AT_PHASE = os.environ.get("TUIDEBUG_TESTING_KILL_AT_PHASE")


@dataclass
class _GraphState:
    graph_id: str
    kind: str
    compile_id: str
    out: GraphWriter  # writes graphs/<graph_id>/
    stages: list[dict[str, Any]] = field(default_factory=list)
    last_fp: dict[str, Any] | None = None
    last_gm: int | None = None
    last_nodes: list[dict[str, Any]] = field(default_factory=list)
    fusion: list[dict[str, Any]] = field(default_factory=list)
    fusion_seen: set[tuple[str, str, str]] = field(default_factory=set)
    provenance: dict[str, dict[str, Any]] = field(default_factory=dict)
    pre_to_post: dict[str, list[str]] = field(default_factory=dict)
    kernel_index: list[dict[str, Any]] = field(default_factory=list)
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


class CaptureSession:
    """One capture: hooks installed on ``start()``, removed on ``stop()``.

    ``user_sets``: Inductor flags the caller sets for this capture (it applies them itself); a
    graph-level cache flag among them, and the caches layered on it, is left to the caller
    (``compat.caches_off``) instead of being turned off.
    """

    def __init__(self, out_dir: str | Path, *, check_accuracy: bool = True,
                 use_cache: bool = False, command: list[str] | None = None,
                 on_progress: Callable[[str], None] | None = None,
                 user_sets: Mapping[str, Any] | None = None,
                 accuracy_tol: float | None = None) -> None:
        self.out_dir = Path(out_dir)
        self.check_accuracy = check_accuracy
        self.accuracy_tol = accuracy_tol  # the judge's tolerance; None: each dtype's default
        self.use_cache = use_cache
        self.user_sets = dict(user_sets or {})
        self.command = command
        self.on_progress = on_progress
        self.writer: TraceWriter | None = None
        self._tls = threading.local()
        self._lock = threading.RLock()
        self._choice_errors: dict[int, tuple[Any, str]] = {}  # id(choice) -> (choice, why it failed)
        self._graphs: dict[str, _GraphState] = {}
        self._frame_graph: dict[str, _GraphState] = {}
        self._compiles: dict[str, dict[str, Any]] = {}
        self._runtime: dict[str, Any] = {"checks": {}}
        self._stack_cache: dict[str, Any] = {}
        self._config_written = False
        self._patcher: compat.Patcher | None = None
        self._config_ctx: Any = None
        self._log_handler: logging.Handler | None = None
        self._remove_feedback: Callable[[], None] | None = None
        self.errors: list[dict[str, Any]] = []
        self._anon = 0
        self._cpp_builds: dict[str, float] = {}  # binary -> seconds its build took
        self._triton_compiles: dict[str, float] = {}  # Triton kernel name -> compile seconds
        self._compile_hooks: set[str] = set()  # kernel builds observed: "cpp", "triton"

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> "CaptureSession":
        _check_empty(self.out_dir)
        self.writer = TraceWriter(self.out_dir, command=self.command, versions={
            "torch": compat.TORCH_VERSION, "triton": compat.triton_version(),
            "cuda": torch.version.cuda})
        compat.import_inductor()
        patches = dict(TUIDEBUG_CONFIG)
        caches_off = {} if self.use_cache else compat.caches_off(self.user_sets)
        recorded = dict(patches, **caches_off)
        self.writer.update(tuidebug_config=recorded, check_accuracy=self.check_accuracy,
                           accuracy_tol=self.accuracy_tol)
        self._config_ctx = contextlib.ExitStack()
        self._config_ctx.enter_context(compat.inductor_config_patch(patches))
        if caches_off:
            self._config_ctx.enter_context(compat.caches_off_patch(caches_off))
        self._patcher = compat.Patcher(self.writer.warn)
        self._install()
        return self

    def stop(self, exc: BaseException | None = None) -> None:
        assert self.writer is not None
        try:
            if self._patcher:
                self._patcher.restore()
            if self._remove_feedback:
                self._remove_feedback()
            if self._log_handler:
                compat.structured_trace_logger().removeHandler(self._log_handler)
            if self._config_ctx is not None:
                self._config_ctx.__exit__(None, None, None)
        finally:
            for gs in list(self._graphs.values()):
                if gs.status != "restarted":
                    self._finish_graph(gs, "failed" if gs.status == "failed" else "ok")
            self._write_runtime()
            mismatches = {cid: c for cid, c in self._runtime["checks"].items()
                          if c.get("close") is False}
            if mismatches and not self.errors:
                cid, c = next(iter(mismatches.items()))
                graphs = c.get("graphs") or []
                self.errors.append({
                    "phase": "accuracy", "type": "AccuracyMismatch",
                    "message": f"compiled output differs from eager for compile {cid}: "
                               f"{c.get('detail') or ''} (rule {c.get('rule')}; max abs err "
                               f"{c.get('max_abs'):.3g})",
                    "traceback": "", "graph": graphs[0] if graphs else None, "compile_id": cid})
                self.writer.update(accuracy_mismatch=sorted(mismatches))
            if not self._graphs:
                self.writer.warn(NOTHING_COMPILED)
            status = schema.STATUS_FAILED if self.errors else schema.STATUS_OK
            self.writer.finish(status, self.errors[0] if self.errors else None)

    @property
    def graph_count(self) -> int:
        return len(self._graphs)

    def _progress(self, msg: str) -> None:
        if self.on_progress:
            try:
                self.on_progress(msg)
            except Exception:
                pass

    # -- hooks ----------------------------------------------------------------------------------
    def _install(self) -> None:
        p = self._patcher
        assert p is not None
        p.wrap(compat.COMPILE_FX, self._wrap_compile_fx)
        p.wrap(compat.PRE_GRAD_PASSES, lambda f: self._wrap_stage_fn(f, "pre_grad", None, "pre_grad"))
        p.wrap(compat.JOINT_GRAPH_PASSES,
               lambda f: self._wrap_stage_fn(f, "joint_graph_passes", "aot_joint", "joint_graph"))
        p.wrap(compat.POST_GRAD_PASSES, lambda f: self._wrap_stage_fn(f, "post_grad", None, "post_grad"))
        p.wrap(compat.CODEGEN_AND_COMPILE, self._wrap_codegen_and_compile)
        p.wrap(compat.GRAPH_LOWERING_RUN, lambda f: self._wrap_phase(f, "lowering"))
        p.wrap(compat.PASS_OBSERVER_ENTER, self._wrap_observer_enter)
        p.wrap(compat.PASS_OBSERVER_EXIT, self._wrap_observer_exit)
        p.wrap(compat.IR_PRE_FUSION, lambda f: self._wrap_ir(f, "pre"), everywhere=True)
        p.wrap(compat.IR_POST_FUSION, lambda f: self._wrap_ir(f, "post"), everywhere=True)
        p.wrap(compat.WHY_NO_FUSE, self._wrap_why_no_fuse)
        p.wrap(compat.FUSE_TWO_NODES, self._wrap_fuse_two_nodes)
        p.wrap(compat.CAN_FUSE, self._wrap_can_fuse)
        for dotted in compat.BACKEND_CAN_FUSE:
            p.wrap(dotted, lambda f, m=dotted.rsplit(".", 1)[-1]: self._wrap_backend_can_fuse(f, m))
        p.wrap(compat.KERNEL_PROVENANCE, self._wrap_provenance, everywhere=True)
        p.wrap(compat.BENCHMARK_CHOICE, lambda f: self._wrap_choice_step(f, classmethod_=True))
        p.wrap(compat.CUDAGRAPH_SKIP, self._wrap_cudagraph_skip, everywhere=True)
        p.wrap(compat.COMPILE_TO_MODULE, self._wrap_compile_to_module)
        if p.wrap(compat.CPP_BUILD, self._wrap_cpp_build):
            self._compile_hooks.add("cpp")
        if compat.triton_available():
            p.wrap(compat.TRITON_RUN, self._wrap_triton_run)
            p.wrap(compat.TRITON_BENCHMARK_ALL, self._wrap_triton_benchmark)
            p.wrap(compat.TEMPLATE_PRECOMPILE,
                   lambda f: self._wrap_choice_step(f, classmethod_=False))
            if p.wrap(compat.TRITON_COMPILE_METRIC, self._wrap_triton_compile_metric):
                self._compile_hooks.add("triton")
        try:
            self._remove_feedback = compat.add_autotune_feedback(self._on_autotune)
        except compat.NotAvailable as e:
            self.writer.warn(f"autotune choices: {e}")
        try:
            logger = compat.structured_trace_logger()
            self._log_handler = _StructuredHandler(self)
            logger.addHandler(self._log_handler)
        except compat.NotAvailable as e:
            self.writer.warn(f"structured events (metrics, guards, output code): {e}")

    def _guarded(self, what: str, fn: Callable[[], Any]) -> Any:
        """Run recording code; a failure to record never breaks the user's compile."""
        try:
            return fn()
        except Exception as e:
            if self.writer:
                self.writer.warn(f"capture could not record {what}: {type(e).__name__}: {e}")
            return None

    @contextlib.contextmanager
    def _reentrant(self, key: str) -> Iterator[bool]:
        """Yields True for the outermost call of ``key`` on this thread."""
        depth = getattr(self._tls, key, 0)
        setattr(self._tls, key, depth + 1)
        try:
            yield depth == 0
        finally:
            setattr(self._tls, key, depth)

    def _current(self) -> _GraphState | None:
        return getattr(self._tls, "graph", None)

    @contextlib.contextmanager
    def _as_current(self, gs: _GraphState | None) -> Iterator[None]:
        prev = getattr(self._tls, "graph", None)
        self._tls.graph = gs
        try:
            yield
        finally:
            self._tls.graph = prev

    def _phase(self, phase: str) -> None:
        gs = self._current()
        assert self.writer is not None
        self.writer.set_phase(phase, gs.graph_id if gs else None)
        if gs is not None:
            gs.phase_starts.setdefault(phase, time.perf_counter() - gs.started)
        if phase == _KILL_AT_PHASE:  # fault injection for tests/faults only
            os.kill(os.getpid(), signal.SIGKILL)

    # compile_fx: one Dynamo graph enters Inductor
    def _wrap_compile_fx(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        def compile_fx(model_: Any, example_inputs_: Any, *args: Any, **kwargs: Any) -> Any:
            with self._reentrant("compile_fx") as outer:
                if not outer:
                    # compile_fx calls itself inside the config patches of a torch.compile mode
                    # (max-autotune, …): the config in force for this compile
                    self._guarded("the Inductor config", self._write_config)
                    return orig(model_, example_inputs_, *args, **kwargs)
                gs = self._guarded("the Dynamo graph", lambda: self._begin_compile(model_, example_inputs_))
                with self._as_current(gs):
                    try:
                        compiled = orig(model_, example_inputs_, *args, **kwargs)
                    except BaseException as e:
                        self._record_error(e, gs)
                        raise
                    finally:  # a graph-cache hit skips the pre-grad passes that write it
                        self._guarded("the Inductor config", self._write_config)
                if gs is not None and self.check_accuracy and callable(compiled):
                    compiled = self._wrap_runtime(compiled, model_, gs)
                return compiled
        return compile_fx

    def _begin_compile(self, gm: Any, example_inputs: Any) -> _GraphState:
        cid = compat.current_compile_id()
        if cid is None:
            self._anon += 1
            cid = f"direct/{self._anon}"
        needs_grad = torch.is_grad_enabled() and any(
            isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs or ())
        kind = "forward" if needs_grad else "inference"
        gs = self._graph_state(cid, kind)
        self._frame_graph[cid] = gs
        self._progress(f"compiling graph {gs.graph_id}")
        with self._as_current(gs):
            self._phase("dynamo")
            self._snapshot(gs, gm, "dynamo", kind="stage")
        return gs

    def _graph_state(self, cid: str, kind: str) -> _GraphState:
        gid = f"{layout.safe_id(cid)}-{kind}"
        with self._lock:
            if gid in self._graphs:
                return self._graphs[gid]
            assert self.writer is not None
            gs = _GraphState(gid, kind, cid, self.writer.graph(gid))
            self._graphs[gid] = gs
            self.writer.add_graph(gid, kind=kind, compile_id=cid)
            c = self._compiles.setdefault(cid, {"graphs": []})
            c["graphs"].append(gid)
            self.writer.add_compile(cid, {"graphs": c["graphs"]})
            self._write_meta(gs)
            return gs

    def _wrap_stage_fn(self, orig: Callable[..., Any], after: str, before: str | None,
                       phase: str) -> Callable[..., Any]:
        def stage_fn(gm: Any, *args: Any, **kwargs: Any) -> Any:
            with self._reentrant(f"stage_{after}") as outer:
                gs = self._current() if outer else None
                if gs is not None:
                    self._phase(phase)
                    if before:
                        self._guarded(before, lambda: self._snapshot(gs, gm, before, kind="stage"))
                    if phase == "pre_grad":
                        self._guarded("the Inductor config", self._write_config)
                t0 = time.perf_counter()
                result = orig(gm, *args, **kwargs)
                if gs is not None:
                    out_gm = result if isinstance(result, torch.fx.GraphModule) else gm
                    self._guarded(after, lambda: self._snapshot(
                        gs, out_gm, after, kind="stage", duration=time.perf_counter() - t0))
                return result
        return stage_fn

    def _wrap_codegen_and_compile(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        session = self

        def codegen_and_compile(self_: Any, gm: Any, example_inputs: Any, inputs_to_check: Any,
                                graph_kwargs: Any, *args: Any, **kwargs: Any) -> Any:
            gs = session._guarded("the partitioned graph",
                                  lambda: session._begin_graph(gm, graph_kwargs))
            session._tls.last_graph = gs  # CUDA graphs are skipped (or not) just after codegen
            with session._as_current(gs):
                try:
                    out = orig(self_, gm, example_inputs, inputs_to_check, graph_kwargs,
                               *args, **kwargs)
                except BaseException as e:
                    session._record_error(e, gs)
                    raise
                if gs is not None:
                    session._guarded("graph results", lambda: session._finish_graph(gs, "ok"))
                return out
        return codegen_and_compile

    def _begin_graph(self, gm: Any, graph_kwargs: dict[str, Any]) -> _GraphState:
        cid = compat.current_compile_id() or (self._current().compile_id if self._current()
                                              else "unknown")
        if graph_kwargs.get("is_backward"):
            kind = "backward"
        elif graph_kwargs.get("is_inference"):
            kind = "inference"
        else:
            kind = "forward"
        frame = self._frame_graph.get(cid)
        if kind != "backward" and frame is not None and not frame.has_partition:
            gs = frame  # the graph that already holds the Dynamo / pre-grad / joint stages
            if gs.kind != kind:
                gs.kind = kind
                self._write_meta(gs)
        else:
            gs = self._graph_state(cid, kind)
        gs.has_partition = True
        gs.status = "running"
        gs.cudagraphs["enabled"] = compat.cuda_graphs_enabled()
        self._write_runnable(gs)
        with self._as_current(gs):
            self._phase("partition")
            self._snapshot(gs, gm, f"aot_{kind}", kind="stage")
        return gs

    def _write_runnable(self, gs: _GraphState) -> None:
        """Torch's own standalone script of the graph (``fx_graph_runnable``), for the minifier."""
        code = getattr(self._tls, "runnable", None)
        if code:
            self._tls.runnable = None
            gs.out.write_runnable(code)

    def _wrap_phase(self, orig: Callable[..., Any], phase: str) -> Callable[..., Any]:
        def fn(*args: Any, **kwargs: Any) -> Any:
            self._phase(phase)
            return orig(*args, **kwargs)
        return fn

    # GraphTransformObserver: one Inductor FX pass
    def _wrap_observer_enter(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        session = self

        def __enter__(self_: Any) -> Any:
            gs = session._current()
            if gs is not None:
                fp = session._guarded("a pass", lambda: snapshot.fingerprint(self_.gm))
                stack = session._tls.__dict__.setdefault("passes", [])
                stack.append((fp, time.perf_counter()))
            return orig(self_)
        return __enter__

    def _wrap_observer_exit(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        session = self

        def __exit__(self_: Any, typ: Any, value: Any, tb: Any) -> Any:
            result = orig(self_, typ, value, tb)
            gs = session._current()
            stack = session._tls.__dict__.get("passes")
            if gs is not None and stack:
                fp_enter, t0 = stack.pop()
                duration = time.perf_counter() - t0
                if typ is None and fp_enter is not None:
                    session._guarded(f"pass {self_.passname}", lambda: session._record_pass(
                        gs, self_, fp_enter, duration))
            return result
        return __exit__

    def _record_pass(self, gs: _GraphState, obs: Any, fp_enter: dict[str, Any],
                     duration: float) -> None:
        fp = snapshot.fingerprint(obs.gm)
        name = str(obs.passname)
        subsystem = getattr(obs, "subsystem", None)
        if fp == fp_enter or (fp == gs.last_fp and id(obs.gm) == gs.last_gm):
            note = None if fp == fp_enter else "changes recorded by the passes inside it"
            self._add_stage(gs, {"name": name, "kind": "pass", "subsystem": subsystem,
                                 "duration_s": duration, "changed": False,
                                 **({"note": note} if note else {})})
            return
        self._snapshot(gs, obs.gm, name, kind="pass", subsystem=subsystem, duration=duration,
                       fp=fp, base_fp=fp_enter)

    # -- snapshots ------------------------------------------------------------------------------
    def _snapshot(self, gs: _GraphState, gm: Any, name: str, *, kind: str,
                  subsystem: str | None = None, duration: float | None = None,
                  fp: dict[str, Any] | None = None, base_fp: dict[str, Any] | None = None) -> None:
        fp = fp if fp is not None else snapshot.fingerprint(gm)
        if gs.last_fp is not None and id(gm) == gs.last_gm:
            base = gs.last_fp
        else:
            base = base_fp if base_fp is not None else gs.last_fp
        changes = snapshot.diff_fingerprints(base, fp) if base is not None else {
            "added": list(fp), "removed": [], "changed": []}
        data = snapshot.graph_to_json(gm, graph_id=gs.graph_id, stage=name,
                                      cache=self._stack_cache)
        data["changes"] = changes
        fname = gs.out.write_stage(len(gs.stages), name, data)
        gs.last_fp, gs.last_gm, gs.last_nodes = fp, id(gm), data["nodes"]
        self._add_stage(gs, {
            "name": name, "kind": kind, "subsystem": subsystem, "duration_s": duration,
            "changed": base is None or any(changes.values()), "file": fname,
            "nodes": len(data["nodes"]),
            "counts": {k: len(v) for k, v in changes.items()}})

    def _add_stage(self, gs: _GraphState, entry: dict[str, Any]) -> None:
        entry["index"] = len(gs.stages)
        gs.stages.append(entry)
        if entry.get("file"):  # passes that changed nothing reach disk with the next write
            self._write_meta(gs)

    def _write_meta(self, gs: _GraphState) -> None:
        gs.out.write_meta(
            kind=gs.kind, compile_id=gs.compile_id, status=gs.status, stages=gs.stages,
            phase_starts=gs.phase_starts,
            end=gs.ended if gs.ended is not None else time.perf_counter() - gs.started,
            kernels=len(gs.kernel_index),
            fusion={"fused": sum(1 for f in gs.fusion if f["action"] == "fused"),
                    "rejected": sum(1 for f in gs.fusion if f["action"] == "rejected")},
            cudagraphs=gs.cudagraphs)

    def _write_config(self) -> None:
        if self._config_written:
            return
        values = compat.inductor_config_values()
        try:
            defaults = compat.inductor_config_defaults()
        except compat.NotAvailable as e:
            assert self.writer is not None
            self.writer.warn(f"config defaults: {e}")
            defaults = {}
        changed = {k: {"value": v, "default": defaults[k]} for k, v in values.items()
                   if k in defaults and _jsonish(v) != _jsonish(defaults[k])}
        assert self.writer is not None
        self.writer.write_config({
            "values": {k: _jsonish(v) for k, v in values.items()},
            "changed": {k: {"value": _jsonish(d["value"]), "default": _jsonish(d["default"])}
                        for k, d in changed.items()},
            "set_by_tuidebug": sorted(k for k in changed if k in TUIDEBUG_CONFIG
                                      or k in compat.CACHES_OFF),
        })
        self._config_written = True

    # -- IR and fusion --------------------------------------------------------------------------
    def _wrap_ir(self, orig: Callable[..., Any], which: str) -> Callable[..., Any]:
        def log_ir(nodes: Any) -> Any:
            gs = self._current()
            if gs is not None:
                self._phase("scheduling" if which == "pre" else "codegen")
                self._guarded(f"IR {which} fusion", lambda: self._write_ir(gs, nodes, which))
            return orig(nodes)
        return log_ir

    def _write_ir(self, gs: _GraphState, nodes: Any, which: str) -> None:
        gs.out.write_ir(which, [compat.scheduler_node_json(n) for n in nodes],
                        "\n\n".join(compat.scheduler_node_text(n) for n in nodes) + "\n")
        if which == "post":
            self._flush_fusion(gs)

    def _wrap_why_no_fuse(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        session = self

        def __call__(self_: Any, reason: str, *args: Any) -> Any:
            out = orig(self_, reason, *args)
            gs = session._current()
            if gs is not None:
                checks = session._tls.__dict__.get("can_fuse")
                if checks:
                    checks[-1]["explained"] = True
                session._guarded("a fusion decision", lambda: session._reject(
                    gs, self_.name1, self_.name2, reason % args if args else reason))
            return out
        return __call__

    def _reject(self, gs: _GraphState, name1: str, name2: str, reason: str) -> None:
        key = (name1, name2, reason)
        if key not in gs.fusion_seen:
            gs.fusion_seen.add(key)
            gs.fusion.append({"action": "rejected", "node1": name1, "node2": name2,
                              "reason": reason})

    def _wrap_can_fuse(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        """A pair Scheduler.can_fuse turns down without a WhyNoFuse reason is recorded too,
        naming the backend check that said no when one did."""
        session = self

        def can_fuse(self_: Any, node1: Any, node2: Any, *args: Any, **kwargs: Any) -> Any:
            gs = session._current()
            if gs is None:
                return orig(self_, node1, node2, *args, **kwargs)
            checks = session._tls.__dict__.setdefault("can_fuse", [])
            check: dict[str, Any] = {"explained": False, "backend": None}
            checks.append(check)
            try:
                ok = orig(self_, node1, node2, *args, **kwargs)
            finally:
                checks.pop()
            if not ok and not check["explained"]:
                who = f"backend {check['backend']}" if check["backend"] else "Scheduler.can_fuse"
                session._guarded("a fusion decision", lambda: session._reject(
                    gs, node1.get_name(), node2.get_name(),
                    f"{who} returned False (no reason given)"))
            return ok
        return can_fuse

    def _wrap_backend_can_fuse(self, orig: Callable[..., Any], method: str) -> Callable[..., Any]:
        session = self

        def backend_check(self_: Any, node1: Any, node2: Any, *args: Any, **kwargs: Any) -> Any:
            ok = orig(self_, node1, node2, *args, **kwargs)
            checks = session._tls.__dict__.get("can_fuse")
            if not ok and checks and checks[-1]["backend"] is None:
                checks[-1]["backend"] = f"{type(self_).__name__}.{method}"
            return ok
        return backend_check

    def _wrap_fuse_two_nodes(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        session = self

        def fuse_two_nodes(self_: Any, node1: Any, node2: Any, *args: Any, **kwargs: Any) -> Any:
            n1, n2 = node1.get_name(), node2.get_name()
            out = orig(self_, node1, node2, *args, **kwargs)
            gs = session._current()
            if gs is not None:
                session._guarded("a fusion", lambda: gs.fusion.append({
                    "action": "fused", "node1": n1, "node2": n2, "result": out.get_name(),
                    "members": [n.get_name() for n in out.get_nodes()]}))
            return out
        return fuse_two_nodes

    def _flush_fusion(self, gs: _GraphState) -> None:
        gs.out.write_fusion(gs.fusion)

    # -- kernels and provenance -----------------------------------------------------------------
    def _wrap_provenance(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        def set_kernel_post_grad_provenance_tracing(node_schedule: Any, kernel_name: str,
                                                    is_extern: bool = False) -> Any:
            handle = orig(node_schedule, kernel_name, is_extern)
            gs = self._current()
            if gs is not None:
                def rec() -> None:
                    key = f"{kernel_name}:{handle}" if handle is not None else kernel_name
                    info = compat.kernel_provenance_args(node_schedule, is_extern)
                    gs.provenance[key] = {"kernel": kernel_name, "extern": is_extern, **info}
                self._guarded("kernel provenance", rec)
            return handle
        return set_kernel_post_grad_provenance_tracing

    def on_output_code(self, code: str, gs: _GraphState | None) -> None:
        if gs is None:
            return
        gs.kernel_index = gs.out.write_output_code(code)
        self._write_provenance(gs)
        self._write_meta(gs)
        self._phase("kernel_compile")  # the code is on disk; now the kernels get compiled

    def _write_provenance(self, gs: _GraphState) -> None:
        fx_source = {n["name"]: n.get("source") for n in gs.last_nodes}
        gs.out.write_provenance(layout.provenance_json(
            gs.kernel_index, gs.provenance, fx_source, gs.pre_to_post, self._stack_cache))

    # -- autotuning -----------------------------------------------------------------------------
    def _on_autotune(self, timings: Any, name: str, input_nodes: Any, choices: Any,
                     *rest: Any) -> None:
        gs = self._current()
        if gs is None:
            return

        def rec() -> None:
            entries = []
            for c in choices:
                info = compat.choice_info(c)
                t = timings.get(c) if hasattr(timings, "get") else None
                failed = self._choice_errors.pop(id(c), None)
                if t is None or t == float("inf"):
                    info["error"] = failed[1] if failed else "failed or skipped (no timing)"
                    info["time_ms"] = None
                else:
                    info["time_ms"] = float(t)
                entries.append(info)
            timed = [e for e in entries if e["time_ms"] is not None]
            winner = min(timed, key=lambda e: e["time_ms"])["name"] if timed else None
            gs.out.append_autotune({
                "op": name, "inputs": [compat.ir_node_size(n) for n in input_nodes or []],
                "choices": entries, "winner": winner})
        self._guarded("autotune choices", rec)

    def _choice_failed(self, choice: Any, e: BaseException) -> None:
        """Keep why one autotune choice failed, for the feedback that reports its infinite time."""
        msg = str(e).strip() or type(e).__name__
        with self._lock:  # templates precompile in a thread pool
            self._choice_errors[id(choice)] = (choice, _clip_message(
                f"{type(e).__name__}: {msg}", 1000, 1000))

    def _wrap_choice_step(self, orig: Callable[..., Any], *, classmethod_: bool) -> Callable[..., Any]:
        """Wrap a step that raises when one choice fails: the classmethod
        ``benchmark_choice(cls, choice, …)`` or the method ``TritonTemplateCaller.precompile(choice)``
        (``orig`` comes bound to the class for the classmethod)."""
        session = self

        def step(first: Any, *args: Any, **kwargs: Any) -> Any:
            choice = args[0] if classmethod_ else first
            try:
                return orig(*args, **kwargs) if classmethod_ else orig(first, *args, **kwargs)
            except Exception as e:
                session._choice_failed(choice, e)
                raise
        return step

    # -- CUDA graphs ----------------------------------------------------------------------------
    def _wrap_cudagraph_skip(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        session = self

        def log_cudagraph_skip(msg: Any, *args: Any, **kwargs: Any) -> Any:
            gs = session._current() or getattr(session._tls, "last_graph", None)
            if gs is not None:
                def rec() -> None:
                    gs.cudagraphs["skipped"].append(_clip_message(str(msg), 1000, 1000))
                    session._write_meta(gs)
                session._guarded("a CUDA graphs skip", rec)
            return orig(msg, *args, **kwargs)
        return log_cudagraph_skip

    # -- Triton launches (GPU) -------------------------------------------------------------------
    def _graph_for_kernel(self, ident: dict[str, Any]) -> _GraphState | None:
        cid = ident.get("compile_id")
        if cid is not None:
            if ident.get("is_backward"):
                gs = self._graphs.get(f"{layout.safe_id(cid)}-backward")
            else:
                gs = self._frame_graph.get(cid)
            if gs is not None:
                return gs
        return self._current()

    def _wrap_triton_run(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        session = self
        seen: set[int] = set()

        def run(self_: Any, *args: Any, **kwargs: Any) -> Any:
            out = orig(self_, *args, **kwargs)
            if id(self_) not in seen:
                seen.add(id(self_))
                session._guarded("a Triton launch", lambda: session._record_launch(self_, args))
            return out
        return run

    def _record_launch(self, autotuner: Any, args: tuple[Any, ...]) -> None:
        ident = compat.triton_autotuner_identity(autotuner)
        if compat.is_autotune_choice_kernel(ident["kernel"]):
            return  # a max-autotune choice being benchmarked, not a kernel of the graph
        gs = self._graph_for_kernel(ident)
        if gs is None:
            return
        launchers = compat.triton_launchers(autotuner)
        launch = None
        if len(launchers) == 1:
            launch = {**compat.triton_launcher_info(launchers[0]),
                      **compat.triton_launch_grid(autotuner, launchers[0], args)}
        gs.out.append_launch({
            **ident, "launchers": len(launchers), "launch": launch})

    def _wrap_triton_benchmark(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        session = self

        def benchmark_all_configs(self_: Any, *args: Any, **kwargs: Any) -> Any:
            timings = orig(self_, *args, **kwargs)

            def rec() -> None:
                ident = compat.triton_autotuner_identity(self_)
                if compat.is_autotune_choice_kernel(ident["kernel"]):
                    return  # a max-autotune choice's own configs: part of benchmarking that choice
                gs = session._graph_for_kernel(ident)
                if gs is None or not isinstance(timings, dict):
                    return
                choices = []
                for launcher, t in timings.items():
                    info = compat.triton_launcher_info(launcher)
                    ok = isinstance(t, (int, float)) and t != float("inf")
                    choices.append({"name": ", ".join(f"{k}={v}" for k, v in info["config"].items())
                                    + f", num_warps={info['num_warps']}, num_stages={info['num_stages']}",
                                    "kind": "TritonConfig", "config": info,
                                    "time_ms": float(t) if ok else None,
                                    **({} if ok else {"error": "failed or skipped (no timing)"})})
                timed = [c for c in choices if c["time_ms"] is not None]
                gs.out.append_autotune({
                    "op": ident["kernel"], "kind": "triton_heuristics", "inputs": [],
                    "choices": choices,
                    "winner": min(timed, key=lambda c: c["time_ms"])["name"] if timed else None})
            session._guarded("Triton autotuning", rec)
            return timings
        return benchmark_all_configs

    # -- per-kernel times (code/timings.json) ---------------------------------------------------
    def _wrap_cpp_build(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        """Time each C++ kernel build (in a compile-pool thread, or inline); a call that finds
        the binary already there (Inductor's kernel cache) builds nothing and is not recorded."""
        session = self

        def build(lock_path: Any, builders: Any, *args: Any, **kwargs: Any) -> Any:
            target = compat.cpp_build_target(builders)
            fresh = target is not None and not os.path.exists(target)
            t0 = time.perf_counter()
            out = orig(lock_path, builders, *args, **kwargs)
            if fresh:
                with session._lock:
                    session._cpp_builds[str(target)] = time.perf_counter() - t0
            return out
        return build

    def _wrap_triton_compile_metric(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        session = self

        def emit(kernel_name: Any, info: Any, *args: Any, **kwargs: Any) -> Any:
            elapsed_us = info.get("compile_time_us") if isinstance(info, dict) else None
            if isinstance(elapsed_us, (int, float)):
                with session._lock:
                    session._triton_compiles[str(kernel_name)] = elapsed_us / 1e6
            return orig(kernel_name, info, *args, **kwargs)
        return emit

    def _wrap_compile_to_module(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        session = self

        def compile_to_module(self_: Any, *args: Any, **kwargs: Any) -> Any:
            mod = orig(self_, *args, **kwargs)
            gs = session._current()
            if gs is not None:
                session._guarded("kernel compile times", lambda: session._record_module(gs, mod))
            return mod
        return compile_to_module

    def _record_module(self, gs: _GraphState, mod: Any) -> None:
        """The graph's wrapper module is loaded, its kernels compiled: each one's compile time."""
        with self._lock:
            # builds seen since the last module: this one's (a later graph reusing a kernel
            # gets it from the in-process cache)
            triton, self._triton_compiles = self._triton_compiles, {}
            builds, self._cpp_builds = self._cpp_builds, {}
        gs.module = weakref.ref(mod)
        for k in gs.kernel_index:
            name = str(k.get("name"))
            if k.get("kind") != "extern" and name in vars(mod):
                gs.timings[name] = _compile_time(name, vars(mod)[name], triton, builds,
                                                 self._compile_hooks)
        self._write_timings(gs)

    def _time_kernels(self, cid: str, again: Callable[[], Any]) -> None:
        """After the eager comparison of compile ``cid``: run its compiled graph again (a few
        times, within a small budget) with every generated kernel timed."""
        graphs = [g for g in list(self._graphs.values()) if g.compile_id == cid and g.timings
                  and g.module is not None and g.module() is not None]
        if any(g.cudagraphs["enabled"] for g in graphs):
            for g in graphs:
                g.run_timing = {"runs": 0, "note": "not timed: under CUDA graphs the kernels "
                                                   "are replayed without Python calls"}
                self._write_timings(g)
            return
        targets = [((g.graph_id, n), g.module(), n) for g in graphs for n in g.timings]
        if not targets:
            return
        with compat.KernelCallTimer(targets) as timer:
            runs, elapsed, error = _timed_runs(again)
        for g in graphs:
            calls = {n: timer.calls.get((g.graph_id, n)) or [] for n in g.timings} if runs else {}
            for name, entry in g.timings.items():
                entry.update(_run_times(calls.get(name) or [], runs))
            g.run_timing = {"runs": runs, "elapsed_s": elapsed}
            if error or not any(calls.values()):
                g.run_timing["note"] = error or _NOT_RUN_NOTE
            self._write_timings(g)

    def _write_timings(self, gs: _GraphState) -> None:
        gs.out.write_timings(gs.timings, gs.run_timing)

    # -- runtime --------------------------------------------------------------------------------
    def _wrap_runtime(self, compiled: Callable[..., Any], gm: Any,
                      gs: _GraphState) -> Callable[..., Any]:
        cid = gs.compile_id

        def record(result: dict[str, Any]) -> None:
            self._runtime["checks"][cid] = {"graphs": self._compiles.get(cid, {}).get("graphs", []),
                                            **result}
            self._guarded("the eager comparison", self._write_runtime)

        checked = accuracy.checked(compiled, gm, record, time_kernels=lambda again: self._guarded(
            "kernel run times", lambda: self._time_kernels(cid, again)), tol=self.accuracy_tol,
            same_random=bool(compat.inductor_config_value("fallback_random")))

        def run(*args: Any) -> Any:
            with self._as_current(gs):
                try:
                    return checked(*args)
                except BaseException as e:
                    if not isinstance(e, (KeyboardInterrupt, SystemExit)):
                        self._phase("runtime")
                        self._record_error(e, gs, phase="runtime")
                    raise
        if getattr(checked, "_boxed_call", False):
            run._boxed_call = True  # type: ignore[attr-defined]
        return run

    def _write_runtime(self) -> None:
        assert self.writer is not None
        self.writer.write_runtime(self._runtime)

    # -- errors and completion ------------------------------------------------------------------
    def _record_error(self, e: BaseException, gs: _GraphState | None,
                      phase: str | None = None) -> None:
        if getattr(e, "_tuidebug_recorded", False) or (gs is not None and gs.status == "failed"):
            return  # the same failure, propagating through an outer hook
        if compat.is_restart(e):
            if gs is not None:
                gs.status = "restarted"
                self._write_meta(gs)
                assert self.writer is not None
                self.writer.set_graph_status(gs.graph_id, "restarted")
            return
        try:
            e._tuidebug_recorded = True  # type: ignore[attr-defined]
        except Exception:
            pass
        assert self.writer is not None
        inner = e
        while getattr(inner, "inner_exception", None) is not None:  # BackendCompilerFailed
            inner = inner.inner_exception  # type: ignore[attr-defined]
        err = {
            "phase": phase or self.writer.manifest.get("phase") or "unknown",
            "type": f"{type(inner).__module__}.{type(inner).__qualname__}",
            "message": _clip_message(str(inner)),
            "traceback": _short_traceback(e),
            "graph": gs.graph_id if gs else None,
            "compile_id": gs.compile_id if gs else None,
        }
        self.errors.append(err)
        if gs is not None:
            gs.status = "failed"
            self._guarded("the error", lambda: gs.out.write_error(err))
            self._guarded("fusion decisions", lambda: self._flush_fusion(gs))
            self._write_meta(gs)
            self.writer.set_graph_status(gs.graph_id, "failed")
        if self.writer.manifest.get("error") is None:
            self.writer.update(error=err)

    def _finish_graph(self, gs: _GraphState, status: str) -> None:
        if gs.status in ("ok", "failed") and status == "ok":
            return
        gs.status = status if gs.status != "failed" else "failed"
        if gs.ended is None:
            gs.ended = time.perf_counter() - gs.started
        if gs.fusion:
            self._flush_fusion(gs)
        if gs.kernel_index:
            self._write_provenance(gs)
        self._write_meta(gs)
        assert self.writer is not None
        self.writer.set_graph_status(gs.graph_id, gs.status)

    # structured events
    def on_event(self, meta: dict[str, Any], payload: Any) -> None:
        cid = _event_compile_id(meta)
        if "dynamo_start" in meta:
            self._phase("dynamo")
        elif "inductor_output_code" in meta:
            self.on_output_code(str(payload or ""), self._current())
        elif "compilation_metrics" in meta or "bwd_compilation_metrics" in meta:
            key = "metrics" if "compilation_metrics" in meta else "backward_metrics"
            self._compile_detail(cid, key, meta.get("compilation_metrics")
                                 or meta.get("bwd_compilation_metrics"))
            self._compile_detail(cid, "counters", compat.counters_snapshot())
        elif "dynamo_guards" in meta or "dynamo_cpp_guards_str" in meta:
            self._compile_detail(cid, "guards", payload)
        elif "artifact" in meta:
            name = (meta.get("artifact") or {}).get("name", "")
            if name in ("recompile_reasons", "dynamo_graph_break_reason"):
                self._compile_detail(cid, name, payload, append=True)
            elif name == "fx_graph_runnable":
                self._tls.runnable = str(payload or "")
                gs = self._current()
                if gs is not None and gs.has_partition:
                    self._write_runnable(gs)
            elif name == "inductor_provenance_tracking_node_mappings":
                gs = self._current()
                try:
                    data = payload if isinstance(payload, dict) else _loads(payload)
                    if gs is not None and isinstance(data, dict):
                        gs.pre_to_post = data.get("preToPost") or {}
                except ValueError:
                    pass

    def _compile_detail(self, cid: str | None, key: str, value: Any, append: bool = False) -> None:
        if cid is None:
            return
        with self._lock:
            c = self._compiles.setdefault(cid, {"graphs": []})
            if append:
                c.setdefault(key, []).append(value)
            else:
                c[key] = value
            assert self.writer is not None
            self.writer.write_compile(cid, c)
            self.writer.add_compile(cid, {"graphs": c["graphs"]})
            if key == "metrics" and isinstance(value, dict):
                self.writer.add_compile(cid, {"graphs": c["graphs"], "summary": {
                    k: value.get(k) for k in ("co_name", "co_filename", "co_firstlineno",
                                              "entire_frame_compile_time_s",
                                              "inductor_compile_time_s", "fail_type")}})


class _StructuredHandler(logging.Handler):
    def __init__(self, session: CaptureSession) -> None:
        super().__init__(level=logging.DEBUG)
        self.session = session

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "metadata", None)
        if not isinstance(meta, dict):
            return
        try:
            self.session.on_event(meta, getattr(record, "payload", None))
        except Exception as e:
            if self.session.writer:
                self.session.writer.warn(f"capture could not record an event: {e}")


def _event_compile_id(meta: dict[str, Any]) -> str | None:
    return layout.compile_id_from_meta(meta) or compat.current_compile_id()


# Kernel run times: the compiled graph is run again up to this many times, more than once only
# while the runs so far took less than the budget (one run of a big model costs what it costs).
_TIMED_RUNS = 5
_TIMING_BUDGET_S = 0.2
_NOT_RUN_NOTE = ("not timed: the compiled call re-run after the eager comparison does not run "
                 "these kernels (a backward graph runs in the user's backward pass)")


def _timed_runs(again: Callable[[], Any]) -> tuple[int, float, str | None]:
    """Run ``again`` up to _TIMED_RUNS times while within _TIMING_BUDGET_S: (runs, seconds, why
    it stopped early when it raised)."""
    runs, t0 = 0, time.perf_counter()
    try:
        while runs < _TIMED_RUNS and (not runs or time.perf_counter() - t0 < _TIMING_BUDGET_S):
            again()
            runs += 1
    except Exception as e:
        return runs, round(time.perf_counter() - t0, 6), \
            f"not timed: the re-run failed: {type(e).__name__}: {str(e)[:500]}"
    return runs, round(time.perf_counter() - t0, 6), None


def _run_times(calls: list[float], runs: int) -> dict[str, Any]:
    """``run_s`` (median seconds per call), ``run_min_s`` and ``calls`` per run."""
    if not calls or not runs:
        return {"run_s": None, "run_min_s": None, "calls": 0}
    return {"run_s": round(statistics.median(calls), 9), "run_min_s": round(min(calls), 9),
            "calls": len(calls) // runs}


def _compile_time(name: str, kernel: Any, triton: dict[str, float],
                  builds: dict[str, float], hooked: set[str]) -> dict[str, Any]:
    """``compile_s`` and how the kernel was obtained: ``built`` (the C++ build or Triton compile,
    timed), ``cached`` (no build while it was loaded: Inductor's kernel cache, on disk or in this
    process, had it), None (not known: the build hook is missing in this torch)."""
    if compat.is_triton_kernel(kernel):
        if name in triton:
            return {"compile_s": round(triton[name], 6), "compile": "built"}
        return {"compile_s": None, "compile": "cached" if "triton" in hooked else None}
    binary = compat.cpp_kernel_binary(kernel)
    built = builds.get(binary) if binary is not None else None
    if built is not None:
        return {"compile_s": round(built, 6), "compile": "built"}
    known = binary is not None and "cpp" in hooked
    return {"compile_s": None, "compile": "cached" if known else None}


def _check_empty(out_dir: Path) -> None:
    """A capture writes a new trace: into a missing or empty directory, never over another."""
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise FileExistsError(f"trace directory {out_dir} is not empty (a capture never writes "
                              "over another trace or other files); choose a new directory")


def _clip_message(msg: str, head: int = 6000, tail: int = 6000) -> str:
    """A long message (a C++ compiler's output can be megabytes) cut to its head and tail, with
    every line that reports an error kept from the middle."""
    if len(msg) <= head + tail:
        return msg
    middle = msg[head:-tail]
    errors = [ln for ln in middle.splitlines() if "error" in ln.lower()][:200]
    kept = "\n".join(errors)
    return (msg[:head] + f"\n… [{len(middle)} characters cut; their error lines follow]\n"
            + kept + "\n…\n" + msg[-tail:])


def _short_traceback(e: BaseException, message_limit: int = 2000) -> str:
    """The traceback frames of ``e`` and its causes, each message cut to ``message_limit``
    characters (a C++ compiler's output can be megabytes; the full text is in "message")."""
    chain: list[BaseException] = []
    cur: BaseException | None = e
    while cur is not None and cur not in chain and len(chain) < 4:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    parts = []
    for i, exc in enumerate(reversed(chain)):
        if i:
            parts.append("\nThe above exception was the direct cause of the following:\n\n")
        msg = str(exc)
        if len(msg) > message_limit:
            msg = msg[:message_limit] + f"… [{len(msg) - message_limit} more characters]"
        parts.append("Traceback (most recent call last):\n")
        parts.extend(traceback.format_tb(exc.__traceback__))
        parts.append(f"{type(exc).__module__}.{type(exc).__qualname__}: {msg}\n")
    return "".join(parts)


def _loads(text: Any) -> Any:
    import json

    return json.loads(text)


def _jsonish(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonish(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonish(x) for k, x in v.items()}
    return repr(v)


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
