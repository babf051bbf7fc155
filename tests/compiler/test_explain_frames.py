"""A script that reaches no Inductor graph is told exactly that, and why: the frame Dynamo
skipped with Dynamo's reason — not that it never called a compiled function."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, pythonpath

pytestmark = pytest.mark.slow

SCRIPT = ROOT / "tests" / "fixtures" / "compiles_nothing.py"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=pythonpath(), COLUMNS="300")
    return subprocess.run([sys.executable, "-m", "tuidebug.cli", *args], env=env,
                          capture_output=True, text=True, timeout=600)


def test_a_script_that_compiles_nothing_is_told_what_dynamo_skipped(tmp_path: Path) -> None:
    out = tmp_path / "t"
    proc = _cli("trace", "-o", str(out), str(SCRIPT))
    assert proc.returncode == 0, proc.stderr  # as untraced: nothing compiled is no failure
    assert "sum 5" in proc.stdout  # the script ran, eagerly
    line = next(i for i, ln in enumerate(SCRIPT.read_text().splitlines(), 1)
                if ln.startswith("def add"))
    said = " ".join(proc.stderr.split())
    assert "reached no Inductor graph" in said, said
    assert f"add (compiles_nothing.py:{line})" in said, said
    assert "No ops traced" in said, said
    assert "did not call a torch.compile'd function" not in said
    s = json.loads(_cli("info", str(out), "--json").stdout)
    own = [f for f in s["skipped_frames"] if f["own"]]
    assert [(f["function"], f["line"]) for f in own] == [("add", line)], s["skipped_frames"]
    assert any(w.startswith("nothing was compiled") and "add (compiles_nothing.py" in w
               for w in s["warnings"]), s["warnings"]
    text = " ".join(_cli("info", str(out)).stdout.split())
    assert f"not compiled: add (compiles_nothing.py:{line}): Dynamo decided to skip" in text, text
    # what to do about it, from the reason: the function holds no tensor operation
    assert own[0]["advice"].startswith("it computes no tensor operation"), own
    assert "fix: it computes no tensor operation (only Python values): there is nothing for " \
        "torch.compile to compile here" in text, text
