"""examples/item_per_layer.py compiled and eager, as two calls of no arguments, and a clock that
times one call (synchronized on CUDA): what bench/interleave_order.py and bench/after_profile.py
time, built one way."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def item_calls(device: str, layers: int = 8, dim: int = 16,
               clock: Callable[[], float] = time.perf_counter
               ) -> tuple[Callable[[], None], Callable[[], None], Callable[[Callable[[], Any]], float]]:
    """``(compiled call, eager call, timer)``: the model with ``layers`` layers on ``device``
    (seeded), each call under ``no_grad``; ``timer(f)`` is the seconds of one call of ``f`` by
    ``clock``."""
    from item_per_layer import ItemPerLayer

    torch.manual_seed(0)
    model = ItemPerLayer(layers, dim).to(device)
    compiled = torch.compile(model)
    x = torch.randn(8, dim, device=device)
    on_gpu = device == "cuda"

    def c() -> None:
        with torch.no_grad():
            compiled(x)

    def e() -> None:
        with torch.no_grad():
            model(x)

    def t(f: Callable[[], Any]) -> float:
        if on_gpu:
            torch.cuda.synchronize()
        t0 = clock()
        f()
        if on_gpu:
            torch.cuda.synchronize()
        return clock() - t0

    return c, e, t
