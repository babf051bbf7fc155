"""Traces only the viewer tests need, compiled once per session (see tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import _make

INPLACE_SCRIPT = '''\
import torch

params = [torch.nn.Parameter(torch.randn(16)) for _ in range(2)]
opt = torch.optim.SGD(params, lr=0.1, foreach=True)
for p in params:
    p.grad = torch.randn(16)


@torch.compile
def step():
    opt.step()


@torch.compile
def bump(xs, ys):
    torch._foreach_add_(xs, ys)
    return [x * 2 for x in xs]


step()
bump([torch.randn(8), torch.randn(8)], [torch.ones(8), torch.ones(8)])
'''


@pytest.fixture(scope="session")
def transformer4_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four transformer blocks trained for one step: a joint graph of about 950 nodes."""
    return _make(tmp_path_factory, "transformer4", "transformer_block.py", "--layers", "4")


@pytest.fixture(scope="session")
def inplace_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An SGD step (foreach) and a ``torch._foreach_add_``, compiled."""
    script = tmp_path_factory.mktemp("scripts") / "foreach_step.py"
    script.write_text(INPLACE_SCRIPT)
    return _make(tmp_path_factory, "inplace", str(script))
