"""The committed traces (tests/fixtures/traces.tar.gz) are what the real compiler makes today.

The fast tier reads them instead of compiling; these tests compile each one live and compare
what must not change from run to run (``make_traces.signature``). A failure means capture, an
example or the torch pin changed: remake them with ``python -m tests.fixtures.make_traces``."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path
from typing import Callable

import pytest

from tests.fixtures.make_traces import ROOT, SPECS, inputs, made_info, signature, unpack

MADE = made_info()


def test_the_committed_traces_were_made_by_the_pinned_torch() -> None:
    pin = re.search(r"^torch==(\S+)", (ROOT / "requirements-dev.txt").read_text(), re.M)
    assert pin, "requirements-dev.txt pins no torch"
    assert MADE["torch"] == pin.group(1), (
        f"tests/fixtures/traces.tar.gz was made with torch {MADE['torch']}, the pin is "
        f"{pin.group(1)}: remake it (python -m tests.fixtures.make_traces)")
    assert MADE["names"] == list(SPECS), MADE["names"]


def test_the_scripts_the_committed_runs_ran_are_unchanged() -> None:
    """An example (or compiler_texts.py, train_step.py, the DDP job) changed since the archive
    was made: its traces and TORCH_TRACE logs are of the old one."""
    changed = sorted(k for k, v in inputs().items() if MADE["inputs"].get(k) != v)
    assert not changed, (f"changed since tests/fixtures/traces.tar.gz was made: {changed}; "
                         "remake it (python -m tests.fixtures.make_traces)")


@pytest.fixture(scope="module")
def committed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return unpack(tmp_path_factory.mktemp("committed"))


@pytest.mark.skipif(version("torch") != MADE["torch"],
                    reason=f"the committed traces are torch {MADE['torch']}'s")
@pytest.mark.parametrize("name", list(SPECS))
def test_a_live_compile_makes_the_committed_trace(
        name: str, live_traces: Callable[[str], Path], committed: dict[str, Path]) -> None:
    want, got = signature(committed[name]), signature(live_traces(name))
    assert want["graphs"] and want["files"], want
    assert got == want, (f"{name}: a live compile no longer makes the committed trace; remake "
                         f"it: python -m tests.fixtures.make_traces {name}")
