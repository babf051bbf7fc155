"""Generated kernels: Triton autotuners and launchers, C++ kernel binaries, and timing the
kernels of a loaded wrapper module."""

from __future__ import annotations

from typing import Any, Callable

import torch


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
    """Wait for the current CUDA device: a kernel of a wrapper module is called inside the
    wrapper's device guard (Inductor's ``with torch.cuda._DeviceGuard(i)``: the kernel's own
    device is current there, whatever the user's current device is)."""
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


def wrap_kernel(module: Any, name: str,
                wrap: Callable[[Callable[..., Any], bool], Callable[..., Any]]
                ) -> Callable[[], None] | None:
    """Replace every call of kernel ``name`` of a wrapper module by ``wrap(call, is_triton)``;
    returns how to undo it (None: no such kernel). Triton kernels are called as
    ``name.run(...)``: ``run`` is shadowed on the object; C++ kernels are module globals."""
    obj = module.__dict__.get(name)
    if obj is None:
        return None
    if is_triton_kernel(obj):
        own = obj.__dict__.get("run", _MISSING)
        obj.run = wrap(obj.run, True)

        def undo_run() -> None:
            if own is _MISSING:
                obj.__dict__.pop("run", None)
            else:
                obj.run = own
        return undo_run
    if not callable(obj):
        return None
    setattr(module, name, wrap(obj, False))  # C++: a synchronous call by global name
    return lambda: setattr(module, name, obj)


def _time_kernel(module: Any, name: str, sink: list[float]) -> Callable[[], None] | None:
    """Time every call of kernel ``name`` of a wrapper module; returns how to undo it."""
    return wrap_kernel(module, name, lambda fn, triton: _timed(fn, sink, sync=triton))


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


def triton_version(*, load: bool = True) -> str | None:
    """Triton's version (None without it). ``load=False``: without importing it where it is not
    loaded yet (its installed distribution's version, which a nightly's pytorch-triton lacks)."""
    import sys

    if not load and "triton" not in sys.modules:
        from importlib import metadata

        try:
            return metadata.version("triton")
        except Exception:
            return None
    try:
        import triton  # type: ignore[import-not-found]

        return str(triton.__version__)
    except Exception:
        return None
