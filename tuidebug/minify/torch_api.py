"""The one module of ``tuidebug.minify`` that uses private torch APIs — feature-detected.

Today that is Inductor's compiler bisector (``torch._inductor.compiler_bisector``), which
re-runs a test while it disables backends (eager, aot_eager, …, inductor), then Inductor
subsystems (pre/joint/post-grad passes, lowerings, cudagraphs, some config changes), and
bisects the number of applications of the subsystem that fixes the failure. Importing this
module imports torch.
"""

from __future__ import annotations

import contextlib
import io
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator

REQUIRED = ("do_bisect", "get_backend", "get_subsystem", "get_run_state", "delete_bisect_status",
            "in_process_cache", "bisection_enabled")


class NotAvailable(Exception):
    """The private torch API this needs is missing from the installed torch."""


@dataclass
class BisectOutcome:
    """What the bisector found: the backend, the subsystem and which application of it."""

    backend: str | None
    subsystem: str | None = None
    bisect_number: int | None = None
    debug_info: str | None = None
    log: str = ""

    def describe(self) -> str:
        if self.backend is None:
            return "no backend reproduces the failure (it does not happen under the bisector)"
        if self.backend != "inductor" and self.subsystem is None:
            return f"the failure already happens with backend {self.backend!r} (before Inductor)"
        if self.subsystem is None:
            return (f"the failure is in backend {self.backend!r}, but disabling none of its "
                    "subsystems fixes it")
        text = f"backend {self.backend!r}, subsystem {self.subsystem!r}"
        if self.bisect_number is not None and self.debug_info and \
                self.debug_info != self.subsystem:
            text += f", application #{self.bisect_number}: {self.debug_info}"
        return text


def torch_version() -> str:
    import torch

    return str(torch.__version__)


def compiler_bisector() -> Any:
    """``torch._inductor.compiler_bisector.CompilerBisector``, or NotAvailable."""
    try:
        from torch._inductor.compiler_bisector import CompilerBisector
    except ImportError as e:
        raise NotAvailable(f"torch._inductor.compiler_bisector is not available in torch "
                           f"{torch_version()} ({e})") from e
    missing = [a for a in REQUIRED if not hasattr(CompilerBisector, a)]
    if missing:
        raise NotAvailable(f"CompilerBisector in torch {torch_version()} lacks "
                           f"{', '.join(missing)}; bisect needs the torch 2.8+ API")
    return CompilerBisector


def bisect_env(cb: Any) -> dict[str, str]:
    """The environment a test child needs for the bisector's current state (as its ``run``)."""
    env: dict[str, str] = {}
    backend = cb.get_backend()
    subsystem = cb.get_subsystem()
    if backend:
        env["TORCH_COMPILE_BACKEND"] = backend
        env["TORCH_BISECT_BACKEND"] = backend
    if subsystem and backend:
        env["TORCH_BISECT_SUBSYSTEM"] = subsystem
        if cb.get_run_state(backend, subsystem) == "test_disable":
            env["TORCH_BISECT_MAX"] = "-1"
    return env


def begin_bisect_run(state_dir: str) -> None:
    """In a warm worker: make the next compile obey the bisector state kept in ``state_dir``.

    The bisector reads its state from ``TORCH_BISECT_*`` (read once per process) or else from
    files under its directory; a worker started without those variables uses the files, which
    the parent's ``do_bisect`` updates between runs. Per-run call counters start at zero.
    """
    cb = compiler_bisector()
    import torch._inductor.compiler_bisector as mod

    counter = getattr(mod, "subsystem_call_counter", None)
    if counter is None:
        raise NotAvailable(f"compiler_bisector in torch {torch_version()} keeps no call counter")
    counter.clear()
    cb.in_process_cache = state_dir
    cb.bisection_enabled = True


def end_bisect_run() -> None:
    cb = compiler_bisector()
    cb.bisection_enabled = False
    cb.in_process_cache = None


@contextlib.contextmanager
def _quiet(log: io.StringIO) -> Iterator[None]:
    with contextlib.redirect_stdout(log):
        yield


def run_bisect(is_good: Callable[[dict[str, str]], bool], state_dir: str,
               on_step: Callable[[str], None] | None = None) -> BisectOutcome:
    """Bisect with ``is_good(env)`` as the test: it runs a child process with ``env`` added
    (and ``TORCHINDUCTOR_CACHE_DIR=state_dir``, where the bisector keeps its state) and returns
    True when the failure did not happen."""
    cb = compiler_bisector()
    os.makedirs(state_dir, exist_ok=True)
    log = io.StringIO()
    cb.in_process_cache = state_dir
    cb.bisection_enabled = True

    def test() -> bool:
        env = bisect_env(cb)
        if on_step:
            on_step(" ".join(f"{k}={v}" for k, v in sorted(env.items())
                             if k.startswith("TORCH_BISECT")) or "no bisection (plain run)")
        return is_good(env)

    with _quiet(log):
        try:
            result = cb.do_bisect(test)
        finally:
            cb.in_process_cache = None
            cb.bisection_enabled = False
    if result is None:
        return BisectOutcome(None, log=log.getvalue())
    return BisectOutcome(getattr(result, "backend", None), getattr(result, "subsystem", None),
                         getattr(result, "bisect_number", None),
                         getattr(result, "debug_info", None), log.getvalue())
