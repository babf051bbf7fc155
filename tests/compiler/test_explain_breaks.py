"""Graph breaks explained on a real compile (examples/five_breaks.py: print, .item(), a
data-dependent if, .tolist(), sorted(tensor)): each break's cause, the line that broke and its
text, where compiling resumed and what the user can change — in ``info --json`` and ``info``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, _make, pythonpath

pytestmark = pytest.mark.slow

SCRIPT = EXAMPLES / "five_breaks.py"
# each break: the statement that breaks, a word of Dynamo's cause, a word of the advice
EXPECTED = (
    ('print("y is ready")', "builtin operator", "reorderable_logging_functions"),
    ("s = y.sum().item()", "capture_scalar_outputs", "capture_scalar_outputs = True"),
    ("if z.sum() > 0:", "Data-dependent branching", "torch.cond"),
    ("vals = z[:2].tolist()", "tolist()", "instead of .tolist()"),
    ("order = sorted(w[:3])", "builtin operator", "torch.sort"),
)


def _line_of(code: str) -> int:
    lines = SCRIPT.read_text().splitlines()
    return next(i for i, ln in enumerate(lines, 1) if ln.strip() == code)


@pytest.fixture(scope="module")
def five_breaks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make(tmp_path_factory, "five_breaks", "five_breaks.py", extra=["--no-check"])


def _info(trace: Path, *args: str) -> str:
    env = dict(os.environ, PYTHONPATH=pythonpath(), COLUMNS="200")
    proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", "info", str(trace), *args],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_every_break_has_its_cause_line_and_advice_in_info_json(five_breaks: Path) -> None:
    s = json.loads(_info(five_breaks, "--json"))
    breaks = [b for c in s["compiles"] for b in c["graph_breaks"]]
    assert len(breaks) == len(EXPECTED), [b["user_line"] for b in breaks]
    assert s["graph_break_summary"]["headline"] == "5 graph breaks from 5 causes"
    compiles = {c["id"] for c in s["compiles"]}
    for b, (code, cause, advice) in zip(breaks, EXPECTED):
        line = b["user_line"]
        # the BREAK's line, not the start of the resumed frame
        assert (Path(line["file"]).name, line["line"], line["code"]) == (
            SCRIPT.name, _line_of(code), code), b
        assert cause in b["cause"] + " " + (b["explanation"] or ""), b
        assert advice in (b["advice"] or ""), b
        assert b["frame"] == "step" or b["frame"].startswith("torch_dynamo_resume_in_step_at_"), b
        # the code after the break was compiled as Dynamo's resume function of that line
        assert b["resumed_in"] in compiles, b
        resumed = next(c for c in s["compiles"] if c["id"] == b["resumed_in"])
        assert resumed["function"].endswith(f"_at_{_line_of(code)}"), resumed
        assert f"line {_line_of(code)}" in b["eager"], b


def test_info_prints_each_break_with_its_line_and_fix(five_breaks: Path) -> None:
    out = _info(five_breaks)
    assert "graph breaks: 5 graph breaks from 5 causes" in out, out
    for code, cause, advice in EXPECTED:
        row = next((ln for ln in out.splitlines()
                    if f"five_breaks.py:{_line_of(code)}  {code}" in ln), None)
        assert row is not None, (code, out)
        assert advice in out


async def test_the_tui_overview_shows_each_break_with_its_line_and_fix(
        open_ui, five_breaks: Path) -> None:
    async with open_ui(five_breaks, size=(200, 50)) as ui:
        text = "\n".join(" ".join(ln.split()) for ln in ui.lines("#overview"))
    assert "graph breaks: 5 graph breaks from 5 causes" in text, text
    for code, _cause, advice in EXPECTED:
        assert f"five_breaks.py:{_line_of(code)} {code}" in text, (code, text)
        assert advice in text.replace("\n", " "), advice
    # the one break a config knob fixes is offered to `advise --try`, untried
    assert "· torch._dynamo.config.capture_scalar_outputs = True" in text, text
