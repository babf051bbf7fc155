"""The Inductor functions capture wraps (its hook points, by role) and what a hooked call was
about, as plain data: names, tuples, dicts and events, never a signature capture must know."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch

from tuidebug.compiler.compat.inductor import (choice_info, ir_node_size, kernel_provenance_args,
                                              scheduler_node_json, scheduler_node_text)
from tuidebug.compiler.compat.kernels import cpp_build_target, triton_launcher_info
from tuidebug.compiler.compat.lookup import NotAvailable


# -- modules that must be loaded before patching --------------------------------------------------

def import_inductor() -> None:
    """Import the Inductor modules whose functions capture wraps."""
    import torch._inductor.codecache  # noqa: F401
    import torch._inductor.compile_fx  # noqa: F401
    import torch._inductor.debug  # noqa: F401
    import torch._inductor.graph  # noqa: F401
    import torch._inductor.scheduler  # noqa: F401
    import torch._inductor.select_algorithm  # noqa: F401

    for mod in ("torch._inductor.codegen.cpp", "torch._inductor.codegen.triton",
                "torch._inductor.codegen.simd"):
        try:
            __import__(mod)
        except Exception:  # a backend that cannot load here (e.g. no triton): skip it
            pass


# Hook points, by role. Capture (tuidebug/compiler/capture/) wraps these; a missing one
# becomes a warning.
TORCH_COMPILE = "torch.compile"  # public: the user's call of it (capture/compiled_calls.py)
# what torch.compile returns for a module: its calls seen without a hook on the instance
OPTIMIZED_MODULE_CALL = "torch._dynamo.eval_frame.OptimizedModule.__call__"


def optimized_module_class() -> type | None:
    """The class ``torch.compile`` returns for a module (its ``__call__`` is
    ``OPTIMIZED_MODULE_CALL``); None where this torch has none there."""
    try:
        from torch._dynamo.eval_frame import OptimizedModule
    except ImportError:
        return None
    return OptimizedModule if isinstance(OptimizedModule, type) else None
COMPILE_FX = "torch._inductor.compile_fx.compile_fx"
PRE_GRAD_PASSES = "torch._inductor.compile_fx._recursive_pre_grad_passes"
JOINT_GRAPH_PASSES = "torch._inductor.compile_fx._recursive_joint_graph_passes"
POST_GRAD_PASSES = "torch._inductor.compile_fx._recursive_post_grad_passes"
CODEGEN_AND_COMPILE = "torch._inductor.compile_fx._InProcessFxCompile.codegen_and_compile"
GRAPH_LOWERING_RUN = "torch._inductor.graph.GraphLowering.run"
PASS_OBSERVER_ENTER = "torch.fx.passes.graph_transform_observer.GraphTransformObserver.__enter__"
PASS_OBSERVER_EXIT = "torch.fx.passes.graph_transform_observer.GraphTransformObserver.__exit__"
IR_PRE_FUSION = "torch._inductor.debug.log_ir_pre_fusion"
IR_POST_FUSION = "torch._inductor.debug.log_ir_post_fusion"
WHY_NO_FUSE = "torch._inductor.scheduler.WhyNoFuse.__call__"
FUSE_TWO_NODES = "torch._inductor.scheduler.Scheduler.fuse_two_nodes"
# every candidate pair is decided here; it (and the backends' own checks below, which it calls)
# often says no without a WhyNoFuse reason
CAN_FUSE = "torch._inductor.scheduler.Scheduler.can_fuse"
BACKEND_CAN_FUSE = (
    "torch._inductor.codegen.cpp.CppScheduling.can_fuse_vertical",
    "torch._inductor.codegen.cpp.CppScheduling.can_fuse_horizontal",
    "torch._inductor.codegen.simd.SIMDScheduling.can_fuse_vertical",  # Triton, Halide
    "torch._inductor.codegen.simd.SIMDScheduling.can_fuse_horizontal",
)
KERNEL_PROVENANCE = "torch._inductor.debug.set_kernel_post_grad_provenance_tracing"
TRITON_RUN = "torch._inductor.runtime.triton_heuristics.CachingAutotuner.run"
TRITON_BENCHMARK_ALL = ("torch._inductor.runtime.triton_heuristics.CachingAutotuner."
                        "benchmark_all_configs")
# max-autotune: one choice benchmarked (raises when the choice fails: out of shared memory, a
# launch error) and one Triton template compiled ahead of benchmarking (raises on a compile error)
BENCHMARK_CHOICE = "torch._inductor.select_algorithm.AlgorithmSelectorCache.benchmark_choice"
TEMPLATE_PRECOMPILE = "torch._inductor.select_algorithm.TritonTemplateCaller.precompile"
# every reason Inductor gives for not using CUDA graphs on a graph goes through this function
CUDAGRAPH_SKIP = "torch._inductor.cudagraph_utils.log_cudagraph_skip_and_bump_counter"


# -- per-kernel compile and run times -------------------------------------------------------------
# The wrapper module Inductor loads for a graph (its globals hold the compiled kernels); each C++
# kernel build (run in a thread of the compile pool, or inline); each Triton compile, which
# Inductor times itself (in its compile workers too) and reports through this function.
COMPILE_TO_MODULE = "torch._inductor.graph.GraphLowering.compile_to_module"
CPP_BUILD = "torch._inductor.codecache._worker_compile_cpp"
# (kernel_name, info) with info["compile_time_us"]: called in 2.11 and 2.13 alike (2.13 through
# _emit_triton_kernel_compile_metric, which 2.11 does not have)
TRITON_COMPILE_METRIC = "torch._inductor.async_compile._add_triton_kernel_info"


# -- structured trace log ------------------------------------------------------------------------

def structured_trace_logger() -> logging.Logger:
    """The logger behind TORCH_TRACE (``trace_structured`` emits to it when it has handlers)."""
    try:
        from torch._logging._internal import trace_log
    except ImportError as e:
        raise NotAvailable("torch._logging._internal.trace_log") from e
    return trace_log


def current_compile_id() -> str | None:
    """The Dynamo compile id with its restart attempt, as TORCH_TRACE/tlparse write it
    ("0/0", "0/0_1" for a restarted analysis, "!0/0/0" for compiled autograd)."""
    try:
        from torch._guards import CompileContext

        tid = CompileContext.current_trace_id()
        if tid is not None:
            return str(tid)
        cid = CompileContext.current_compile_id()
    except Exception:
        return None
    return str(cid) if cid is not None else None


def is_restart(e: BaseException) -> bool:
    """Dynamo restarts its analysis by raising (control flow, not a failure)."""
    return any(c.__name__ in ("RestartAnalysis", "SkipFrame") for c in type(e).__mro__)


# -- what a hooked call was about, as plain data -------------------------------------------------
# capture's wrappers take ``*args, **kwargs``, pass them on to Inductor untouched and ask these
# functions what the call was about: an argument that moves or is renamed between torch releases
# is handled here (parameter names as in torch 2.11-2.15).

def _arg(args: tuple[Any, ...], kwargs: Mapping[str, Any], index: int, name: str,
         default: Any = None) -> Any:
    if name in kwargs:
        return kwargs[name]
    return args[index] if len(args) > index else default


def compile_fx_call(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[Any, Any]:
    """COMPILE_FX(model_, example_inputs_, …): the Dynamo graph and its example inputs."""
    return _arg(args, kwargs, 0, "model_"), _arg(args, kwargs, 1, "example_inputs_")


def stage_fn_graph(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    """PRE_GRAD_PASSES / JOINT_GRAPH_PASSES / POST_GRAD_PASSES(gm, …): the graph they change."""
    return _arg(args, kwargs, 0, "gm")


def stage_fn_result(result: Any, gm: Any) -> Any:
    """The graph after a stage function: the one it returned, or ``gm`` changed in place
    (``_recursive_post_grad_passes`` returns None)."""
    return result if isinstance(result, torch.fx.GraphModule) else gm


def codegen_call(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[Any, str]:
    """CODEGEN_AND_COMPILE(self, gm, example_inputs, inputs_to_check, graph_kwargs): the graph
    of the AOT partition and its kind, "inference", "forward" or "backward"."""
    graph_kwargs = _arg(args, kwargs, 4, "graph_kwargs") or {}
    if graph_kwargs.get("is_backward"):
        kind = "backward"
    elif graph_kwargs.get("is_inference"):
        kind = "inference"
    else:
        kind = "forward"
    return _arg(args, kwargs, 1, "gm"), kind


def pass_observer(observer: Any) -> tuple[Any, str, str | None]:
    """A GraphTransformObserver (one FX pass): its graph, the pass's name and its subsystem."""
    return observer.gm, str(observer.passname), getattr(observer, "subsystem", None)


def logged_scheduler_nodes(args: tuple[Any, ...],
                           kwargs: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """IR_PRE_FUSION / IR_POST_FUSION(nodes): the scheduler's nodes as JSON and as text."""
    nodes = list(_arg(args, kwargs, 0, "nodes") or [])
    return ([scheduler_node_json(n) for n in nodes],
            "\n\n".join(scheduler_node_text(n) for n in nodes) + "\n")


def why_no_fuse_call(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[str, str, str]:
    """WHY_NO_FUSE(self, reason, *format args): the two nodes' names and the reason."""
    why, reason, fmt = args[0], _arg(args, kwargs, 1, "reason"), args[2:]
    return why.name1, why.name2, reason % fmt if fmt else reason


def fusion_pair_names(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[str, str]:
    """CAN_FUSE / FUSE_TWO_NODES(self, node1, node2, …): the two nodes' names."""
    return (_arg(args, kwargs, 1, "node1").get_name(), _arg(args, kwargs, 2, "node2").get_name())


def fused_node(node: Any) -> tuple[str, list[str]]:
    """What FUSE_TWO_NODES returned: the fused node's name and its members' names."""
    return node.get_name(), [n.get_name() for n in node.get_nodes()]


def kernel_provenance(args: tuple[Any, ...], kwargs: Mapping[str, Any],
                      handle: Any) -> tuple[str, dict[str, Any]]:
    """KERNEL_PROVENANCE(node_schedule, kernel_name, is_extern=False) and the handle it
    returned: the handle's key (``"name:handle"``, as the output code's comments name it) and
    the kernel's IR nodes, FX nodes and stack traces."""
    kernel_name = _arg(args, kwargs, 1, "kernel_name")
    is_extern = bool(_arg(args, kwargs, 2, "is_extern", False))
    key = f"{kernel_name}:{handle}" if handle is not None else kernel_name
    info = kernel_provenance_args(_arg(args, kwargs, 0, "node_schedule"), is_extern)
    return key, {"kernel": kernel_name, "extern": is_extern, **info}


def cpp_build_call(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str | None:
    """CPP_BUILD(lock_path, cpp_builders): the binary it builds."""
    return cpp_build_target(_arg(args, kwargs, 1, "cpp_builders"))


def triton_compile_call(args: tuple[Any, ...],
                        kwargs: Mapping[str, Any]) -> tuple[str, float] | None:
    """TRITON_COMPILE_METRIC(kernel_name, info): the kernel and its compile time in seconds."""
    info = _arg(args, kwargs, 1, "info")
    elapsed_us = info.get("compile_time_us") if isinstance(info, dict) else None
    if not isinstance(elapsed_us, (int, float)):
        return None
    return str(_arg(args, kwargs, 0, "kernel_name")), elapsed_us / 1e6


ChoiceTimes = list[tuple[Any, dict[str, Any], "float | None"]]


def autotune_feedback(args: tuple[Any, ...], kwargs: Mapping[str, Any]
                      ) -> tuple[str, list[dict[str, Any]], ChoiceTimes]:
    """An autotune feedback call (timings, name, input_nodes, choices, …): the op, its inputs'
    sizes and per choice (an opaque token, what it is, its time in ms or None when it failed)."""
    timings, name = _arg(args, kwargs, 0, "timings"), _arg(args, kwargs, 1, "name")
    input_nodes, choices = _arg(args, kwargs, 2, "input_nodes"), _arg(args, kwargs, 3, "choices")
    out = []
    for c in choices or []:
        t = timings.get(c) if hasattr(timings, "get") else None
        out.append((c, choice_info(c), None if t is None or t == float("inf") else float(t)))
    return name, [ir_node_size(n) for n in input_nodes or []], out


def autotune_step_choice(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    """BENCHMARK_CHOICE(choice, …) or TEMPLATE_PRECOMPILE(self): the choice (an opaque token,
    the one ``autotune_feedback`` gives)."""
    return _arg(args, kwargs, 0, "choice")


def cudagraph_skip_reason(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
    """CUDAGRAPH_SKIP(msg): why CUDA graphs are not used."""
    return str(_arg(args, kwargs, 0, "msg"))


def triton_config_timings(timings: Any) -> list[tuple[dict[str, Any], Any]] | None:
    """What TRITON_BENCHMARK_ALL returned ({launcher: ms}): per config, its launch metadata
    (``triton_launcher_info``) and its time; None when it is not that."""
    if not isinstance(timings, dict):
        return None
    return [(triton_launcher_info(launcher), t) for launcher, t in timings.items()]


def is_boxed_call(fn: Callable[..., Any]) -> bool:
    """Whether AOTAutograd calls the compiled callable ``fn`` "boxed": its inputs as one list,
    which the callee clears."""
    return bool(getattr(fn, "_boxed_call", False))


def copy_calling_convention(src: Callable[..., Any], dst: Callable[..., Any]) -> None:
    """Make ``dst`` (a wrapper of the compiled callable ``src``) called as ``src`` is (boxed or
    not: ``is_boxed_call``)."""
    if is_boxed_call(src):
        dst._boxed_call = True  # type: ignore[attr-defined]


def undisabled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The callable inside Dynamo's ``disable`` wrappers of ``fn`` (``innermost_fn``), or ``fn``
    where this torch has none. What Inductor's backend returns is such a wrapper, and Dynamo
    wraps whatever the backend returned in one again, unwrapping the backend's: a wrapper of the
    capture's around the backend's wrapper would leave two on every call of the graph."""
    try:
        from torch._dynamo.eval_frame import innermost_fn
    except ImportError:
        return fn
    try:
        inner = innermost_fn(fn)
    except Exception:  # a chain torch does not follow: the callable as given
        return fn
    return inner if callable(inner) else fn


def backend_error_cause(e: BaseException) -> BaseException:
    """The compiler's own error inside Dynamo's BackendCompilerFailed wrapping(s)."""
    inner = e
    while getattr(inner, "inner_exception", None) is not None:
        inner = inner.inner_exception  # type: ignore[attr-defined]
    return inner


@dataclass
class StructuredEvent:
    """One record of the structured trace log, as capture uses it. ``kind``: "dynamo_start",
    "output_code" (data: the code), "metrics" / "backward_metrics" (data: a dict), "guards",
    "recompile_reasons", "dynamo_graph_break_reason", "fx_graph_runnable" (data: the script),
    "provenance_mappings" (data: a dict, or None when unreadable)."""

    kind: str
    compile_id: str | None
    data: Any = None


_APPENDED_ARTIFACTS = ("recompile_reasons", "dynamo_graph_break_reason")


def structured_event(record: logging.LogRecord) -> StructuredEvent | None:
    """What a record of ``structured_trace_logger()`` says; None for those capture ignores."""
    import json

    from tuidebug.trace.format import layout

    meta = getattr(record, "metadata", None)
    if not isinstance(meta, dict):
        return None
    payload = getattr(record, "payload", None)
    cid = layout.compile_id_from_meta(meta) or current_compile_id()
    if "dynamo_start" in meta:
        return StructuredEvent("dynamo_start", cid)
    if "inductor_output_code" in meta:
        return StructuredEvent("output_code", cid, str(payload or ""))
    if "compilation_metrics" in meta:
        return StructuredEvent("metrics", cid, meta.get("compilation_metrics"))
    if "bwd_compilation_metrics" in meta:
        return StructuredEvent("backward_metrics", cid, meta.get("bwd_compilation_metrics"))
    if "dynamo_guards" in meta or "dynamo_cpp_guards_str" in meta:
        return StructuredEvent("guards", cid, payload)
    if "artifact" not in meta:
        return None
    name = (meta.get("artifact") or {}).get("name", "")
    if name in _APPENDED_ARTIFACTS:
        return StructuredEvent(name, cid, payload)
    if name == "fx_graph_runnable":
        return StructuredEvent("fx_graph_runnable", cid, str(payload or ""))
    if name == "inductor_provenance_tracking_node_mappings":
        try:
            data = payload if isinstance(payload, dict) else json.loads(payload)
        except ValueError:
            data = None
        return StructuredEvent("provenance_mappings", cid, data)
    return None
