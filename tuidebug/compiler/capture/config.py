"""config.json: the Inductor config in force for the capture's first compile; ``Changes``: the
compiler config changes in force during a capture."""

from __future__ import annotations

import contextvars
import threading
from typing import Any, Callable, Mapping

from tuidebug.compiler import compat
from tuidebug.compiler.capture.state import Concern

# The settings tuidebug itself needs (written into the trace): kernel provenance
TUIDEBUG_CONFIG = {"trace.provenance_tracking_level": 1}


class Config(Concern):
    """Writes config.json once, from inside the first compile (the graphs concern calls
    ``write`` where a torch.compile mode's own config patches are in force)."""

    written = False

    def write(self) -> None:
        if self.written:
            return
        writer = self.session.writer
        assert writer is not None
        values = compat.inductor_config_values()
        try:
            defaults = compat.inductor_config_defaults()
        except compat.NotAvailable as e:
            writer.warn(f"config defaults: {e}")
            defaults = {}
        changed = {k: {"value": v, "default": defaults[k]} for k, v in values.items()
                   if k in defaults and _jsonish(v) != _jsonish(defaults[k])}
        writer.write_config({
            "values": {k: _jsonish(v) for k, v in values.items()},
            "changed": {k: {"value": _jsonish(d["value"]), "default": _jsonish(d["default"])}
                        for k, d in changed.items()},
            "set_by_tuidebug": sorted(k for k in changed if k in TUIDEBUG_CONFIG
                                      or k in compat.CACHES_OFF),
        })
        self.written = True


def _jsonish(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonish(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonish(x) for k, x in v.items()}
    return repr(v)


class Changes:
    """Compiler config changes in force until ``close()``, each set as soon as its config
    module is loaded (``compat.set_when_loaded``), in the thread that loads it (the capture's
    starting thread where the module is loaded when the capture starts), and at ``reach()`` in
    each thread that compiles: torch's config values are per thread (torch 2.13 on: a context
    variable per flag, which a new thread starts without). ``close()`` puts back every change
    made in its own thread, and, where values are not per thread, every other; a change left
    in another thread's values (only that thread can put it back) is said in a trace warning.

    Where a change was made is marked by a context variable of this object's, set in the
    values it was made in: a thread starts without it, as it starts without torch's values (a
    thread's ident, reused by Python once a thread ends, took a new thread for the dead one,
    its changes made)."""

    def __init__(self, guard: Callable[[Callable[[], Any]], Any],
                 warn: Callable[[str], None]) -> None:
        self._guard = guard  # a failure must not break the script's import
        self._warn = warn
        self._lock = threading.Lock()
        self._settings: list[tuple[Mapping[str, Any], bool]] = []
        # (setting, module name, the values' mark or None where values are not per thread)
        # set -> put back
        self._applied: dict[tuple[int, str, object | None], Callable[[], None]] = {}
        self._waiting: list[Callable[[], None]] = []
        self._mark: contextvars.ContextVar[object] = contextvars.ContextVar(
            "tuidebug_config_changes")

    def set(self, changes: Mapping[str, Any], *, known_only: bool = False) -> None:
        """``changes`` (keys as ``compat.CACHES_OFF``'s) in force from their module's load;
        ``known_only``: a flag this torch lacks is left out."""
        index = len(self._settings)
        self._settings.append((dict(changes), known_only))
        self._waiting += compat.set_when_loaded(
            changes, lambda name, module, put_back: self._keep(index, name, module, put_back),
            self._guard, known_only=known_only)

    def _here(self) -> object:
        """The mark of the values this thread sees (made where it has none yet)."""
        mark = self._mark.get(None)
        if mark is None:
            mark = object()
            self._mark.set(mark)
        return mark

    def _key(self, index: int, name: str, module: Any) -> tuple[int, str, object | None]:
        per_thread = compat.config_per_thread(module)
        return (index, name, self._here() if per_thread else None)

    def _keep(self, index: int, name: str, module: Any, put_back: Callable[[], None]) -> None:
        with self._lock:
            self._applied.setdefault(self._key(index, name, module), put_back)

    def reach(self) -> None:
        """This thread reached the compiler: every change not yet made in its values is made
        (a module loaded in another thread set that thread's only)."""
        for index, (changes, known_only) in enumerate(self._settings):
            for name, module, flags in compat.loaded_config_modules(changes):
                with self._lock:
                    if self._key(index, name, module) in self._applied:
                        continue  # made here (the script may have set its own flags since)
                self._guard(lambda index=index, name=name, module=module, flags=flags: self._keep(
                    index, name, module, compat.set_flags(module, flags, known_only=known_only)))

    def close(self) -> None:
        """Every change put back that this thread can, the last first; none made from now on."""
        for cancel in self._waiting:
            cancel()
        self._waiting = []
        with self._lock:
            applied, self._applied = list(self._applied.items()), {}
        me = self._here()
        others: set[int] = set()
        for (_, _, mark), put_back in reversed(applied):
            if mark is None or mark is me:
                self._guard(put_back)
            else:
                others.add(id(mark))
        if others:
            self._warn(f"the capture's compiler config changes (caches off, provenance on, "
                       f"--set) stay in force in {len(others)} other thread(s) that loaded or "
                       "first reached the compiler: torch's config is per thread, and only that "
                       "thread can put its values back")
