"""Every use of a private torch API in tuidebug lives here, feature-detected.

Torch internals move between releases. Each hook below is looked up by name when capture starts;
one that the installed torch lacks is reported as "not available in torch X" (a capture warning)
instead of crashing, and the rest of the capture goes on. The compiler bisector (``tuidebug
bisect``, its minify workers) is looked up when a bisection starts; without it, it is that
command which stops with "not available in torch X".
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch

TORCH_VERSION = torch.__version__


class NotAvailable(Exception):
    """A torch internal that this torch does not have."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what} is not available in torch {TORCH_VERSION}")


def _resolve(dotted: str) -> tuple[Any, str]:
    """'torch._inductor.debug.log_ir_pre_fusion' -> (owner object, attribute name)."""
    import importlib

    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            owner: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:-1]:
            owner = getattr(owner, p, None)
        if owner is None or not hasattr(owner, parts[-1]):
            raise NotAvailable(dotted)
        return owner, parts[-1]
    raise NotAvailable(dotted)


@dataclass
class Patch:
    owner: Any
    name: str
    original: Any


class Patcher:
    """Installs wrappers on torch internals and restores them all on ``restore()``."""

    def __init__(self, warn: Callable[[str], None]) -> None:
        self._patches: list[Patch] = []
        self._warn = warn

    def wrap(self, dotted: str, make: Callable[[Any], Any], *, everywhere: bool = False) -> bool:
        """Replace ``dotted`` by ``make(original)``.

        ``everywhere``: also replace it in every loaded ``torch._inductor`` module that imported
        the function by name (``from ..debug import f``).
        """
        try:
            owner, name = _resolve(dotted)
        except (NotAvailable, AttributeError) as e:
            self._warn(str(e) if isinstance(e, NotAvailable) else str(NotAvailable(dotted)))
            return False
        original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        replacement = make(getattr(owner, name))
        if isinstance(original, classmethod):  # called as the bound original is: without cls
            replacement = classmethod(_drop_cls(replacement))
        elif isinstance(original, staticmethod):
            replacement = staticmethod(replacement)
        self._patches.append(Patch(owner, name, original))
        setattr(owner, name, replacement)
        if everywhere:
            fn = getattr(original, "__func__", original)
            for modname, mod in list(sys.modules.items()):
                if mod is None or mod is owner or not modname.startswith("torch._inductor"):
                    continue
                if getattr(mod, name, None) is fn:
                    self._patches.append(Patch(mod, name, fn))
                    setattr(mod, name, replacement)
        return True

    def restore(self) -> None:
        while self._patches:
            p = self._patches.pop()
            setattr(p.owner, p.name, p.original)


def _drop_cls(fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(cls: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)
    return call


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


# Hook points, by role. capture.py wraps these; a missing one becomes a warning.
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
TRITON_BENCHMARK_ALL = "torch._inductor.runtime.triton_heuristics.CachingAutotuner.benchmark_all_configs"
# max-autotune: one choice benchmarked (raises when the choice fails: out of shared memory, a
# launch error) and one Triton template compiled ahead of benchmarking (raises on a compile error)
BENCHMARK_CHOICE = "torch._inductor.select_algorithm.AlgorithmSelectorCache.benchmark_choice"
TEMPLATE_PRECOMPILE = "torch._inductor.select_algorithm.TritonTemplateCaller.precompile"
# every reason Inductor gives for not using CUDA graphs on a graph goes through this function
CUDAGRAPH_SKIP = "torch._inductor.cudagraph_utils.log_cudagraph_skip_and_bump_counter"


def triton_available() -> bool:
    try:
        import triton  # type: ignore[import-not-found]  # noqa: F401
    except Exception:
        return False
    return True


def triton_autotuner_identity(autotuner: Any) -> dict[str, Any]:
    """Which kernel a Triton CachingAutotuner is, and which compile / graph it belongs to."""
    meta = getattr(autotuner, "inductor_meta", None) or {}
    fn = getattr(autotuner, "fn", None)
    cid = getattr(autotuner, "compile_id", None)
    return {"kernel": meta.get("kernel_name") or getattr(fn, "__name__", "?"),
            "compile_id": str(cid) if cid is not None else None,
            "is_backward": bool(getattr(autotuner, "is_backward", False))}


def triton_launcher_info(launcher: Any) -> dict[str, Any]:
    """Launch metadata of one compiled Triton config: block sizes, warps, stages, registers,
    spills and shared memory (where this Triton exposes them)."""
    cfg = getattr(launcher, "config", None)
    info: dict[str, Any] = {
        "config": {str(k): v for k, v in (getattr(cfg, "kwargs", None) or {}).items()},
        "num_warps": getattr(cfg, "num_warps", None),
        "num_stages": getattr(cfg, "num_stages", None),
    }
    for key, attr in (("registers", "n_regs"), ("spills", "n_spills"), ("shared_mem", "shared")):
        val = getattr(launcher, attr, None)
        info[key] = val if isinstance(val, (int, float)) or val is None else str(val)
    return info


def is_autotune_choice_kernel(name: Any) -> bool:
    """A Triton template being benchmarked as a max-autotune choice is compiled under a
    placeholder name ("Placeholder.DESCRIPTIVE_NAME"); it is not a kernel of the graph."""
    return str(name).startswith("Placeholder.")


def triton_launch_grid(autotuner: Any, launcher: Any, args: tuple[Any, ...]) -> dict[str, Any]:
    """The grid of one launch: its expressions (``-((xnumel) // -(XBLOCK))``) and, from the
    launch's arguments, its value (``[16, 1, 1]``). Empty where this torch lacks ``GridExpr``."""
    try:
        from torch._inductor.runtime.triton_heuristics import GridExpr
    except ImportError:
        return {}
    meta = getattr(autotuner, "inductor_meta", None) or {}
    cfg = getattr(launcher, "config", None)
    if "grid_type" not in meta or cfg is None:
        return {}
    out: dict[str, Any] = {}
    try:
        expr = GridExpr.from_meta(meta, cfg)
        out["grid_expr"] = [str(expr.x_grid), str(expr.y_grid), str(expr.z_grid)]
    except Exception:
        return out
    interpret = getattr(autotuner, "_interpret_args_grid", None)
    if interpret is not None:
        try:
            _, grid = interpret(tuple(args), cfg)
            out["grid"] = [int(g) for g in grid]
        except Exception:  # symbolic sizes this Inductor cannot evaluate here: expressions only
            pass
    return out


def cuda_graphs_enabled() -> bool:
    """Whether the compile in progress asked for CUDA graphs (``mode="reduce-overhead"`` /
    ``"max-autotune"`` patch ``triton.cudagraphs`` on for their compiles)."""
    from torch._inductor import config

    return bool(getattr(config.triton, "cudagraphs", False))


def triton_launchers(autotuner: Any) -> list[Any]:
    return list(getattr(autotuner, "launchers", None) or [])


# -- per-kernel compile and run times -------------------------------------------------------------
# The wrapper module Inductor loads for a graph (its globals hold the compiled kernels); each C++
# kernel build (run in a thread of the compile pool, or inline); each Triton compile, which
# Inductor times itself (in its compile workers too) and reports through this function.
COMPILE_TO_MODULE = "torch._inductor.graph.GraphLowering.compile_to_module"
CPP_BUILD = "torch._inductor.codecache._worker_compile_cpp"
# (kernel_name, info) with info["compile_time_us"]: called in 2.11 and 2.13 alike (2.13 through
# _emit_triton_kernel_compile_metric, which 2.11 does not have)
TRITON_COMPILE_METRIC = "torch._inductor.async_compile._add_triton_kernel_info"


def cpp_build_target(builders: Any) -> str | None:
    """The binary a C++ build (``_worker_compile_cpp``'s builders) produces: the last builder's."""
    import os

    try:
        return os.path.realpath(str(builders[-1].get_target_file_path()))
    except Exception:
        return None


def cpp_kernel_binary(kernel: Any) -> str | None:
    """The shared library a C++ kernel (a Python binding, a global of the wrapper module) was
    loaded from."""
    import os

    path = getattr(getattr(kernel, "__self__", None), "__file__", None)
    return os.path.realpath(path) if isinstance(path, str) else None


def is_triton_kernel(obj: Any) -> bool:
    """A Triton kernel of a wrapper module: Inductor's CachingAutotuner (``kernel.run(...)``)."""
    try:
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    except Exception:
        return False
    return isinstance(obj, CachingAutotuner)


def _synchronize() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _timed(fn: Callable[..., Any], sink: list[float], sync: bool) -> Callable[..., Any]:
    import time

    def timed(*args: Any, **kwargs: Any) -> Any:
        if sync:
            _synchronize()
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        if sync:
            _synchronize()
        sink.append(time.perf_counter() - t0)
        return out
    return timed


_MISSING = object()


def _time_kernel(module: Any, name: str, sink: list[float]) -> Callable[[], None] | None:
    """Time every call of kernel ``name`` of a wrapper module; returns how to undo it."""
    obj = module.__dict__.get(name)
    if obj is None:
        return None
    if is_triton_kernel(obj):  # the wrapper calls ``name.run(...)``: shadow ``run`` on the object
        own = obj.__dict__.get("run", _MISSING)
        obj.run = _timed(obj.run, sink, sync=True)

        def undo_run() -> None:
            if own is _MISSING:
                obj.__dict__.pop("run", None)
            else:
                obj.run = own
        return undo_run
    if not callable(obj):
        return None
    setattr(module, name, _timed(obj, sink, sync=False))  # C++: a synchronous call by global name
    return lambda: setattr(module, name, obj)


class KernelCallTimer:
    """While open, times each call of the given kernels of loaded wrapper modules.

    ``targets``: ``(key, module, kernel name)``; ``calls[key]`` collects seconds per call. C++
    kernels are module globals, called synchronously: the global is replaced by a timed function.
    Triton kernels are CachingAutotuner objects: their ``run`` is shadowed by a timed one that
    synchronizes the CUDA device before and after. ``close()`` (or leaving the ``with`` block)
    puts every original back; generated code and config are never changed. Extern (ATen) calls
    are not timed.
    """

    def __init__(self, targets: list[tuple[Any, Any, str]]) -> None:
        self.calls: dict[Any, list[float]] = {}
        self._undo: list[Callable[[], None]] = []
        try:
            for key, module, name in targets:
                sink = self.calls.setdefault(key, [])
                undo = _time_kernel(module, name, sink)
                if undo is not None:
                    self._undo.append(undo)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        while self._undo:
            self._undo.pop()()

    def __enter__(self) -> "KernelCallTimer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


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


# -- Inductor config -----------------------------------------------------------------------------

def inductor_config_values() -> dict[str, Any]:
    from torch._inductor import config

    return dict(config.get_config_copy())


def inductor_config_value(name: str) -> Any:
    """One Inductor config value in force now (None where this torch has no such flag)."""
    from torch._inductor import config

    return getattr(config, name, None)


def inductor_config_defaults() -> dict[str, Any]:
    from torch._inductor import config

    entries = getattr(config, "_config", None)
    if not isinstance(entries, dict):
        raise NotAvailable("torch._inductor.config._config (config defaults)")
    return {k: getattr(e, "default", None) for k, e in entries.items()}


def inductor_config_patch(changes: dict[str, Any]) -> Any:
    from torch._inductor import config

    return config.patch(changes)


# Caches whose hit would skip the compile work a trace records. The kernel (code) cache stays
# on: it only skips re-running the C++/Triton compiler on identical source.
CACHES_OFF = {
    "fx_graph_cache": False,                              # torch._inductor.config
    "functorch.enable_autograd_cache": False,             # torch._functorch.config
    "dynamo.automatic_dynamic_local_pgo": False,          # torch._dynamo.config
}


# A --set of one of these flags decides it and the caches layered on it: the AOTAutograd cache
# stores FX-graph-cache entries (torch bypasses it while fx_graph_cache is off).
_CACHES_UNDER = {"fx_graph_cache": ("functorch.enable_autograd_cache",)}


def caches_off(user_sets: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The settings of CACHES_OFF a capture applies when the user also sets the Inductor flags
    ``user_sets``: a cache flag among them (and the caches layered on it) is left to the user."""
    left = set(user_sets or ())
    for name in user_sets or ():
        left.update(_CACHES_UNDER.get(name, ()))
    return {k: v for k, v in CACHES_OFF.items() if k not in left}


def caches_off_patch(settings: Mapping[str, Any] | None = None) -> Any:
    """A context manager applying ``settings`` (default: all of CACHES_OFF; keys as there) to
    the configs this torch has."""
    import contextlib

    import torch._dynamo.config as dynamo_config
    import torch._functorch.config as functorch_config
    from torch._inductor import config as inductor_config

    stack = contextlib.ExitStack()
    for key, value in (CACHES_OFF if settings is None else settings).items():
        module, _, name = key.rpartition(".")
        cfg = {"functorch": functorch_config, "dynamo": dynamo_config}.get(module, inductor_config)
        if name in getattr(cfg, "_config", {}) or hasattr(cfg, name):
            stack.enter_context(cfg.patch({name: value}))
    return stack


def counters_snapshot() -> dict[str, dict[str, int]]:
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return {}
    return {k: dict(v) for k, v in counters.items()}


# -- autotuning ----------------------------------------------------------------------------------

def add_autotune_feedback(fn: Callable[..., None]) -> Callable[[], None]:
    """Register ``fn`` as an autotune feedback saver; returns a function that removes it."""
    try:
        from torch._inductor import select_algorithm as sa
    except ImportError as e:
        raise NotAvailable("torch._inductor.select_algorithm") from e
    if not hasattr(sa, "add_feedback_saver"):
        raise NotAvailable("torch._inductor.select_algorithm.add_feedback_saver")
    sa.add_feedback_saver(fn)

    def remove() -> None:
        getter = getattr(sa, "get_algorithm_selector_cache", None)
        cache = getter() if getter else getattr(sa, "_ALGORITHM_SELECTOR_CACHE", None)
        fns = getattr(cache, "feedback_saver_fns", None)
        if isinstance(fns, list) and fn in fns:
            fns.remove(fn)

    return remove


def choice_info(choice: Any) -> dict[str, Any]:
    """What an autotune choice is: name, description and its config (tiles, stages, warps)."""
    info: dict[str, Any] = {"name": str(getattr(choice, "name", choice))}
    desc = getattr(choice, "description", None)
    if desc:
        info["description"] = str(desc)
    try:
        d = choice.info_dict()
        info["config"] = {str(k): v if isinstance(v, (int, float, str, bool, type(None)))
                          else str(v) for k, v in d.items()}
    except Exception:
        pass
    info["kind"] = type(choice).__name__
    return info


def ir_node_size(node: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    try:
        out["shape"] = [str(s) for s in node.get_size()]
    except Exception:
        pass
    try:
        out["dtype"] = str(node.get_dtype()).replace("torch.", "")
    except Exception:
        pass
    try:
        out["name"] = node.get_name()
    except Exception:
        pass
    return out


# -- scheduler nodes -----------------------------------------------------------------------------

def scheduler_node_json(snode: Any) -> dict[str, Any]:
    """A scheduler node (possibly fused) as JSON: members, FX origins, dependencies."""
    def safe(f: Callable[[], Any], default: Any = None) -> Any:
        try:
            return f()
        except Exception:
            return default

    members = safe(lambda: [n.get_name() for n in snode.get_nodes()], [])
    origins: list[str] = []
    for m in safe(lambda: list(snode.get_nodes()), []) or [snode]:
        node = getattr(m, "node", None)
        for o in sorted(safe(lambda: node.origins, ()) or (), key=lambda o: o.name):
            if o.name not in origins:
                origins.append(o.name)
    rw = getattr(snode, "read_writes", None)
    return {
        "name": safe(snode.get_name, "?"),
        "type": type(snode).__name__,
        "ir_type": type(getattr(snode, "node", None)).__name__ if getattr(snode, "node", None)
        is not None else None,
        "members": members,
        "origins": origins,
        "reads": sorted(safe(lambda: [d.name for d in rw.reads], []) or []),
        "writes": sorted(safe(lambda: [d.name for d in rw.writes], []) or []),
        "users": safe(lambda: _node_users(snode, members), []),
        "device": str(safe(snode.get_device, "")),
        "is_reduction": bool(safe(snode.is_reduction, False)),
        "is_extern": bool(safe(snode.is_extern, False)),
        "is_template": bool(safe(snode.is_template, False)),
    }


def _node_users(snode: Any, members: list[str]) -> list[str]:
    """The scheduler nodes that read what ``snode`` writes, by the names of the current node
    list (a user fused into another node is named by that node); not ``snode`` itself, not the
    graph's output. Torch 2.6+ keeps the users on the node's output buffers."""
    if hasattr(snode, "get_outputs"):
        users = [u for buf in snode.get_outputs() for u in getattr(buf, "users", ())]
    else:
        users = list(getattr(snode, "users", ()))
    fused = getattr(getattr(snode, "scheduler", None), "name_to_fused_node", None) or {}
    names = set()
    for u in users:
        if type(getattr(u, "node", None)).__name__ == "OutputNode":
            continue
        name = u.get_name()
        names.add(fused[name].get_name() if name in fused else name)
    return sorted(names - set(members) - {snode.get_name()})


def scheduler_node_text(snode: Any) -> str:
    try:
        return str(snode.debug_str())
    except Exception as e:
        return f"{getattr(snode, 'get_name', lambda: '?')()}: <debug_str failed: {e}>"


def kernel_provenance_args(node_schedule: Any, is_extern: bool) -> dict[str, Any]:
    """IR nodes and FX origins of the nodes one kernel computes (provenance hook arguments)."""
    ir_nodes: list[str] = []
    fx_nodes: list[str] = []
    stack: list[str] = []
    items = [node_schedule] if is_extern else list(node_schedule or [])
    for item in items:
        node = item if is_extern else getattr(item, "node", None)
        if node is None:
            continue
        try:  # an extern kernel is an IR buffer (buf5); IR files name its operation (op5)
            op_name = getattr(item, "get_operation_name", None) if is_extern else None
            ir_nodes.append(str((op_name and op_name()) or item.get_name()))
        except Exception:
            pass
        for o in getattr(node, "origins", ()) or ():
            if o.name not in fx_nodes:
                fx_nodes.append(o.name)
        try:
            for s in node.get_stack_traces():
                if s not in stack:
                    stack.append(s)
        except Exception:
            pass
    return {"ir_nodes": ir_nodes, "fx_nodes": fx_nodes, "stack_traces": stack}


def triton_version() -> str | None:
    try:
        import triton  # type: ignore[import-not-found]

        return str(triton.__version__)
    except Exception:
        return None



# -- process state (warm workers) ------------------------------------------------------------------

def reset_dynamo() -> None:
    """Forget every compiled frame (Dynamo caches, guards) and clear Dynamo's counters."""
    import torch._dynamo

    torch._dynamo.reset()
    try:
        from torch._dynamo.utils import counters

        counters.clear()
    except ImportError:
        pass


def lowering_checkpoint() -> Callable[[], None]:
    """Remember Inductor's lowering and fallback tables; the returned function drops what was
    registered since (a warm-up compile must not leak registrations into later jobs)."""
    from torch._inductor import lowering

    lowerings_before = set(lowering.lowerings)
    fallbacks_before = set(getattr(lowering, "fallbacks", ()) or ())

    def restore() -> None:
        for key in set(lowering.lowerings) - lowerings_before:
            lowering.lowerings.pop(key, None)
        fb = getattr(lowering, "fallbacks", None)
        if isinstance(fb, set):
            fb.difference_update(fb - fallbacks_before)

    return restore


def is_op_overload(target: Any) -> bool:
    return isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket))


def higher_order_name(target: Any) -> str | None:
    if isinstance(target, torch._ops.HigherOrderOperator):
        return str(target.name())
    return None


# -- Inductor's compiler bisector (tuidebug bisect) -----------------------------------------------
# The bisector re-runs a test while it disables backends (eager, aot_eager, …, inductor), then
# Inductor subsystems (pre/joint/post-grad passes, lowerings, cudagraphs, some config changes),
# and bisects the number of applications of the subsystem that fixes the failure.

COMPILER_BISECTOR = "torch._inductor.compiler_bisector.CompilerBisector"
BISECT_CALL_COUNTER = "torch._inductor.compiler_bisector.subsystem_call_counter"
# what tuidebug uses of CompilerBisector (torch 2.8+)
_BISECTOR_API = ("do_bisect", "get_backend", "get_subsystem", "get_run_state",
                 "delete_bisect_status", "in_process_cache", "bisection_enabled")


def compiler_bisector() -> Any:
    """``CompilerBisector``, with every attribute tuidebug uses; NotAvailable otherwise."""
    owner, name = _resolve(COMPILER_BISECTOR)
    cb = getattr(owner, name)
    for attr in _BISECTOR_API:
        if not hasattr(cb, attr):
            raise NotAvailable(f"{COMPILER_BISECTOR}.{attr}")
    return cb


def _bisect_env(cb: Any) -> dict[str, str]:
    """The environment a test child needs for the bisector's current state (as its ``run``)."""
    env: dict[str, str] = {}
    backend = cb.get_backend()
    subsystem = cb.get_subsystem()
    if backend:
        env["TORCH_COMPILE_BACKEND"] = backend
        env["TORCH_BISECT_BACKEND"] = backend
    if subsystem and backend:
        env["TORCH_BISECT_SUBSYSTEM"] = subsystem
        if cb.get_run_state(backend, subsystem) == "test_disable":
            env["TORCH_BISECT_MAX"] = "-1"
    return env


def begin_bisect_run(state_dir: str) -> None:
    """In a warm worker: make the next compile obey the bisector state kept in ``state_dir``.

    The bisector reads its state from ``TORCH_BISECT_*`` (read once per process) or else from
    files under its directory; a worker started without those variables uses the files, which
    the parent's ``do_bisect`` updates between runs. Per-run call counters start at zero.
    """
    cb = compiler_bisector()
    owner, name = _resolve(BISECT_CALL_COUNTER)
    getattr(owner, name).clear()
    cb.in_process_cache = state_dir
    cb.bisection_enabled = True


def end_bisect_run() -> None:
    cb = compiler_bisector()
    cb.bisection_enabled = False
    cb.in_process_cache = None


def run_bisect(is_good: Callable[[dict[str, str]], bool], state_dir: str,
               on_step: Callable[[str], None] | None = None) -> tuple[dict[str, Any] | None, str]:
    """Bisect with ``is_good(env)`` as the test: it runs a child process with ``env`` added
    (and ``TORCHINDUCTOR_CACHE_DIR=state_dir``, where the bisector keeps its state) and returns
    True when the failure did not happen. ``on_step`` gets the ``TORCH_BISECT_*`` settings of
    each run. Returns what was found (``backend``, ``subsystem``, ``bisect_number``,
    ``debug_info``; None when no backend reproduces the failure) and the bisector's output."""
    import contextlib
    import io
    import os

    cb = compiler_bisector()
    os.makedirs(state_dir, exist_ok=True)
    log = io.StringIO()
    cb.in_process_cache = state_dir
    cb.bisection_enabled = True

    def test() -> bool:
        env = _bisect_env(cb)
        if on_step:
            on_step(" ".join(f"{k}={v}" for k, v in sorted(env.items())
                             if k.startswith("TORCH_BISECT")) or "no bisection (plain run)")
        return is_good(env)

    with contextlib.redirect_stdout(log):
        try:
            result = cb.do_bisect(test)
        finally:
            cb.in_process_cache = None
            cb.bisection_enabled = False
    if result is None:
        return None, log.getvalue()
    return {k: getattr(result, k, None) for k in ("backend", "subsystem", "bisect_number",
                                                  "debug_info")}, log.getvalue()


# == warm candidate workers (tuidebug.minify.worker) ==============================================
# (kept as one section: tuidebug/proc.py's users; the rest of this module may be reorganised)

COMPILE_STACK = ("torch._dynamo", "torch._inductor.config", "torch._inductor.compile_fx")


def import_compile_stack() -> list[str]:
    """Import Dynamo, Inductor's config and its compile_fx (the expensive imports a warm worker
    pays once). Returns the modules this torch lacks (a candidate that needs one then fails
    with its own error, which the minifier reports)."""
    import importlib

    missing = []
    for name in COMPILE_STACK:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing

# == end of the warm candidate workers section =====================================================


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


def autotune_feedback(args: tuple[Any, ...], kwargs: Mapping[str, Any]
                      ) -> tuple[str, list[dict[str, Any]], list[tuple[Any, dict[str, Any], float | None]]]:
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


def copy_calling_convention(src: Callable[..., Any], dst: Callable[..., Any]) -> None:
    """Make ``dst`` (a wrapper of the compiled callable ``src``) called as ``src`` is: AOTAutograd
    passes the inputs of a "boxed" callable as one list."""
    if getattr(src, "_boxed_call", False):
        dst._boxed_call = True  # type: ignore[attr-defined]


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

    from tuidebug.trace import layout

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
