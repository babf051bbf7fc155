"""The first divergence says why the diverging rank compiled: a rank-only recompile's own graph
break (its reason and line) beside the guard that failed; every reason whole, one per line."""

from __future__ import annotations

import pytest

from tests.distributed.test_hangs import _line_of
from tests.distributed.test_ranks import _cli, _info
from tuidebug.viewers.ranks_view import divergence_lines


@pytest.mark.slow
def test_a_rank_only_recompile_names_its_own_graph_break(shapebreak_job) -> None:
    job, proc = shapebreak_job
    assert proc.returncode == 0, proc.stderr[-3000:]
    d = _info(job)["divergence"]
    assert d["kind"] == "compile_only_on_some_ranks", d
    assert (d["compile_id"], d["diverging_ranks"], d["on_reference"]) == ("0/1", [1], False)
    r = d["reason"]
    assert any("size mismatch at index 0" in x for x in r["recompile_reasons"]), r
    [b] = r["graph_break_reasons"]
    assert b["where"].endswith(f"rank_job.py:{_line_of('SHAPEBREAK only')}"), b
    assert "item()" in b["summary"], b
    text = _cli("info", str(job)).stdout
    assert "recompiled: 0/0: tensor 'x' size mismatch at index 0" in text, text
    assert "graph break at " in text and f"rank_job.py:{_line_of('SHAPEBREAK only')}" in text


def test_reasons_print_whole_one_per_line() -> None:
    """A recompile reason of several lines (or longer than a line) is printed whole, each of
    its lines on a line of its own (no literal \\n, no cut)."""
    long = "x" * 400
    d = {"kind": "compile_only_on_some_ranks", "compile_id": "4/1", "on_reference": False,
         "reference_ranks": [0], "diverging_ranks": [1],
         "reason": {"recompile_reasons": [f"4/0: tensor 'x' size mismatch\n{long}",
                                          "4/0: ___check_obj_id(self.mode)"],
                    "graph_break_reasons": [], "restart_reasons": [], "function": "f",
                    "file": "m.py", "line": 3}}
    lines = divergence_lines(d)
    assert lines[1:] == ["  recompiled: 4/0: tensor 'x' size mismatch", f"    {long}",
                         "  recompiled: 4/0: ___check_obj_id(self.mode)"]
    assert not any("\\n" in ln for ln in lines)
