"""config.json: the Inductor config in force for the capture's first compile; ``Changes``: the
compiler config changes in force during a capture."""

from __future__ import annotations

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
    module is loaded (``compat.set_when_loaded``), in the thread that loads it: torch's config
    values are per thread (torch 2.13 on), so the changes reach the thread that imports the
    compiler (the script's main thread, almost always: as when they were set at the capture's
    start) and are put back by ``close()`` in that thread (another thread's values cannot be
    reached from it: they stay, as that thread's own)."""

    def __init__(self, guard: Callable[[Callable[[], Any]], Any]) -> None:
        self._guard = guard  # a failure must not break the script's import
        self._lock = threading.Lock()
        self._applied: list[tuple[int, Callable[[], None]]] = []  # (thread, put back)
        self._waiting: list[Callable[[], None]] = []

    def set(self, changes: Mapping[str, Any], *, known_only: bool = False) -> None:
        """``changes`` (keys as ``compat.CACHES_OFF``'s) in force from their module's load;
        ``known_only``: a flag this torch lacks is left out."""
        self._waiting += compat.set_when_loaded(changes, self._keep, self._guard,
                                                known_only=known_only)

    def _keep(self, put_back: Callable[[], None]) -> None:
        with self._lock:
            self._applied.append((threading.get_ident(), put_back))

    def close(self) -> None:
        """Every change this thread made put back, the last first; none made from now on."""
        for cancel in self._waiting:
            cancel()
        self._waiting = []
        with self._lock:
            applied, self._applied = self._applied, []
        me = threading.get_ident()
        for thread, put_back in reversed(applied):
            if thread == me:
                self._guard(put_back)
