"""``compat.after_import`` with loaders that are not a source file's own: one loader shared by
several modules (a finder returning itself), one without ``__dict__``, a finder that asks
``sys.meta_path`` again, and a hook that raises. Plain modules made here, no torch."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import Any, Iterator, Sequence

import pytest

from tuidebug.compiler.compat.after_import import _FINDER, after_import

SOURCES = {
    "ai_probe_outer": "import ai_probe_inner\nDONE = True\n",
    "ai_probe_inner": "DONE = True\n",
    "ai_probe_slots": "DONE = True\n",
    "ai_probe_ask": "DONE = True\n",
    "ai_probe_raise": "DONE = True\n",
}


class SharedLoader:
    """A finder that is also the loader of every module it finds (as zipimport's is shared)."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: Any = None) -> Any:
        if name not in SOURCES or name == "ai_probe_slots":
            return None
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        exec(SOURCES[module.__name__], module.__dict__)


class SlotsLoader:
    """A loader without ``__dict__``."""

    __slots__ = ()

    def find_spec(self, name: str, path: Sequence[str] | None, target: Any = None) -> Any:
        return importlib.util.spec_from_loader(name, self) if name == "ai_probe_slots" else None

    def create_module(self, spec: Any) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        exec(SOURCES[module.__name__], module.__dict__)


class AskingFinder:
    """A finder that delegates to the other finders on ``sys.meta_path`` (as some do)."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: Any = None) -> Any:
        if name != "ai_probe_ask":
            return None
        for finder in list(sys.meta_path):
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                return spec
        return None


@pytest.fixture
def finders() -> Iterator[SharedLoader]:
    shared = SharedLoader()
    added = [AskingFinder(), shared, SlotsLoader()]
    sys.meta_path.extend(added)
    try:
        yield shared
    finally:
        for f in added:
            sys.meta_path.remove(f)
        for name in SOURCES:
            sys.modules.pop(name, None)


def test_a_shared_loader_runs_a_hook_on_its_own_module_only(finders: SharedLoader) -> None:
    """The waited-for module imports another through the same loader while it runs: the hook
    runs once, on its own module, after its code ran (before, the loader's wrapped exec_module
    ran it when the inner module ended, with the outer one half-run); the loader is unchanged,
    and the module keeps it as its loader."""
    seen: list[tuple[str, bool]] = []
    after_import("ai_probe_outer", lambda m: seen.append((m.__name__, hasattr(m, "DONE"))))
    import ai_probe_outer  # type: ignore[import-not-found]

    assert seen == [("ai_probe_outer", True)]
    assert "exec_module" not in vars(finders)
    assert ai_probe_outer.__loader__ is finders and ai_probe_outer.__spec__.loader is finders
    assert _FINDER not in sys.meta_path


def test_a_loader_without_dict_is_hooked(finders: SharedLoader) -> None:
    seen: list[str] = []
    after_import("ai_probe_slots", lambda m: seen.append(m.__name__))
    import ai_probe_slots  # type: ignore[import-not-found]  # noqa: F401

    assert seen == ["ai_probe_slots"]  # before: imported without it, silently


def test_a_finder_asking_sys_meta_path_again_does_not_recurse(finders: SharedLoader) -> None:
    seen: list[str] = []
    after_import("ai_probe_ask", lambda m: seen.append(m.__name__))
    import ai_probe_ask  # type: ignore[import-not-found]  # noqa: F401  (RecursionError before)

    assert seen == ["ai_probe_ask"]


def test_a_hook_that_raises_is_told_and_the_import_goes_on(finders: SharedLoader) -> None:
    failed: list[Exception] = []

    def hook(module: ModuleType) -> None:
        raise ValueError("a hook's bug")

    after_import("ai_probe_raise", hook, failed.append)
    import ai_probe_raise  # type: ignore[import-not-found]

    assert ai_probe_raise.DONE
    assert [str(e) for e in failed] == ["a hook's bug"]
