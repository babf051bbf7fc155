"""The warm recompile worker shared by the recompile and flag-demo tests (one per test module).

These tests check what capture writes now, so the shared traces here are compiled live
(``tests/conftest.py`` has the committed ones the reading tests share)."""

from __future__ import annotations

import pytest

from tests.conftest import live_trace_fixture
from tuidebug.compiler.worker import RecompileWorker

transformer_trace = live_trace_fixture("transformer")
dynamic_trace = live_trace_fixture("dynamic")
mlp_trace = live_trace_fixture("mlp")
failing_trace = live_trace_fixture("failing")
accuracy_trace = live_trace_fixture("accuracy")
graph_break_trace = live_trace_fixture("graph_break")
profiled_trace = live_trace_fixture("profiled")
profiled_training_trace = live_trace_fixture("profiled_training")


@pytest.fixture(scope="module")
def worker():
    w = RecompileWorker(timeout=600).start()
    assert w.wait_ready(600), w.log_tail()
    yield w
    w.close()
