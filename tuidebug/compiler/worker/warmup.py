"""The server's warm-up: a small throw-away compile that pays Inductor's one-time costs (lazy
imports, pattern-matcher tables, the CPU ISA probe, the C++ compiler's first run) before any
job, and leaves no state behind that a forked job could see."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["warmup"]


_WARMUP_SCRIPT = '''
import torch

def f(x, w, b):
    h = torch.nn.functional.layer_norm(x @ w + b, (16,))
    return torch.softmax(h, -1).relu().sum(-1)

x = torch.randn(8, 16)
w = torch.randn(16, 16, requires_grad=True)
b = torch.randn(16, requires_grad=True)
torch.compile(f)(x, w, b).sum().backward()
'''


def warmup() -> None:
    """Compile a small model (training and inference) under capture, then forget it.

    Runs single-threaded (``compile_threads=1``, ``torch.set_num_threads(1)``) so that no thread
    pool exists when jobs are forked, and without capture's autotune hook (registering it makes
    Inductor build its autotune cache, whose key calls ``torch.cuda.current_device()``: CUDA must
    stay uninitialised in the server, or forked jobs cannot use it). Restores the RNG state,
    Dynamo's state, module counters and Inductor's lowering table (an implicit fallback
    registered here must not leak into a job).
    """
    import random
    import runpy
    import shutil

    import torch

    from tuidebug.compiler import compat
    from tuidebug.compiler.capture import capture

    def no_feedback(fn: Any) -> Any:
        raise compat.NotAvailable("autotune feedback (not installed during the warm-up)")

    orig_feedback = compat.add_autotune_feedback
    compat.add_autotune_feedback = no_feedback  # type: ignore[assignment]
    rng = torch.get_rng_state()
    py_rng = random.getstate()
    restore_lowerings = compat.lowering_checkpoint()
    threads = torch.get_num_threads()
    counters_before = _module_counters()
    tmp = Path(tempfile.mkdtemp(prefix="tuidebug-warmup-"))
    try:
        script = tmp / "warmup_model.py"
        script.write_text(_WARMUP_SCRIPT)
        torch.set_num_threads(1)
        with compat.inductor_config_patch({"compile_threads": 1}):
            with capture(tmp / "trace", use_cache=True, command=["warmup"]):
                runpy.run_path(str(script), run_name="__main__")
    finally:
        compat.add_autotune_feedback = orig_feedback  # type: ignore[assignment]
        torch.set_num_threads(threads)
        compat.reset_dynamo()
        restore_lowerings()
        torch.set_rng_state(rng)
        random.setstate(py_rng)
        _restore_module_counters(counters_before)
        shutil.rmtree(tmp, ignore_errors=True)


def _module_counters() -> dict[tuple[str, str], int]:
    """Module-level ``itertools.count`` values in torch (AOT ids, graph counters...)."""
    import itertools

    out = {}
    for name, mod in list(sys.modules.items()):
        if not name.startswith("torch") or mod is None:
            continue
        for attr, value in list(getattr(mod, "__dict__", {}).items()):
            if isinstance(value, itertools.count):
                try:
                    out[(name, attr)] = int(repr(value)[6:-1])
                except ValueError:
                    pass
    return out


def _restore_module_counters(before: dict[tuple[str, str], int]) -> None:
    """Put counters the warm-up advanced back, so that a job numbers things (``# AOT ID``,
    graph counters) as a fresh process would; counters of modules it imported restart at 0."""
    import itertools

    for (name, attr), value in _module_counters().items():
        start = before.get((name, attr), 0)
        if value != start:
            setattr(sys.modules[name], attr, itertools.count(start))
