"""Kernels: Inductor's output code split per kernel (``code/``), kernel provenance
(``provenance.json``) and each kernel's compile and run times (``code/timings.json``)."""

from __future__ import annotations

import os
import statistics
import time
import weakref
from typing import Any, Callable

from tuidebug.compiler import compat
from tuidebug.compiler.capture.state import Concern, GraphState
from tuidebug.trace.format import layout

# Kernel run times: the compiled graph is run again up to this many times, more than once only
# while the runs so far took less than the budget (one run of a big model costs what it costs).
_TIMED_RUNS = 5
_TIMING_BUDGET_S = 0.2
_NOT_RUN_NOTE = ("not timed: the compiled call re-run after the eager comparison does not run "
                 "these kernels (a backward graph runs in the user's backward pass)")


class Kernels(Concern):
    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self._cpp_builds: dict[str, float] = {}  # binary -> seconds its build took
        self._triton_compiles: dict[str, float] = {}  # Triton kernel name -> compile seconds
        self._compile_hooks: set[str] = set()  # kernel builds observed: "cpp", "triton"

    def install(self, p: compat.Patcher) -> None:
        p.wrap(compat.KERNEL_PROVENANCE, self._wrap_provenance, everywhere=True)
        p.wrap(compat.COMPILE_TO_MODULE, self._wrap_compile_to_module)
        if p.wrap(compat.CPP_BUILD, self._wrap_cpp_build):
            self._compile_hooks.add("cpp")
        if compat.triton_available() and p.wrap(compat.TRITON_COMPILE_METRIC,
                                                self._wrap_triton_compile_metric):
            self._compile_hooks.add("triton")

    def graph_finished(self, gs: GraphState) -> None:
        if gs.kernel_index:
            self.write_provenance(gs)

    # -- output code and provenance -------------------------------------------------------------
    def _wrap_provenance(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        s = self.session

        def set_kernel_post_grad_provenance_tracing(*args: Any, **kwargs: Any) -> Any:
            handle = orig(*args, **kwargs)
            gs = s.current()
            if gs is not None:
                def rec() -> None:
                    key, info = compat.kernel_provenance(args, kwargs, handle)
                    gs.provenance[key] = info
                s.guarded("kernel provenance", rec)
            return handle
        return set_kernel_post_grad_provenance_tracing

    def on_output_code(self, code: str, gs: GraphState | None) -> None:
        """Inductor's output code for graph ``gs``: its files, kernel index and provenance."""
        if gs is None:
            return
        gs.kernel_index = gs.out.write_output_code(code)
        self.write_provenance(gs)
        self.session.write_meta(gs)
        self.session.phase("kernel_compile")  # the code is on disk; now the kernels get compiled

    def write_provenance(self, gs: GraphState) -> None:
        fx_source = {n["name"]: n.get("source") for n in gs.last_nodes}
        gs.out.write_provenance(layout.provenance_json(
            gs.kernel_index, gs.provenance, fx_source, gs.pre_to_post, self.session.stack_cache))

    # -- compile times --------------------------------------------------------------------------
    def _wrap_cpp_build(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        """Time each C++ kernel build (in a compile-pool thread, or inline); a call that finds
        the binary already there (Inductor's kernel cache) builds nothing and is not recorded."""
        s = self.session

        def build(*args: Any, **kwargs: Any) -> Any:
            target = compat.cpp_build_call(args, kwargs)
            fresh = target is not None and not os.path.exists(target)
            t0 = time.perf_counter()
            out = orig(*args, **kwargs)
            if fresh:
                with s.lock:
                    self._cpp_builds[str(target)] = time.perf_counter() - t0
            return out
        return build

    def _wrap_triton_compile_metric(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        s = self.session

        def emit(*args: Any, **kwargs: Any) -> Any:
            timed = compat.triton_compile_call(args, kwargs)
            if timed is not None:
                with s.lock:
                    self._triton_compiles[timed[0]] = timed[1]
            return orig(*args, **kwargs)
        return emit

    def _wrap_compile_to_module(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        s = self.session

        def compile_to_module(*args: Any, **kwargs: Any) -> Any:
            mod = orig(*args, **kwargs)
            gs = s.current()
            if gs is not None:
                s.guarded("kernel compile times", lambda: self._record_module(gs, mod))
            return mod
        return compile_to_module

    def _record_module(self, gs: GraphState, mod: Any) -> None:
        """The graph's wrapper module is loaded, its kernels compiled: each one's compile time."""
        with self.session.lock:
            # builds seen since the last module: this one's (a later graph reusing a kernel
            # gets it from the in-process cache)
            triton, self._triton_compiles = self._triton_compiles, {}
            builds, self._cpp_builds = self._cpp_builds, {}
        gs.module = weakref.ref(mod)
        for k in gs.kernel_index:
            name = k.name
            if not k.extern and name in vars(mod):
                gs.timings[name] = _compile_time(name, vars(mod)[name], triton, builds,
                                                 self._compile_hooks)
        self._write_timings(gs)

    # -- run times ------------------------------------------------------------------------------
    def time_kernels(self, cid: str, again: Callable[[], Any],
                     before_run: Callable[[], None] = lambda: None) -> None:
        """After the eager comparison of compile ``cid``: run its compiled graph again (a few
        times, within a small budget) with every generated kernel timed (``before_run`` before
        each run, outside the budget: it puts back the inputs the graph writes)."""
        graphs = [g for g in list(self.session.graphs.values()) if g.compile_id == cid
                  and g.timings and g.module is not None and g.module() is not None]
        if any(g.replays_cuda_graphs(compat.device_kind() == "cuda") for g in graphs):
            for g in graphs:
                g.run_timing = {"runs": 0, "note": "not timed: under CUDA graphs the kernels "
                                                   "are replayed without Python calls"}
                self._write_timings(g)
            return
        targets = [((g.graph_id, n), g.module(), n) for g in graphs for n in g.timings]
        if not targets:
            return
        with compat.KernelCallTimer(targets) as timer:
            runs, elapsed, error = _timed_runs(again, before_run)
        for g in graphs:
            calls = {n: timer.calls.get((g.graph_id, n)) or [] for n in g.timings} if runs else {}
            for name, entry in g.timings.items():
                entry.update(_run_times(calls.get(name) or [], runs))
            g.run_timing = {"runs": runs, "elapsed_s": elapsed}
            if error or not any(calls.values()):
                g.run_timing["note"] = error or _NOT_RUN_NOTE
            self._write_timings(g)

    def _write_timings(self, gs: GraphState) -> None:
        gs.out.write_timings(gs.timings, gs.run_timing)


def _timed_runs(again: Callable[[], Any],
                before_run: Callable[[], None]) -> tuple[int, float, str | None]:
    """Run ``again`` up to _TIMED_RUNS times while within _TIMING_BUDGET_S (``before_run``
    before each, not counted): (runs, seconds of the runs, why it stopped early when it
    raised)."""
    runs, elapsed = 0, 0.0
    try:
        while runs < _TIMED_RUNS and (not runs or elapsed < _TIMING_BUDGET_S):
            before_run()
            t0 = time.perf_counter()
            again()
            elapsed += time.perf_counter() - t0
            runs += 1
    except Exception as e:
        return runs, round(elapsed, 6), \
            f"not timed: the re-run failed: {type(e).__name__}: {str(e)[:500]}"
    return runs, round(elapsed, 6), None


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
