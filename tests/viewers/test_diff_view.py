"""The rich rendering of a trace comparison (``viewers/diff_view.py``) on real traces: what a
person reads in ``tuidebug diff`` and on the TUI's compare screen."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from rich.console import Console

from tuidebug.trace.diff import diff_traces
from tuidebug.viewers.diff_view import render_diff


def rendered(d: dict, **kw) -> str:  # noqa: ANN003
    console = Console(file=io.StringIO(), width=200, record=True, color_system=None)
    render_diff(d, console, **kw)
    return console.export_text()


def edited_kernel(mlp_trace: Path, copy_trace) -> tuple[Path, str]:  # noqa: ANN001
    """A copy of the mlp trace with one generated kernel's code changed by one line."""
    t = copy_trace(mlp_trace, "edited")
    gdir = next((t / "graphs").iterdir())
    index = json.loads((gdir / "code" / "kernels.json").read_text())
    k = next(k for k in index["kernels"] if k["kind"] != "extern" and k.get("file"))
    path = gdir / k["file"]
    path.write_text(path.read_text() + "\n// planted by the test: one more line\n")
    return t, k["name"]


def test_a_changed_kernel_is_listed_with_its_code_diff(mlp_trace: Path, copy_trace) -> None:
    other, kernel = edited_kernel(mlp_trace, copy_trace)
    d = diff_traces(mlp_trace, other)
    text = rendered(d)
    assert str(mlp_trace) in text and str(other) in text
    assert "what changed" in text and d["lines"]
    for line in d["lines"]:  # every finding, in the panel
        assert line[:60] in text
    row = next(ln for ln in text.splitlines() if ln.lstrip().startswith("changed") and kernel in ln)
    assert re.search(r"\+[12] −0", row), row  # the diff's size in the kernels table
    assert f"{kernel} → {kernel}" in text  # the code diff's panel
    assert "+// planted by the test: one more line" in text
    # without code, no diff panel; the table still lists the kernel
    plain = rendered(d, code=False)
    assert "planted by the test" not in plain and kernel in plain


def test_a_long_code_diff_is_cut_at_max_lines(mlp_trace: Path, copy_trace) -> None:
    other, kernel = edited_kernel(mlp_trace, copy_trace)
    d = diff_traces(mlp_trace, other)
    k = next(k for g in d["graphs"] for k in g["kernels"] if k["status"] == "changed")
    total = len(k["diff"].splitlines())
    assert total > 3
    text = rendered(d, max_code_lines=3)
    assert f"… {total - 3} more lines (--max-lines)" in text


def test_a_trace_against_itself_says_so(mlp_trace: Path) -> None:
    d = diff_traces(mlp_trace, mlp_trace)
    text = rendered(d)
    assert not any(ln.startswith(("kernels:", "status:", "config ")) for ln in d["lines"])
    for line in d["lines"]:  # the same compile time, say: still in the panel
        assert f"• {line}" in text
    kernels = [k for g in d["graphs"] for k in g["kernels"]]
    assert kernels and all(k["status"] == "unchanged" for k in kernels)
    # each is listed for its times, or counted as unchanged
    listed = [k for k in kernels if k["a"] in text]
    if len(listed) < len(kernels):
        assert f"{len(kernels)} kernel{'s' if len(kernels) != 1 else ''} unchanged" in text
    assert "only in A" not in text and "only in B" not in text
    assert not any(ln.lstrip().startswith(("changed", "added", "removed"))
                   for ln in text.splitlines())
    everything = rendered(d, unchanged=True)
    assert all(k["a"] in everything for k in kernels)


def test_graphs_in_one_trace_only_are_marked(mlp_trace: Path, transformer_trace: Path) -> None:
    d = diff_traces(mlp_trace, transformer_trace)
    text = rendered(d)
    only_a = [g["id"] for g in d["graphs"] if g["in"] == "a"]
    only_b = [g["id"] for g in d["graphs"] if g["in"] == "b"]
    assert only_a and only_b
    for gid in only_a:
        assert f"graph {gid} " in text and "(only in A)" in text
    for gid in only_b:
        assert f"graph {gid} " in text and "(only in B)" in text
    assert "OK" in text


def test_the_first_calls_table_sets_no_eager_time_beside_the_compiled_one(
        mlp_trace: Path, transformer_trace: Path) -> None:
    """Two cold calls side by side read as a speed-up never measured: the first-calls table
    shows the compiled first call only, as info and the overview do (--json keeps eager_s)."""
    d = diff_traces(mlp_trace, transformer_trace)
    assert d["runtime"], "the traces hold first calls"
    text = rendered(d)
    (header,) = [line for line in text.splitlines() if "compiled first call" in line
                 and "matches eager" in line]
    assert [c.strip() for c in re.split(r"[┃│|]", header) if c.strip()] == [
        "compile", "compiled first call", "matches eager", "max abs err"], header
    for r in d["runtime"]:
        assert "eager_s" in r
