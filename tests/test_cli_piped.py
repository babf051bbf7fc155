"""What a command prints into a pipe or a file (``tuidebug info TRACE > out``, ``| grep``): no line
wrapped at 80 columns. Before, rich wrapped a pipe's output at 80: a location
(``modeling_utils.py:4761``) came out as ``…:476`` over ``1``, a table cut its cells with ``…``,
and grep or a copy missed them. On a terminal (or with ``COLUMNS``) rich wraps as before."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.box import HEAVY_HEAD, Box
from rich.markdown import Markdown
from rich.rule import Rule
from rich.table import Table

from tests.conftest import ROOT, pythonpath
from tuidebug.cli.pipe_console import FILL_WIDTH, PIPE_WIDTH, PipeConsole


def piped(tmp_path: Path, *args: str, columns: str | None = None) -> str:
    """``tuidebug ARGS > file`` with no terminal anywhere (stdin too: rich takes a terminal's
    width from stdin) and, unless given, no COLUMNS."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = pythonpath()
    if columns:
        env["COLUMNS"] = columns
    out = tmp_path / "out.txt"
    with out.open("w") as f:
        proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", *args], stdout=f,
                              stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                              cwd=ROOT, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return out.read_text()


def test_info_into_a_file_keeps_each_line_whole(tmp_path: Path, graph_break_trace: Path) -> None:
    s = json.loads(piped(tmp_path, "info", str(graph_break_trace), "--json"))
    text = piped(tmp_path, "info", str(graph_break_trace))
    lines = text.splitlines()
    # the advice says where the break is: "… at graph_break.py:36", on the line of its reason
    advice = s["advice"]["suggestions"]
    assert any("graph_break.py:" in a["why"] for a in advice), advice
    for a in advice:
        assert any(ln.strip() == f"why: {a['why']}" for ln in lines), (a["why"], text)
        assert any(ln.startswith(f"· {a['text']}") for ln in lines), (a["text"], text)
    # each compile's row holds its function's whole name (a resume function's is long)
    assert any(len(c["function"]) > 30 for c in s["compiles"]), s["compiles"]
    for c in s["compiles"]:
        assert any(ln.split()[:2] == [c["id"], c["function"]] for ln in lines), (c, text)
    # and each graph's row its every cell: the time uncut ("5.47 s", not "5.47…")
    assert s["graphs"]
    for g in s["graphs"]:
        row = next(ln for ln in lines if ln.split()[:1] == [g["id"]])
        assert "…" not in row and row.rstrip().endswith("s"), row
    assert max(map(len, lines)) > 80  # unwrapped, where rich had wrapped at 80
    # the same with a width asked for: wrapped there, as a terminal of that width would be
    narrow = piped(tmp_path, "info", str(graph_break_trace), columns="80").splitlines()
    assert max(map(len, narrow)) <= 80 and len(narrow) > len(lines)


def test_diff_into_a_file_draws_each_box_round_what_it_holds(tmp_path: Path, mlp_trace: Path,
                                                             profiled_trace: Path) -> None:
    """A panel fills the width it is given: each is laid out as wide as its own longest line,
    not as the widest thing printed nor at PIPE_WIDTH."""
    text = piped(tmp_path, "diff", str(mlp_trace), str(profiled_trace))
    lines = text.splitlines()
    top = next(i for i, ln in enumerate(lines) if ln.startswith("╭─ what changed"))
    bottom = next(i for i in range(top, len(lines)) if lines[i].startswith("╰"))
    findings = lines[top + 1:bottom]
    assert findings and all(ln.startswith("│ • ") for ln in findings), findings
    widest = max(len(ln.rstrip(" │")) for ln in findings)
    assert len(lines[top]) == widest + 2 == len(lines[bottom])  # "…text │": one space, a border
    assert max(map(len, lines)) < PIPE_WIDTH


def _piped(*objects: object) -> str:
    """``objects`` printed as a command prints into a pipe."""
    buf = io.StringIO()
    PipeConsole(file=buf).print(*objects)
    return buf.getvalue()


def test_a_tab_is_measured_as_the_columns_it_is_printed_as() -> None:
    """Rich measured a tab as no column and printed it as up to eight: ``diff --code``'s panel
    cropped ``-\\tif x:\\t# comment here long`` to ``# comment her``, and a table cell holding
    a tab wrapped mid-line. Expanded before measuring: each line whole, on one line."""
    from tuidebug.inert import inert, inert_text
    from tuidebug.viewers.diff_view import _code

    code = _piped(_code("-\tif x:\t# comment here long\n+\tif y:", "forward", 120))
    assert any(ln.rstrip(" │").endswith("# comment here long") for ln in code.splitlines()), code
    for cell in (inert_text("x\ty\tz long cell text here", multiline=True),
                 inert("x\ty\tz long cell text here")):
        t = Table()
        t.add_column("a")
        t.add_row(cell)
        rows = [ln for ln in _piped(t).splitlines() if ln.startswith("│ x")]
        assert len(rows) == 1 and "z long cell text here" in rows[0], (cell, rows)


def test_what_fills_its_width_is_laid_out_at_a_screens_width() -> None:
    """A ``Rule`` measures as one column (its title was lost) and ``Markdown`` as nothing (laid
    out ``PIPE_WIDTH`` wide, a heading centred 5,000 columns in)."""
    rule = _piped(Rule("hi"))
    assert "hi" in rule and len(rule.rstrip("\n")) == FILL_WIDTH, rule
    md = _piped(Markdown("# Title\n\nsome paragraph text here")).splitlines()
    assert any("Title" in ln for ln in md) and max(map(len, md)) <= FILL_WIDTH, md


@pytest.mark.parametrize("box", [None, HEAVY_HEAD], ids=["no box", "boxed"])
def test_one_long_cell_does_not_pad_every_row_to_its_width(box: Box | None) -> None:
    """A 500-row table with one 9,000-character cell: every row was padded with spaces to that
    width (4.5 MB of spaces), up to the right edge of a boxed table. Each line's trailing
    spaces are dropped and a table's right edge is open: the output is the size of what the
    table holds (and of its top and bottom lines), the long cell whole on its line."""
    t = Table(box=box)
    t.add_column("id")
    t.add_column("text")
    long = "x" * 9000
    t.add_row("0", long)
    for i in range(1, 500):
        t.add_row(str(i), f"row {i}")
    out = _piped(t)
    held = sum(len(c) for c in [long] + [f"{i} row {i}" for i in range(1, 500)])
    assert len(out) < 2 * held + 4 * len(long), (len(out), held)
    lines = out.splitlines()
    assert any(ln.rstrip(" │").endswith(long) for ln in lines), len(lines)
    assert sum("row " in ln for ln in lines) == 499 and all(ln == ln.rstrip() for ln in lines)
