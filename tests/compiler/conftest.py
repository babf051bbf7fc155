"""The warm recompile worker shared by the recompile and flag-demo tests (one per test module)."""

from __future__ import annotations

import pytest

from tuidebug.compiler.worker import RecompileWorker


@pytest.fixture(scope="module")
def worker():
    w = RecompileWorker(timeout=600).start()
    assert w.wait_ready(600), w.log_tail()
    yield w
    w.close()
