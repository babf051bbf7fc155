"""Code run right after a module is first imported (a post-import hook): how capture waits for
the script to load torch's compiler instead of loading it itself.

While a hook waits, a finder first on ``sys.meta_path`` finds nothing itself; for a module that
is waited for it asks the finders after it and returns a copy of their spec whose loader is a
proxy of theirs (one per import: a loader shared by modules or threads is never changed): the
hooks run once the module's own code has run, before the ``import`` statement that loaded it
returns (so before the importer can read or bind anything of it), and the module keeps the
real loader. A module already loaded runs its hooks at once. A hook that raises, or a module
that cannot be hooked (its loader has no ``exec_module``), is told to the hook's ``failed``.
"""

from __future__ import annotations

import copy
import sys
import threading
from types import ModuleType
from typing import Any, Callable, Sequence

Hook = Callable[[ModuleType], None]
Failed = Callable[[Exception], None]


class NotHooked(Exception):
    """A module imported without its hooks run (its loader could not be wrapped)."""


_lock = threading.RLock()
_waiting: dict[str, list[tuple[Hook, Failed | None]]] = {}
_finding = threading.local()  # names this thread is finding (a finder that asks sys.meta_path)


class _Loader:
    """The loader of one import of a waited-for module: the real loader's, then the hooks."""

    def __init__(self, name: str, loader: Any) -> None:
        self._name, self._loader = name, loader

    def create_module(self, spec: Any) -> Any:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        try:  # the module keeps the real loader
            if getattr(module, "__loader__", None) is self:
                module.__loader__ = self._loader
            spec = getattr(module, "__spec__", None)
            if spec is not None and spec.loader is self:
                spec.loader = self._loader
        except (AttributeError, TypeError):
            pass
        self._loader.exec_module(module)
        _run(self._name, sys.modules.get(self._name, module))

    def __getattr__(self, attr: str) -> Any:  # get_source, is_package, resource readers…
        return getattr(self._loader, attr)


class _Finder:
    """Finds nothing itself: a waited-for module's spec, its loader proxied."""

    def find_spec(self, name: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> Any:
        with _lock:
            if name not in _waiting:
                return None
        finding: set[str] = _finding.__dict__.setdefault("names", set())
        if name in finding:  # a finder after this one asked sys.meta_path again
            return None
        finding.add(name)
        try:
            spec = None
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if finder is _FINDER or find is None:
                    continue
                spec = find(name, path, target)
                if spec is not None:
                    break
        finally:
            finding.discard(name)
        loader = getattr(spec, "loader", None)
        if spec is None or loader is None:  # not found, or a namespace package: no code to run
            return spec
        if not hasattr(loader, "exec_module"):
            _fail(name, NotHooked(f"{name} was imported without capture's hooks: its loader "
                                  f"({type(loader).__name__}) has no exec_module"))
            return spec
        proxied = copy.copy(spec)
        proxied.loader = _Loader(name, loader)
        return proxied


_FINDER = _Finder()


def _fail(name: str, error: Exception) -> None:
    with _lock:
        hooks = list(_waiting.get(name, []))
    for _, failed in hooks:
        if failed is not None:
            failed(error)


def _run(name: str, module: ModuleType) -> None:
    with _lock:
        hooks = _waiting.pop(name, [])
        if not _waiting and _FINDER in sys.meta_path:
            sys.meta_path.remove(_FINDER)
    for hook, failed in hooks:
        _call(hook, failed, module)


def _call(hook: Hook, failed: Failed | None, module: ModuleType) -> None:
    try:
        hook(module)
    except Exception as e:  # never into the user's import
        if failed is not None:
            failed(e)


def after_import(name: str, hook: Hook, failed: Failed | None = None) -> Callable[[], None]:
    """Run ``hook(module)`` once module ``name`` is imported: at once where it is loaded, else
    right after its code has run (in the importing thread). An error in ``hook``, or the module
    imported without it (``NotHooked``), goes to ``failed``. Returns a function that cancels a
    hook still waiting."""
    entry = (hook, failed)
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            _waiting.setdefault(name, []).append(entry)
            if _FINDER not in sys.meta_path:
                sys.meta_path.insert(0, _FINDER)
    if module is not None:
        _call(hook, failed, module)

    def cancel() -> None:
        with _lock:
            hooks = _waiting.get(name)
            if hooks and entry in hooks:
                hooks.remove(entry)
                if not hooks:
                    del _waiting[name]
            if not _waiting and _FINDER in sys.meta_path:
                sys.meta_path.remove(_FINDER)
    return cancel
