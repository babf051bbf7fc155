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
made while a listener runs (the whole call's timed calls) and calls Dynamo traces are not. A
listener answers whether it is done with that callable: once every listener is, its calls cost
a lookup until one of them asks to hear calls again (``wake``). Nothing of a call is kept
here: a listener that keeps something keeps what it needs.

The watch is the one patch of ``OptimizedModule.__call__`` (the capture's ``compat.Patcher``:
put back when the capture stops, however it stops). While a thread makes calls that must be as
untraced (``CaptureSession.bare``: the whole call's timed calls), the watch passes that
thread's calls straight to torch's own ``__call__``; another thread's calls meanwhile are
watched as ever. The timed calls call torch's own ``__call__`` directly (``unwatched``): no
frame of the capture's in them.
"""

from __future__ import annotations

import functools
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable

import torch

from tuidebug.compiler import compat
from tuidebug.compiler.capture.state import Concern


@dataclass(frozen=True)
class CompiledCall:
    """One user's call of a compiled callable that returned: ``compiled`` what torch.compile
    returned, ``eager`` what it was given, ``args``/``kwargs`` the call's, ``out`` what it
    returned, ``since`` this thread's count of graph calls when it began
    (``ThreadState.last_called``: the graphs it ran are those called since), ``collectives``
    the collectives this process issued while it ran (None where none are counted:
    ``CaptureSession.collectives``)."""

    compiled: Any
    eager: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    out: Any
    since: int = 0
    collectives: int | None = None


# a listener returns True when it needs no further call of that compiled callable (until woken)
Listener = Callable[[CompiledCall], bool]


class _Telling(threading.local):
    def __init__(self) -> None:
        self.depth = 0


class CompiledCalls(Concern):
    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self._listeners: list[tuple[str, Listener]] = []
        # what this capture's torch.compile returned for a module: id -> (a weak reference to
        # it, what it was given), the entry gone with the module (a compiled model the script
        # drops is freed as without tuidebug)
        self._modules: dict[int, tuple["weakref.ref[Any]", Any]] = {}
        self._telling = _Telling()
        self._torchs_call: Any = None  # OptimizedModule.__call__ as torch made it
        # compiled callables (by id) every listener is done with, and the wake count then
        self._done: dict[int, int] = {}
        self._wakes = 0

    def listen(self, what: str, listener: Listener) -> None:
        """Tell ``listener`` every user's call (in the order concerns listen) until it answers
        True for that callable; a failure in it is recorded as the capture's failure to record
        ``what``."""
        self._listeners.append((what, listener))
        self.wake()

    def wake(self) -> None:
        """A listener needs calls again, of every compiled callable."""
        self._wakes += 1

    def install_at_start(self, p: compat.Patcher) -> None:
        if self.session.check_accuracy:  # both listeners need the eager check
            p.wrap(compat.TORCH_COMPILE, self._wrap_compile)  # public: imports nothing

    def install(self, p: compat.Patcher) -> None:
        if self.session.check_accuracy:
            p.wrap(compat.OPTIMIZED_MODULE_CALL, self._wrap_module_call)
        # what the wrappers call of this capture's, from a frame Dynamo may run eagerly while
        # compiling is on: never compiled as the user's frames
        for own in (CompiledCalls._module, CompiledCalls._began, CompiledCalls._tell):
            compat.own_frame_skipped(own, callees=True)

    def unwatched(self, compiled: Any) -> Callable[..., Any]:
        """``compiled`` (what torch.compile returned) called as without tuidebug: a module
        through torch's own ``__call__``, not the watch."""
        torchs = self._torchs_call
        if torchs is None or self._module(compiled) is None:
            return compiled
        return functools.partial(torchs, compiled)

    def _module(self, mod: Any) -> Any:
        """What the compiled module ``mod`` was given, if this capture's torch.compile made it."""
        entry = self._modules.get(id(mod))
        return entry[1] if entry is not None and entry[0]() is mod else None

    def _keep_module(self, result: Any, model: Any) -> None:
        key, modules = id(result), self._modules

        def gone(ref: "weakref.ref[Any]") -> None:
            if key in modules and modules[key][0] is ref:
                del modules[key]
        modules[key] = (weakref.ref(result, gone), model)

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
        self._done.pop(id(result), None)  # a new callable (its id may be a freed one's)
        if isinstance(result, torch.nn.Module):
            self._keep_module(result, model)
            return result
        return compat.stand_in(result, self._began, functools.partial(self._tell, result, model))

    def _began(self) -> tuple[int, int | None]:
        """At a call's start: this thread's graph calls so far, this process's collectives."""
        count = self.session.collectives
        return self.session.tls.wrapped_calls, count() if count is not None else None

    def _wrap_module_call(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        calls = self
        self._torchs_call = orig

        def __call__(mod: Any, *args: Any, **kwargs: Any) -> Any:
            tls = calls.session.tls
            model = None if tls.bare else calls._module(mod)
            if model is None:
                return orig(mod, *args, **kwargs)
            tls.watched_calls += 1
            since = calls._began()
            out = orig(mod, *args, **kwargs)
            calls._tell(mod, model, args, kwargs, out, since)  # not a listener's own calls
            return out
        return functools.wraps(orig)(__call__)

    # -- telling ---------------------------------------------------------------------------------
    def _tell(self, compiled: Any, eager: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
              out: Any, since: tuple[int, int | None] = (0, None)) -> None:
        key = id(compiled)
        if (self._done.get(key) == self._wakes or self._telling.depth
                or self.session.tls.bare or torch.compiler.is_compiling()):
            return
        wakes = self._wakes  # a listener that wakes while it is told hears the next call
        count, began = self.session.collectives, since[1]
        issued = count() - began if count is not None and began is not None else None
        call = CompiledCall(compiled, eager, args, dict(kwargs), out, since[0], issued)
        self._telling.depth += 1
        try:
            done = True
            for what, listener in self._listeners:
                done = self.session.guarded(what, lambda listener=listener: listener(call)) \
                    is True and done
        finally:
            self._telling.depth -= 1
        if done:
            self._done[key] = wakes
