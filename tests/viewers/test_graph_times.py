"""The compiled graphs' own times against the eager graphs' (``--profile``'s totals, where no
whole call was measured): timed apart, so a verdict word only where the two p10–p90 spreads do
not overlap; inside them "not told apart from the noise"; a trace older than the spreads gets
times only. Traces written with the torch-free writer; ``info``, ``info --json`` and the TUI's
totals pane (the same function)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.queries.profile import profile_view
from tuidebug.trace.queries.summary import trace_summary
from tuidebug.viewers.info import render_summary
from tuidebug.viewers.profile_view import whole_text

MS = 1e-3
WORDS = ("faster", "slower")


def _run(median: float, p10: float | None = None, p90: float | None = None,
         n: int = 5) -> dict[str, Any]:
    """A side's timed runs as profile.json keeps them (milliseconds in, seconds out); without
    ``p10``: as a trace older than the spreads has them."""
    run: dict[str, Any] = {"wall_s": median * MS, "wall_min_s": (p10 or median) * MS}
    if p10 is not None:
        run.update(wall_p10_s=p10 * MS, wall_p90_s=p90 * MS, wall_n=n)
    return run


def _trace(tmp_path: Path, compiled: dict[str, Any], eager: dict[str, Any],
           backward: dict[str, Any] | None = None, kernel_s: float = 0.0) -> Path:
    """A profiled trace whose whole call was not measured (a rank that did not time it);
    ``kernel_s``: one C++ kernel's time (milliseconds), else no kernel."""
    w = TraceWriter(tmp_path / "t", command=["tuidebug", "trace", "--profile", "3", "s.py"])
    w.add_compile("0/0", {"graphs": []})
    w.write_compile("0/0", {"graphs": []})
    kernels = [{"graph": "0-0", "kernel": "cpp_fused_add_0", "kind": "cpp",
                "time_s": kernel_s * MS, "calls": 1}] if kernel_s else []
    entry: dict[str, Any] = {"runs": 3, "device": "cpu", "compiled": compiled, "eager": eager,
                             "kernels": kernels}
    if backward is not None:
        entry["backward"] = {**backward, "kernels": []}
    w.write_profile({"runs": 3, "compiles": {"0/0": entry}, "calls": [
        {"callable": "Model", "not_measured": "rank 1's collective counter did not install"}]})
    w.finish("ok")
    return tmp_path / "t"


def _shown(path: Path) -> tuple[str, dict[str, Any]]:
    s = trace_summary(Trace(path))
    console = Console(file=io.StringIO(), width=400, record=True, color_system=None)
    render_summary(s, console)
    return console.export_text(), s


def _line(text: str, start: str) -> str:
    return next(ln.strip() for ln in text.splitlines() if ln.strip().startswith(start))


def test_overlapping_spreads_give_no_verdict_word(tmp_path: Path) -> None:
    """The case of the issue: 1.2 ms compiled, 1.1 ms eager, each 3 runs with spreads that
    meet: it read '(1.02× SLOWER)'."""
    t = _trace(tmp_path, _run(1.2, 1.05, 1.4), _run(1.1, 1.0, 1.3),
               backward={"compiled": _run(2.0, 1.8, 2.4), "eager": _run(2.1, 1.9, 2.5)})
    text, s = _shown(t)
    head = _line(text, "where the time goes")
    assert "compiled 1.20 ms per call (p10–p90 1.05 ms–1.40 ms), eager 1.10 ms (p10–p90 " \
           "1.00 ms–1.30 ms): not told apart from the noise of 5 runs each (timed apart: " \
           "their p10–p90 overlap)" in head, head
    back = _line(text, "backward:")
    assert "not told apart from the noise of 5 runs each" in back, back
    for line in (head, back):
        assert not any(w in line.lower() for w in WORDS), line
        assert "no difference" not in line, line
    totals = s["profile"]["totals"]
    assert totals["verdict"] == "same" and totals["backward"]["verdict"] == "same", totals
    assert totals["compiled_spread"] == pytest.approx(
        {"median_s": 1.2 * MS, "p10_s": 1.05 * MS, "p90_s": 1.4 * MS, "min_s": 1.05 * MS, "n": 5})
    json.dumps(s["profile"])  # info --json serialises it
    pane = whole_text(profile_view(Trace(t))).plain  # the TUI's profile pane
    assert "not told apart from the noise of 5 runs each" in pane, pane
    assert not any(w in pane.lower() for w in WORDS), pane


def test_separated_spreads_give_the_word_with_the_spread(tmp_path: Path) -> None:
    t = _trace(tmp_path, _run(0.5, 0.48, 0.55), _run(1.1, 1.0, 1.3),
               backward={"compiled": _run(3.0, 2.8, 3.2), "eager": _run(2.0, 1.9, 2.1)})
    text, s = _shown(t)
    head = _line(text, "where the time goes")
    assert "compiled 500 µs per call (p10–p90 480 µs–550 µs), eager 1.10 ms (p10–p90 " \
           "1.00 ms–1.30 ms): compiled 2.20× faster, timed apart (compiled runs, then eager " \
           "runs; their p10–p90 of 5 runs each do not overlap)" in head, head
    back = _line(text, "backward:")
    assert "compiled 1.50× SLOWER, timed apart" in back, back
    totals = s["profile"]["totals"]
    assert (totals["verdict"], totals["backward"]["verdict"]) == ("faster", "slower"), totals
    pane = whole_text(profile_view(Trace(t))).plain
    assert "compiled 2.20× faster, timed apart" in pane, pane


def test_a_trace_older_than_the_spreads_gets_times_only(tmp_path: Path) -> None:
    """Medians alone (a trace made before the spreads were recorded), even far apart: no word."""
    t = _trace(tmp_path, _run(0.5), _run(1.1),
               backward={"compiled": _run(3.0), "eager": _run(2.0)})
    text, s = _shown(t)
    head, back = _line(text, "where the time goes"), _line(text, "backward:")
    assert "compiled 500 µs per call, eager 1.10 ms; generated kernels" in head, head
    assert "compiled 3.00 ms per call, eager 2.00 ms; generated kernels" in back, back
    for line in (head, back):
        assert not any(w in line.lower() for w in WORDS) and "noise" not in line, line
    totals = s["profile"]["totals"]
    assert totals["verdict"] is None and totals["compiled_spread"] is None, totals


def _diff_totals(a: Path, b: Path) -> tuple[list[str], Any]:
    """``diff``'s findings and its per-call totals table of two profiled traces."""
    from tuidebug.trace.diff.profile import profile_diff, profile_findings
    from tuidebug.trace.queries.verdict import format_duration
    from tuidebug.viewers.profile_view import profile_diff_tables

    p = profile_diff(Trace(a), Trace(b))
    assert p is not None
    return profile_findings(p, format_duration), profile_diff_tables(p)[0]


def _change_cell(table: Any, row: int) -> Any:
    return list(table.columns[3].cells)[row]  # the "change" column's cell of that row


def test_diff_colours_a_graph_time_change_only_where_the_runs_are_apart(tmp_path: Path) -> None:
    """Two traces timed in two processes: A's compiled graph 1.20 ms, B's 1.25 ms, their runs'
    spreads overlapping: no red '+50 µs', said as noise; 1.20 → 2.40 ms with spreads apart:
    red; traces without spreads: the change uncoloured, no word."""
    same_a = _trace(tmp_path / "a", _run(1.2, 1.05, 1.4), _run(1.1, 1.0, 1.3))
    same_b = _trace(tmp_path / "b", _run(1.25, 1.1, 1.45), _run(1.1, 1.0, 1.3))
    findings, table = _diff_totals(same_a, same_b)
    assert findings[0] == ("profiled compiled call (timed in two processes, not side by side): "
                           "1.20 ms → 1.25 ms: not told apart from the noise (their runs' p10–p90 "
                           "overlap)"), findings
    cell = _change_cell(table, 0)
    assert cell.plain == "+50.0 µs (not told apart)" and str(cell.style) == "dim", \
        (cell, cell.style)
    apart_b = _trace(tmp_path / "c", _run(2.4, 2.3, 2.6), _run(1.1, 1.0, 1.3))
    findings, table = _diff_totals(same_a, apart_b)
    assert findings[0].endswith("1.20 ms → 2.40 ms"), findings
    cell = _change_cell(table, 0)
    assert cell.plain == "+1.20 ms" and str(cell.style) == "red", (cell, cell.style)
    old_a = _trace(tmp_path / "d", _run(1.2), _run(1.1))
    old_b = _trace(tmp_path / "e", _run(2.4), _run(1.1))
    findings, table = _diff_totals(old_a, old_b)
    assert findings[0].endswith("1.20 ms → 2.40 ms"), findings
    cell = _change_cell(table, 0)
    assert cell.plain == "+1.20 ms" and str(cell.style) == "", (cell, cell.style)


def test_one_run_a_side_gives_no_word(tmp_path: Path) -> None:
    """``--profile 1``: each side's p10–p90 is one point, so any difference was "faster" or
    "SLOWER" ("their p10–p90 of 1 runs each do not overlap"); and in ``diff`` red or green.
    Below five runs a side: too few to tell, in info, --json, the TUI pane and diff."""
    one = _trace(tmp_path / "a", _run(0.5, 0.5, 0.5, n=1), _run(1.1, 1.1, 1.1, n=1),
                 backward={"compiled": _run(3.0, 3.0, 3.0, n=4),
                           "eager": _run(2.0, 1.9, 2.1, n=4)}, kernel_s=0.3)
    text, s = _shown(one)
    head, back = _line(text, "where the time goes"), _line(text, "backward:")
    assert "eager 1.10 ms (p10–p90 1.10 ms–1.10 ms): too few runs to tell (1; at least 5 " \
           "each); generated kernels" in head, head
    assert "too few runs to tell (4; at least 5 each)" in back, back
    for line in (head, back):
        assert not any(w in line.lower() for w in WORDS), line
    totals = s["profile"]["totals"]
    assert (totals["verdict"], totals["backward"]["verdict"]) == ("too_few_runs",) * 2, totals
    pane = whole_text(profile_view(Trace(one))).plain
    assert "too few runs to tell (1; at least 5 each)" in pane, pane
    assert not any(w in pane.lower() for w in WORDS), pane
    two = _trace(tmp_path / "b", _run(2.4, 2.4, 2.4, n=1), _run(1.1, 1.1, 1.1, n=1),
                 kernel_s=2.0)
    from tuidebug.trace.diff.profile import profile_diff, profile_findings
    from tuidebug.trace.queries.verdict import format_duration
    from tuidebug.viewers.profile_view import profile_diff_tables

    p = profile_diff(Trace(one), Trace(two))
    assert p is not None
    assert p["totals_changed"]["compiled_wall_s"] is None, p["totals_changed"]
    assert p["totals_few_runs"] == {"compiled_wall_s": 1, "eager_wall_s": 1}, p
    json.dumps(p)  # diff --json
    findings = profile_findings(p, format_duration)
    assert findings == ["profiled compiled call (timed in two processes, not side by side): "
                        "500 µs → 2.40 ms: too few runs to tell (1; at least 5 each)"], findings
    tables = profile_diff_tables(p)
    cell = _change_cell(tables[0], 0)
    assert cell.plain == "+1.90 ms (too few runs to tell (1; at least 5 each))" \
        and str(cell.style) == "dim", (cell, cell.style)
    # the kernel's +1.70 ms has no spread: not shown red after a total that tells nothing
    assert [r["delta"] for r in p["kernels"]] == [pytest.approx(1.7 * MS)], p["kernels"]
    rest = tables[1:]
    assert len(rest) == 1 and "not compared — the compiled call's change: too few runs to " \
        "tell (1; at least 5 each)" in rest[0].plain, rest


def test_parts_are_not_compared_after_a_total_not_told_apart(tmp_path: Path) -> None:
    """The compiled call's change inside the noise ("(noise)" in the totals row), yet the
    kernel table below showed the kernel's '+400 µs' in red, with no spread of its own."""
    a = _trace(tmp_path / "a", _run(1.2, 1.05, 1.4), _run(1.1, 1.0, 1.3), kernel_s=0.3)
    b = _trace(tmp_path / "b", _run(1.25, 1.1, 1.45), _run(1.1, 1.0, 1.3), kernel_s=0.7)
    from tuidebug.trace.diff.profile import profile_diff
    from tuidebug.viewers.profile_view import profile_diff_tables

    tables = profile_diff_tables(profile_diff(Trace(a), Trace(b)))  # type: ignore[arg-type]
    assert len(tables) == 2, tables
    assert tables[1].plain == ("time per kernel, source line and module: not compared — the "
                               "compiled call's change is not told apart from the noise (timed "
                               "in two processes; the parts have no spread of their own)"), tables
    # spreads apart: the kernel's change is listed
    c = _trace(tmp_path / "c", _run(2.4, 2.3, 2.6), _run(1.1, 1.0, 1.3), kernel_s=0.7)
    tables = profile_diff_tables(profile_diff(Trace(a), Trace(c)))  # type: ignore[arg-type]
    kernels = [t for t in tables if getattr(t, "title", "") == "time per kernel, largest "
               "changes first"]
    assert len(kernels) == 1 and list(kernels[0].columns[3].cells)[0].plain == "+400 µs", tables
