"""Inductor's compiler bisector (``tuidebug bisect``)."""

from __future__ import annotations

from typing import Any, Callable

from tuidebug.compiler.compat.lookup import NotAvailable, _resolve

# -- Inductor's compiler bisector (tuidebug bisect) -----------------------------------------------
# The bisector re-runs a test while it disables backends (eager, aot_eager, …, inductor), then
# Inductor subsystems (pre/joint/post-grad passes, lowerings, cudagraphs, some config changes),
# and bisects the number of applications of the subsystem that fixes the failure.

COMPILER_BISECTOR = "torch._inductor.compiler_bisector.CompilerBisector"
BISECT_CALL_COUNTER = "torch._inductor.compiler_bisector.subsystem_call_counter"
# what tuidebug uses of CompilerBisector (torch 2.8+)
_BISECTOR_API = ("do_bisect", "get_backend", "get_subsystem", "get_run_state",
                 "delete_bisect_status", "in_process_cache", "bisection_enabled")


def compiler_bisector() -> Any:
    """``CompilerBisector``, with every attribute tuidebug uses; NotAvailable otherwise."""
    owner, name = _resolve(COMPILER_BISECTOR)
    cb = getattr(owner, name)
    for attr in _BISECTOR_API:
        if not hasattr(cb, attr):
            raise NotAvailable(f"{COMPILER_BISECTOR}.{attr}")
    return cb


def _bisect_env(cb: Any) -> dict[str, str]:
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
    owner, name = _resolve(BISECT_CALL_COUNTER)
    getattr(owner, name).clear()
    cb.in_process_cache = state_dir
    cb.bisection_enabled = True


def end_bisect_run() -> None:
    cb = compiler_bisector()
    cb.bisection_enabled = False
    cb.in_process_cache = None


def run_bisect(is_good: Callable[[dict[str, str]], bool], state_dir: str,
               on_step: Callable[[str], None] | None = None) -> tuple[dict[str, Any] | None, str]:
    """Bisect with ``is_good(env)`` as the test: it runs a child process with ``env`` added
    (and ``TORCHINDUCTOR_CACHE_DIR=state_dir``, where the bisector keeps its state) and returns
    True when the failure did not happen. ``on_step`` gets the ``TORCH_BISECT_*`` settings of
    each run. Returns what was found (``backend``, ``subsystem``, ``bisect_number``,
    ``debug_info``; None when no backend reproduces the failure) and the bisector's output."""
    import contextlib
    import io
    import os

    cb = compiler_bisector()
    os.makedirs(state_dir, exist_ok=True)
    log = io.StringIO()
    cb.in_process_cache = state_dir
    cb.bisection_enabled = True

    def test() -> bool:
        env = _bisect_env(cb)
        if on_step:
            on_step(" ".join(f"{k}={v}" for k, v in sorted(env.items())
                             if k.startswith("TORCH_BISECT")) or "no bisection (plain run)")
        return is_good(env)

    with contextlib.redirect_stdout(log):
        try:
            result = cb.do_bisect(test)
        finally:
            cb.in_process_cache = None
            cb.bisection_enabled = False
    if result is None:
        return None, log.getvalue()
    return {k: getattr(result, k, None) for k in ("backend", "subsystem", "bisect_number",
                                                  "debug_info")}, log.getvalue()
