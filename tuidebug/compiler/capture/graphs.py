"""Graphs and passes: each Dynamo graph entering Inductor, its stages (pre-grad, joint, AOT
partition, post-grad) and every Inductor FX pass that changed it, as snapshots
``stages/NNN-*.json``."""

from __future__ import annotations

import time
from typing import Any, Callable

import torch

from tuidebug.compiler import compat, snapshot
from tuidebug.compiler.capture import config, outcome
from tuidebug.compiler.capture.state import Concern, GraphState
from tuidebug.trace.format import layout


class Graphs(Concern):
    def __init__(self, session: Any) -> None:
        super().__init__(session)
        # compile id -> its Inductor compiles so far (forward pieces), backward graphs so far:
        # DDPOptimizer compiles one Dynamo graph as one piece per bucket
        self._pieces: dict[str, int] = {}
        self._backwards: dict[str, int] = {}

    def install(self, p: compat.Patcher) -> None:
        p.wrap(compat.COMPILE_FX, self._wrap_compile_fx)
        p.wrap(compat.PRE_GRAD_PASSES,
               lambda f: self._wrap_stage_fn(f, "pre_grad", None, "pre_grad"))
        p.wrap(compat.JOINT_GRAPH_PASSES,
               lambda f: self._wrap_stage_fn(f, "joint_graph_passes", "aot_joint", "joint_graph"))
        p.wrap(compat.POST_GRAD_PASSES,
               lambda f: self._wrap_stage_fn(f, "post_grad", None, "post_grad"))
        p.wrap(compat.CODEGEN_AND_COMPILE, self._wrap_codegen_and_compile)
        p.wrap(compat.GRAPH_LOWERING_RUN, lambda f: self._wrap_phase(f, "lowering"))
        p.wrap(compat.PASS_OBSERVER_ENTER, self._wrap_observer_enter)
        p.wrap(compat.PASS_OBSERVER_EXIT, self._wrap_observer_exit)

    def _write_config(self) -> None:
        s = self.session
        s.guarded("the Inductor config", s.concern(config.Config).write)

    # compile_fx: one Dynamo graph enters Inductor
    def _wrap_compile_fx(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        s = self.session

        def compile_fx(*args: Any, **kwargs: Any) -> Any:
            with s.reentrant("compile_fx") as outer:
                if not outer:
                    # compile_fx calls itself inside the config patches of a torch.compile mode
                    # (max-autotune, …): the config in force for this compile
                    self._write_config()
                    return orig(*args, **kwargs)
                s.config_here()  # this thread may be compiling for the first time
                gm, example_inputs = compat.compile_fx_call(args, kwargs)
                gs = s.guarded("the Dynamo graph", lambda: self._begin_compile(gm, example_inputs))
                results = s.concern(outcome.Outcome)
                with s.as_current(gs):
                    try:
                        compiled = orig(*args, **kwargs)
                    except BaseException as e:
                        results.record_error(e, gs)
                        raise
                    finally:  # a graph-cache hit skips the pre-grad passes that write it
                        self._write_config()
                if gs is not None and s.check_accuracy and callable(compiled):
                    compiled = results.wrap_runtime(compiled, gm, gs)
                return compiled
        return compile_fx

    def _begin_compile(self, gm: Any, example_inputs: Any) -> GraphState:
        s = self.session
        cid = s.new_compile_id()
        needs_grad = torch.is_grad_enabled() and any(
            isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs or ())
        kind = "forward" if needs_grad else "inference"
        earlier = s.frame_graph.get(cid)
        piece = self._pieces.get(cid, 0) if earlier is not None and earlier.has_partition else 0
        self._pieces[cid] = piece + 1
        gs = s.graph_state(cid, kind, piece)
        s.frame_graph[cid] = gs
        s.progress(f"compiling graph {gs.graph_id}")
        with s.as_current(gs):
            s.phase("dynamo")
            self.snapshot(gs, gm, "dynamo", kind="stage")
        return gs

    def _wrap_stage_fn(self, orig: Callable[..., Any], after: str, before: str | None,
                       phase: str) -> Callable[..., Any]:
        s = self.session

        def stage_fn(*args: Any, **kwargs: Any) -> Any:
            with s.reentrant(f"stage_{after}") as outer:
                gs = s.current() if outer else None
                gm = compat.stage_fn_graph(args, kwargs)
                if gs is not None:
                    s.phase(phase)
                    if before:
                        s.guarded(before, lambda: self.snapshot(gs, gm, before, kind="stage"))
                    if phase == "pre_grad":
                        self._write_config()
                t0 = time.perf_counter()
                result = orig(*args, **kwargs)
                if gs is not None:
                    out_gm = compat.stage_fn_result(result, gm)
                    s.guarded(after, lambda: self.snapshot(
                        gs, out_gm, after, kind="stage", duration=time.perf_counter() - t0))
                return result
        return stage_fn

    # codegen_and_compile: one graph of the AOT partition (inference, forward or backward)
    def _wrap_codegen_and_compile(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        s = self.session

        def codegen_and_compile(*args: Any, **kwargs: Any) -> Any:
            gs = s.guarded("the partitioned graph",
                           lambda: self._begin_graph(*compat.codegen_call(args, kwargs)))
            s.tls.last_graph = gs  # CUDA graphs are skipped (or not) just after codegen
            with s.as_current(gs):
                try:
                    out = orig(*args, **kwargs)
                except BaseException as e:
                    s.concern(outcome.Outcome).record_error(e, gs)
                    raise
                if gs is not None:
                    s.guarded("graph results", lambda: s.finish_graph(gs, "ok"))
                return out
        return codegen_and_compile

    def _begin_graph(self, gm: Any, kind: str) -> GraphState:
        s = self.session
        current = s.current()
        cid = compat.current_compile_id() or (current.compile_id if current else "unknown")
        frame = s.frame_graph.get(cid)
        if kind != "backward" and frame is not None and not frame.has_partition:
            gs = frame  # the graph that already holds the Dynamo / pre-grad / joint stages
            if gs.kind != kind:
                gs.kind = kind
                s.write_meta(gs)
        elif kind == "backward":
            # backward pieces compile last to first (torch pairs them so as well: runtime_wrappers
            # takes DDPOptimizer's fw metadata from the last bucket down)
            done, pieces = self._backwards.get(cid, 0), self._pieces.get(cid, 1)
            self._backwards[cid] = done + 1
            gs = s.graph_state(cid, kind, pieces - 1 - done if done < pieces else 0)
            s.progress(f"compiling graph {gs.graph_id}")  # the forward's said when it begins
        else:
            gs = s.graph_state(cid, kind)
        gs.has_partition = True
        gs.status = "running"
        gs.cudagraphs["enabled"] = compat.cuda_graphs_enabled()
        self.write_runnable(gs)
        with s.as_current(gs):
            s.phase("partition")
            self.snapshot(gs, gm, f"aot_{kind}", kind="stage")
        return gs

    def write_runnable(self, gs: GraphState) -> None:
        """Torch's own standalone script of the graph (``fx_graph_runnable``), for the minifier."""
        code = self.session.tls.runnable
        if code:
            self.session.tls.runnable = None
            gs.out.write_runnable(code)

    def _wrap_phase(self, orig: Callable[..., Any], phase: str) -> Callable[..., Any]:
        def fn(*args: Any, **kwargs: Any) -> Any:
            self.session.phase(phase)
            return orig(*args, **kwargs)
        return fn

    # GraphTransformObserver: one Inductor FX pass
    def _wrap_observer_enter(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        s = self.session

        def __enter__(observer: Any, *args: Any, **kwargs: Any) -> Any:
            if s.current() is not None:
                fp = s.guarded("a pass", lambda: snapshot.fingerprint(
                    compat.pass_observer(observer)[0]))
                s.tls.passes.append((fp, time.perf_counter()))
            return orig(observer, *args, **kwargs)
        return __enter__

    def _wrap_observer_exit(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        s = self.session

        def __exit__(observer: Any, typ: Any, *args: Any, **kwargs: Any) -> Any:
            result = orig(observer, typ, *args, **kwargs)
            gs = s.current()
            stack = s.tls.passes
            if gs is not None and stack:
                fp_enter, t0 = stack.pop()
                duration = time.perf_counter() - t0
                if typ is None and fp_enter is not None:
                    gm, name, subsystem = compat.pass_observer(observer)
                    s.guarded(f"pass {name}", lambda: self._record_pass(
                        gs, gm, name, subsystem, fp_enter, duration))
            return result
        return __exit__

    def _record_pass(self, gs: GraphState, gm: Any, name: str, subsystem: str | None,
                     fp_enter: dict[str, Any], duration: float) -> None:
        fp = snapshot.fingerprint(gm)
        if fp == fp_enter or (fp == gs.last_fp and id(gm) == gs.last_gm):
            note = None if fp == fp_enter else "changes recorded by the passes inside it"
            self.session.add_stage(gs, {"name": name, "kind": "pass", "subsystem": subsystem,
                                        "duration_s": duration, "changed": False,
                                        **({"note": note} if note else {})})
            return
        self.snapshot(gs, gm, name, kind="pass", subsystem=subsystem, duration=duration,
                      fp=fp, base_fp=fp_enter)

    # -- snapshots ------------------------------------------------------------------------------
    def snapshot(self, gs: GraphState, gm: Any, name: str, *, kind: str,
                 subsystem: str | None = None, duration: float | None = None,
                 fp: dict[str, Any] | None = None, base_fp: dict[str, Any] | None = None) -> None:
        """The graph ``gm`` as the next stage of ``gs``, with what changed since the last one."""
        fp = fp if fp is not None else snapshot.fingerprint(gm)
        if gs.last_fp is not None and id(gm) == gs.last_gm:
            base = gs.last_fp
        else:
            base = base_fp if base_fp is not None else gs.last_fp
        changes = snapshot.diff_fingerprints(base, fp) if base is not None else {
            "added": list(fp), "removed": [], "changed": []}
        data = snapshot.graph_to_json(gm, graph_id=gs.graph_id, stage=name,
                                      cache=self.session.stack_cache)
        data["changes"] = changes
        # a snapshot whose nodes repeat an earlier one's exactly (pre_grad after dynamo when no
        # pre-grad pass changed it, post_grad after the last pass…) is stored once: the entry
        # names the earlier file and carries its own changes
        fname = gs.out.write_stage(len(gs.stages), name, data, seen=gs.snapshot_files)
        shared = fname != layout.stage_file(len(gs.stages), name)
        gs.last_fp, gs.last_gm, gs.last_nodes = fp, id(gm), data["nodes"]
        self.session.add_stage(gs, {
            "name": name, "kind": kind, "subsystem": subsystem, "duration_s": duration,
            "changed": base is None or any(changes.values()), "file": fname,
            "nodes": len(data["nodes"]),
            "counts": {k: len(v) for k, v in changes.items()},
            **({"changes": changes} if shared else {})})
