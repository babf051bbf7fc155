"""Where a script first reaches torch's compiler, and the compiler's config modules as they load:
what lets capture set up Dynamo and Inductor only once the script itself uses them. Importing
them costs seconds (``torch._dynamo`` loads half of ``torch._inductor``); a script that never
compiles, or fails before its first compile, should not pay for it.

``FirstCompile`` puts a trigger on each of ``COMPILER_ENTRIES`` (on the module's attribute,
right after the module loads: ``after_import``): the first call of any runs ``reach`` (capture
installs its hooks), then goes on as the call would have, through those hooks.
``set_when_loaded`` sets config flags on each config module right after its own code ran,
before the script can read or set one.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable, Mapping

from tuidebug.compiler.compat.after_import import after_import
from tuidebug.compiler.compat.inductor import config_modules, set_flags

# Where a compile starts, as (module, attribute): torch.compile (and what calls it: a module's
# compile(), the decorator); every Dynamo context that compiles (torch._dynamo.optimize,
# optimize_assert, export — and torch.compile's own, after it); Inductor called directly.
COMPILER_ENTRIES = (
    ("torch", "compile"),
    ("torch._dynamo.eval_frame", "OptimizeContext.__init__"),
    ("torch._inductor.compile_fx", "compile_fx"),
)


class FirstCompile:
    """Triggers on ``COMPILER_ENTRIES``: ``reach()`` runs once, at the first call of any (other
    threads calling one meanwhile wait until it is done). ``cancel()`` takes them off."""

    def __init__(self, reach: Callable[[], None],
                 failed: Callable[[Exception], None] = lambda e: None) -> None:
        self._reach = reach
        self._failed = failed  # told of an error in reach(): the user's call goes on all the same
        self._lock = threading.RLock()
        self.reached = False  # reach() has started (in the thread holding the lock)
        self.done = False  # and ended: another thread's first call waits for it
        self._cancels: list[Callable[[], None]] = []
        # (owner, name, original, trigger, the owner's own attribute or only inherited)
        self._armed: list[tuple[Any, str, Any, Any, bool]] = []
        self._off: set[Any] = set()  # triggers taken off their attribute
        self._through = threading.local()  # on: this thread calls an entry from its trigger

    def watch(self) -> "FirstCompile":
        for module, attribute in COMPILER_ENTRIES:
            self._cancels.append(after_import(
                module, lambda mod, attribute=attribute: self._arm(mod, attribute),
                self._failed))
        return self

    def fire_if_loaded(self) -> None:
        """``fire`` now where Dynamo is loaded already (its import cost paid): a callable the
        script compiled before may make its first compile without passing an entry (a
        non-Inductor backend's ``torch.compile`` result, called first inside the capture)."""
        if COMPILER_ENTRIES[1][0] in sys.modules:
            self.fire()

    def _arm(self, module: Any, attribute: str) -> None:
        with self._lock:
            if self.reached:  # loaded by capture's own install, or after it
                return
            *path, name = attribute.split(".")
            owner = module
            for part in path:
                owner = getattr(owner, part, None)
            original = getattr(owner, name, None) if owner is not None else None
            if not callable(original):
                return  # this torch has no such entry: the others still reach the compiler
            own = name in getattr(owner, "__dict__", {})
            trigger = self._trigger(owner, name, original)
            self._armed.append((owner, name, original, trigger, own))
            setattr(owner, name, trigger)

    def _trigger(self, owner: Any, name: str, original: Any) -> Callable[..., Any]:
        first = self

        def first_call(*args: Any, **kwargs: Any) -> Any:
            if not first.done:
                first.fire()
            if first_call in first._off and not getattr(first._through, "on", False):
                # as a call of the attribute: through what reach() (or the script) wrapped on
                # it; a wrapper that calls this trigger (kept before it was taken off) comes
                # back here, and goes on to the original
                first._through.on = True
                try:
                    return getattr(owner, name)(*args, **kwargs)
                finally:
                    first._through.on = False
            return original(*args, **kwargs)

        try:
            first_call.__wrapped__ = original  # type: ignore[attr-defined]
            first_call.__name__ = getattr(original, "__name__", name)
            first_call.__qualname__ = getattr(original, "__qualname__", name)
            first_call.__doc__ = getattr(original, "__doc__", None)
            first_call.__module__ = getattr(original, "__module__", first_call.__module__)
        except (AttributeError, TypeError):
            pass
        return first_call

    def fire(self) -> None:
        """Run ``reach`` once, the triggers taken off first (so that what it wraps on an entry
        wraps the original). An error in it goes to ``failed``, never into the user's call."""
        with self._lock:
            if self.reached:
                return
            self.reached = True
            try:
                self._disarm()
                self._reach()
            except Exception as e:
                self._failed(e)
            finally:
                self.done = True

    def _disarm(self) -> None:
        """Put back each entry whose attribute is still its trigger (a trigger wrapped since, by
        capture or the script, stays there: it calls the original, after ``reach``)."""
        for cancel in self._cancels:
            cancel()
        self._cancels = []
        for owner, name, original, trigger, own in reversed(self._armed):
            if owner.__dict__.get(name) is trigger:
                if own:
                    setattr(owner, name, original)
                else:
                    delattr(owner, name)
                self._off.add(trigger)

    def cancel(self) -> None:
        """Take the triggers off (those wrapped since stay, calling their original)."""
        with self._lock:
            self._disarm()


def set_when_loaded(settings: Mapping[str, Any],
                    applied: Callable[[str, Any, Callable[[], None]], None],
                    guard: Callable[[Callable[[], Any]], Any], *,
                    known_only: bool = False) -> list[Callable[[], None]]:
    """Set ``settings`` (keys as ``inductor.CACHES_OFF``'s) on each config module once it is
    imported (at once where it is loaded), in the importing thread (``inductor.set_flags``);
    ``applied`` is given the module's name, the module and what puts its values back. ``guard``
    runs each (a failure must not break the script's import). ``known_only``: a flag this torch
    lacks is left out, instead of failing. Returns the cancels of the hooks still waiting."""
    def apply(name: str, module: Any, flags: dict[str, Any]) -> None:
        guard(lambda: applied(name, module, set_flags(module, flags, known_only=known_only)))

    def failed(error: Exception) -> None:
        def fail() -> None:
            raise error
        guard(fail)

    return [after_import(name, lambda module, name=name, flags=flags: apply(name, module, flags),
                         failed)
            for name, flags in config_modules(settings).items()]
