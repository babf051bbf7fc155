"""On the GPU: each Triton kernel's first launch (``code/launches.jsonl``), the configs Triton's
autotuner benchmarked (``autotune.jsonl``) and every reason Inductor gave to skip CUDA graphs
(``meta.json``)."""

from __future__ import annotations

from typing import Any, Callable

from tuidebug.compiler import compat
from tuidebug.compiler.capture import outcome
from tuidebug.compiler.capture.state import Concern, GraphState
from tuidebug.trace.format import layout


class Triton(Concern):
    def install(self, p: compat.Patcher) -> None:
        p.wrap(compat.CUDAGRAPH_SKIP, self._wrap_cudagraph_skip, everywhere=True)
        if compat.triton_available():
            p.wrap(compat.TRITON_RUN, self._wrap_triton_run)
            p.wrap(compat.TRITON_BENCHMARK_ALL, self._wrap_triton_benchmark)

    # -- CUDA graphs ----------------------------------------------------------------------------
    def _wrap_cudagraph_skip(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        s = self.session

        def log_cudagraph_skip(*args: Any, **kwargs: Any) -> Any:
            gs = s.current() or s.tls.last_graph
            if gs is not None:
                def rec() -> None:
                    gs.cudagraphs["skipped"].append(outcome.clip_message(
                        compat.cudagraph_skip_reason(args, kwargs), 1000, 1000))
                    s.write_meta(gs)
                s.guarded("a CUDA graphs skip", rec)
            return orig(*args, **kwargs)
        return log_cudagraph_skip

    # -- Triton launches and config benchmarks ----------------------------------------------------
    def _graph_for_kernel(self, ident: dict[str, Any]) -> GraphState | None:
        s = self.session
        cid = ident.get("compile_id")
        if cid is not None:
            if ident.get("is_backward"):
                gs = s.graphs.get(f"{layout.safe_id(cid)}-backward")
            else:
                gs = s.frame_graph.get(cid)
            if gs is not None:
                return gs
        return s.current()

    def _wrap_triton_run(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        s = self.session
        seen: set[int] = set()

        def run(autotuner: Any, *args: Any, **kwargs: Any) -> Any:
            out = orig(autotuner, *args, **kwargs)
            if id(autotuner) not in seen:
                seen.add(id(autotuner))
                s.guarded("a Triton launch", lambda: self._record_launch(autotuner, args))
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
        gs.out.append_launch({**ident, "launchers": len(launchers), "launch": launch})

    def _wrap_triton_benchmark(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        s = self.session

        def benchmark_all_configs(autotuner: Any, *args: Any, **kwargs: Any) -> Any:
            timings = orig(autotuner, *args, **kwargs)
            s.guarded("Triton autotuning", lambda: self._record_benchmark(autotuner, timings))
            return timings
        return benchmark_all_configs

    def _record_benchmark(self, autotuner: Any, timings: Any) -> None:
        ident = compat.triton_autotuner_identity(autotuner)
        if compat.is_autotune_choice_kernel(ident["kernel"]):
            return  # a max-autotune choice's own configs: part of benchmarking that choice
        gs = self._graph_for_kernel(ident)
        configs = compat.triton_config_timings(timings)
        if gs is None or configs is None:
            return
        choices = []
        for info, t in configs:
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
