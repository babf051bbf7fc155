"""Looking up torch internals by name, and wrapping them: ``NotAvailable`` where this torch
lacks one, ``Patcher`` to install wrappers and put every original back."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable

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


# the code objects marked before Dynamo was loaded: marked once it is (``mark_pending``)
_PENDING: list[tuple[Any, bool]] = []


def own_frame_skipped(fn: Any, callees: bool = False) -> bool:
    """Have Dynamo never compile a frame of ``fn`` (a wrapper of tuidebug's around something of
    torch's) as one of its own; it still traces through ``fn`` where it traces what calls it,
    and evaluates what ``fn`` calls as it would have untraced. Called from a frame Dynamo runs
    eagerly while compiling is on (a loop with a graph break, FSDP's hooks), a wrapper's frame
    was compiled as the user's code: a compile the job does not make untraced, named after
    tuidebug's file, and one that failed (``super(type, obj)`` in a compiled module's call
    wrapper, raised to the user's script). ``callees``: what ``fn`` calls too (tuidebug's own
    bookkeeping). Before Dynamo is loaded (wrappers installed at the start: ``torch.compile``'s,
    a rank's collectives'; loading it here would load it for scripts that never compile) the
    code is marked when ``mark_pending`` is called, at the first compile. False where this
    torch cannot skip a code object, or not yet."""
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None:
        return False
    if "torch._dynamo.eval_frame" not in sys.modules:
        _PENDING.append((code, callees))
        return False
    return _mark(code, callees)


def mark_pending() -> None:
    """Mark what ``own_frame_skipped`` was given before Dynamo was loaded (now it is)."""
    while _PENDING:
        _mark(*_PENDING.pop())


def _mark(code: Any, callees: bool) -> bool:
    try:
        from torch._dynamo.eval_frame import set_code_exec_strategy
        from torch._dynamo.types import FrameAction, FrameExecStrategy
    except ImportError:
        return False
    try:
        set_code_exec_strategy(code, FrameExecStrategy(
            FrameAction.SKIP, FrameAction.SKIP if callees else FrameAction.DEFAULT))
    except Exception:  # noqa: BLE001 - a wrapper Dynamo may compile, as before
        return False
    return True


_INHERITED = object()  # Patch.original of a class attribute the class only inherited


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
        # a class's attribute it inherits (not in its own __dict__): deleted again on restore
        original = (owner.__dict__.get(name, _INHERITED) if isinstance(owner, type)
                    else getattr(owner, name))
        replacement = make(getattr(owner, name))
        own_frame_skipped(replacement)
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
            if p.original is _INHERITED:
                delattr(p.owner, p.name)
            else:
                setattr(p.owner, p.name, p.original)


def _drop_cls(fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(cls: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)
    own_frame_skipped(call)
    return call
