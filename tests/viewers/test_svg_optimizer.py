"""`tuidebug svg` of real compiled AdamW steps (tests/fixtures/adamw_step.py, traced once here):
the foreach implementation over 48 parameters and the for-loop one over 8. Neither graph has
module paths; each parameter's update is the same chain of ops, so the drawing shows that chain
once, each box saying how many parameters it stands for, instead of a box per parameter."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.fixtures.make_traces import ROOT, TraceSpec, make
from tuidebug.trace.format.reader import Trace
from tuidebug.viewers.svg import export

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' not installed")]

SCRIPT = ROOT / "tests" / "fixtures" / "adamw_step.py"
PARAMS = {"foreach": 48, "for-loop": 8}  # as the script builds them


@pytest.fixture(scope="module")
def adamw_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make(tmp_path_factory.mktemp("adamw") / "trace", TraceSpec(str(SCRIPT)))


def canvas(svg: Path) -> tuple[float, float]:
    head = svg.read_text()[:3000]
    w, h = (float(re.search(rf'{k}="([0-9.]+)pt"', head).group(1)) for k in ("width", "height"))
    return w, h


def test_an_adamw_step_is_drawn_as_one_update_with_counts(adamw_trace: Path, tmp_path: Path) -> None:
    seen = {}
    for rec in Trace(adamw_trace).graphs:
        graph = rec.final_graph()
        assert graph is not None and not any(n.module for n in graph)
        kind = "foreach" if any("_foreach_" in n.target for n in graph) else "for-loop"
        count = PARAMS[kind]
        e = export(adamw_trace, rec.id, out=tmp_path / f"{rec.id}.svg")
        res = e.dot
        # the same drawing whatever the parameter count: far fewer boxes than FX nodes, and
        # (foreach, 48 parameters) fewer than parameters
        assert res.shown <= 40 and res.shown * 6 < len(graph), (kind, res.shown, len(graph))
        if kind == "foreach":
            assert res.shown < count, res.shown
        what = "params" if kind == "for-loop" else "tensors"
        assert any(f"{count} {what} updated alike" in note for note in res.notes), res.notes
        boxes = [line for line in res.dot.source.splitlines() if 'id="alike:' in line]
        # each box stands for that node of every parameter: ×48, or a foreach op over 48 tensors
        says = [b for b in boxes if f"×{count}" in b or f"foreach over {count} tensors" in b]
        assert len(boxes) >= 10 and len(says) == len(boxes), (kind, boxes)
        svg = e.svg.read_text()
        assert f"×{count}" in svg and "alike:" in svg
        w, h = canvas(e.svg)  # fits a screen both ways
        assert max(w / h, h / w) <= 3 and max(w, h) <= 2500, (kind, w, h)
        seen[kind] = len(boxes)
    assert set(seen) == set(PARAMS), seen
