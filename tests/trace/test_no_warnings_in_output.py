"""Nothing of tuidebug's own reaches the user's output as a warning: a part of torch the
capture cannot hook in this torch version is a fact kept once in the trace (the manifest's
``not_available``, ``info --json``), never a ``warning:`` line (torch 2.11 printed
``CatchErrorsWrapper._handle_skip … not available`` on every trace), and the traced script's
stderr holds no Python warning raised in tuidebug's code (our compat once read a deprecated
``var_to_val`` on every dynamic-shape trace)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable

import pytest

from tests.fixtures.make_traces import SPECS
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.queries.summary import trace_summary
from tuidebug.viewers.info import render_summary

# a Python warning whose frame is in tuidebug's own code: ".../tuidebug/x.py:12: FutureWarning:"
OWN_WARNING = re.compile(r"tuidebug/[\w/]+\.py:\d+: \w*Warning:")


def _info_text(root: Path) -> str:
    from rich.console import Console

    console = Console(record=True, width=200)
    render_summary(trace_summary(Trace(root)), console)
    return console.export_text()


@pytest.mark.parametrize("name", list(SPECS))
def test_the_traced_scripts_output_holds_no_tuidebug_warning(
        name: str, live_traces: Callable[[str], Path]) -> None:
    """The output of a ``tuidebug trace`` run now, by this checkout's code (the committed
    traces' logs are what the code of their day printed): the live traces every slow run
    compiles once anyway (tests/test_committed_traces.py compiles each of SPECS)."""
    root = live_traces(name)
    log = (root.parent / f"{root.name}.log").read_text(errors="replace")
    assert log.startswith("rc="), log[:200]  # the run's own output, as make_traces keeps it
    assert not OWN_WARNING.search(log), (name, OWN_WARNING.search(log))
    assert "not available in torch" not in log, name
    m = Trace(root).manifest
    assert not [w for w in m.warnings if "not available in torch" in w], (name, m.warnings)


def test_what_this_torch_lacks_is_kept_once_and_not_warned(tmp_path: Path) -> None:
    w = TraceWriter(tmp_path / "t", command=["tuidebug", "trace", "x.py"],
                    versions={"torch": "2.11.0"})
    missing = ("torch._dynamo.convert_frame.CatchErrorsWrapper._handle_skip is not available "
               "in torch 2.11.0")
    for _ in range(3):  # every skipped frame would ask again
        w.not_available(missing)
    w.warn("nothing was compiled during the capture")
    w.finish("ok")
    raw = json.loads((tmp_path / "t" / "manifest.json").read_text())
    assert raw["not_available"] == [missing]
    assert raw["warnings"] == ["nothing was compiled during the capture"]
    t = Trace(tmp_path / "t")
    assert t.manifest.not_available == [missing]
    s = trace_summary(t)
    assert s["not_available"] == [missing] and missing not in s["warnings"]
    text = _info_text(tmp_path / "t")
    assert "_handle_skip" not in text, text
    assert "warning: nothing was compiled during the capture" in text, text
