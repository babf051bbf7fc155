"""What capture's first-compile trigger does when something goes wrong (in this process, tiny
functions, backend="eager"/"aot_eager"): the user's compile goes on as it would untraced, and the
trace says what capture could not do."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tuidebug.compiler import compat
from tuidebug.compiler.capture import capture
from tuidebug.trace.format.reader import Trace

pytestmark = pytest.mark.slow  # compiles in this process


def test_a_failing_compiler_import_never_breaks_the_users_compile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inductor failing to import (fault injected in capture's own import step) at the first
    torch.compile: a backend="eager" compile runs as untraced (it raised ImportError from
    torch.compile before), and the trace warns that capture could not hook the compiler."""
    def fails() -> None:
        raise ImportError("simulated: an Inductor module fails to import")

    monkeypatch.setattr(compat, "import_inductor", fails)
    torch._dynamo.reset()
    with capture(tmp_path / "t", check_accuracy=False):
        g = torch.compile(lambda x: x * 2, backend="eager")
        out = g(torch.ones(2))
    assert out.tolist() == [2.0, 2.0]
    warnings = Trace(tmp_path / "t").manifest.warnings
    assert any("failed to import" in w and "simulated" in w for w in warnings), warnings
