"""The user's calls of what ``torch.compile`` returned, told to the concerns that listen (the
eager check's output names, ``returned``; ``--profile``'s whole call, ``whole_call``).

One patch of ``torch.compile`` while the capture runs (with the eager check on: both listeners
need it), and the user gets what torch.compile returned, or a stand-in it cannot tell apart:

- a module: the very ``OptimizedModule``; its calls are seen by wrapping the class's
  ``__call__`` for as long as the capture runs (only the instances this capture's
  ``torch.compile`` returned, held weakly, are told; no hook on the instance: its hooks,
  ``state_dict``, pickling and ``copy.deepcopy`` stay as torch made them);
- a function (``torch.compile(fn)``, and ``model.compile()``, which compiles the module's
  ``_call_impl``): a function calling it, of the same type, with its attributes
  (``compat.stand_in``: ``__wrapped__``, and what Dynamo reads — ``torch.compiler.disable`` of
  it disables the original, a call from inside another compiled region inlines the original —
  as of the result), its name, qualified name, doc and module.

A call is told once it returned, from the thread that made it (a ``CompiledCall``); calls
made while a listener runs (the whole call's timed calls) and calls Dynamo traces are not.
Nothing of a call is kept here: a listener that keeps something keeps what it needs.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch

from tuidebug.compiler import compat
from tuidebug.compiler.capture.state import Concern


@dataclass(frozen=True)
class CompiledCall:
    """One user's call of a compiled callable that returned: ``compiled`` what torch.compile
    returned, ``eager`` what it was given, ``args``/``kwargs`` the call's, ``out`` what it
    returned."""

    compiled: Any
    eager: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    out: Any


Listener = Callable[[CompiledCall], None]


class _Telling(threading.local):
    def __init__(self) -> None:
        self.depth = 0


class CompiledCalls(Concern):
    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self._listeners: list[tuple[str, Listener]] = []
        # what this capture's torch.compile returned -> what it was given (weakly: a compiled
        # model the script drops is freed as without tuidebug)
        self._modules: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()
        self._telling = _Telling()
        self._module_call: tuple[type, Any, Any] | None = None  # (class, torch's, the watch)

    def listen(self, what: str, listener: Listener) -> None:
        """Tell ``listener`` every user's call (in the order concerns listen); a failure in it
        is recorded as the capture's failure to record ``what``."""
        self._listeners.append((what, listener))

    def install(self, p: compat.Patcher) -> None:
        if not self.session.check_accuracy:  # both listeners need the eager check
            return
        p.wrap(compat.TORCH_COMPILE, self._wrap_compile)
        cls = compat.optimized_module_class()
        torchs = cls.__dict__.get("__call__") if cls is not None else None
        if p.wrap(compat.OPTIMIZED_MODULE_CALL, self._wrap_module_call) and cls is not None:
            self._module_call = (cls, torchs, cls.__dict__.get("__call__"))

    @contextlib.contextmanager
    def unwatched(self) -> Iterator[None]:
        """Compiled modules called through torch's own ``__call__`` inside the block (the
        whole call's timed calls: nothing of the capture's in them), watched again after."""
        mc = self._module_call
        if mc is None or mc[1] is None:
            yield
            return
        cls, torchs, watch = mc
        cls.__call__ = torchs  # type: ignore[method-assign]
        try:
            yield
        finally:
            if cls.__dict__.get("__call__") is torchs:
                cls.__call__ = watch  # type: ignore[method-assign]

    # -- torch.compile ---------------------------------------------------------------------------
    def _wrap_compile(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        def compile(*args: Any, **kwargs: Any) -> Any:
            if not args and "model" not in kwargs:  # @torch.compile(mode=…): a decorator
                return lambda model: compile(model, **kwargs)
            result = orig(*args, **kwargs)
            model = args[0] if args else kwargs["model"]
            watched = self.session.guarded("the compiled callable's calls",
                                           lambda: self._watch(model, result))
            return result if watched is None else watched
        return functools.wraps(orig)(compile)

    def _watch(self, model: Any, result: Any) -> Any:
        if result is model or not callable(result) or not self._listeners:
            return result
        if isinstance(result, torch.nn.Module):
            self._modules[result] = model
            return result
        return compat.stand_in(result, lambda args, kwargs, out: self._tell(
            result, model, args, kwargs, out))

    def _wrap_module_call(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        calls = self

        def __call__(mod: Any, *args: Any, **kwargs: Any) -> Any:
            model = calls._modules.get(mod)
            if model is None:
                return orig(mod, *args, **kwargs)
            calls.session.watched_calls += 1
            out = orig(mod, *args, **kwargs)
            calls._tell(mod, model, args, kwargs, out)  # not a listener's own calls
            return out
        return functools.wraps(orig)(__call__)

    # -- telling ---------------------------------------------------------------------------------
    def _tell(self, compiled: Any, eager: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
              out: Any) -> None:
        if self._telling.depth or torch.compiler.is_compiling():
            return
        call = CompiledCall(compiled, eager, args, dict(kwargs), out)
        self._telling.depth += 1
        try:
            for what, listener in self._listeners:
                self.session.guarded(what, lambda listener=listener: listener(call))
        finally:
            self._telling.depth -= 1
