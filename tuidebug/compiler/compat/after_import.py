"""Code run right after a module is first imported (a post-import hook): how capture waits for
the script to load torch's compiler instead of loading it itself.

While a hook waits, a finder first on ``sys.meta_path`` finds nothing itself; for a module that
is waited for it asks the finders after it and wraps that module's loader's ``exec_module``: the
hooks run once the module's own code has run, before the ``import`` statement that loaded it
returns (so before the importer can read or bind anything of it). A module already loaded runs
its hooks at once.
"""

from __future__ import annotations

import sys
import threading
from types import ModuleType
from typing import Any, Callable, Sequence

Hook = Callable[[ModuleType], None]

_lock = threading.RLock()
_waiting: dict[str, list[Hook]] = {}


class _Finder:
    """Finds nothing itself: wraps the loader of a module a hook waits for."""

    def find_spec(self, name: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> Any:
        with _lock:
            if name not in _waiting:
                return None
        spec = None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is _FINDER or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        # a loader of its own (a source file's): a shared one (a class, a namespace package's)
        # is left alone, and the import goes on without the hook
        if loader is None or isinstance(loader, type) or not hasattr(loader, "__dict__") \
                or not hasattr(loader, "exec_module"):
            return None
        exec_module = loader.exec_module

        def exec_then_hooks(module: ModuleType) -> None:
            try:
                exec_module(module)
            finally:
                loader.__dict__.pop("exec_module", None)
            _run(name, sys.modules.get(name, module))

        loader.exec_module = exec_then_hooks
        return spec


_FINDER = _Finder()


def _run(name: str, module: ModuleType) -> None:
    with _lock:
        hooks = _waiting.pop(name, [])
        if not _waiting and _FINDER in sys.meta_path:
            sys.meta_path.remove(_FINDER)
    for hook in hooks:
        hook(module)


def after_import(name: str, hook: Hook) -> Callable[[], None]:
    """Run ``hook(module)`` once module ``name`` is imported: at once where it is loaded, else
    right after its code has run (in the importing thread). ``hook`` must not raise. Returns a
    function that cancels a hook still waiting."""
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            _waiting.setdefault(name, []).append(hook)
            if _FINDER not in sys.meta_path:
                sys.meta_path.insert(0, _FINDER)
    if module is not None:
        hook(module)

    def cancel() -> None:
        with _lock:
            hooks = _waiting.get(name)
            if hooks and hook in hooks:
                hooks.remove(hook)
                if not hooks:
                    del _waiting[name]
            if not _waiting and _FINDER in sys.meta_path:
                sys.meta_path.remove(_FINDER)
    return cancel
