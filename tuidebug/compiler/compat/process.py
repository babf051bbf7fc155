"""Process-wide compiler state: what a warm worker resets between jobs; op kinds."""

from __future__ import annotations

from typing import Any, Callable

import torch


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


def has_fake_tensor(values: Any) -> bool:
    """Does a call get fake tensors (a compiler propagating shapes through a compiled piece,
    as DDPOptimizer does when it compiles each bucket's graph), not real ones?"""
    try:
        from torch._subclasses.fake_tensor import FakeTensor
    except ImportError:  # no fake tensors in this torch: every call is a real one
        return False
    return any(isinstance(v, FakeTensor) for v in values)


def higher_order_name(target: Any) -> str | None:
    if isinstance(target, torch._ops.HigherOrderOperator):
        return str(target.name())
    return None


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
