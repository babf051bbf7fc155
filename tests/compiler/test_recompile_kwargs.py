"""A recompile of a tensor passed by keyword (Hugging Face models: ``model(input_ids=…)``):
Dynamo names it ``kwargs['input_ids']``; the explanation must still find the dimension, the
source and the advice (it fell back to "read the failed guard")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import pythonpath
from tuidebug.trace.queries.dynamic import compile_dynamic
from tuidebug.trace.format.reader import Trace

pytestmark = pytest.mark.slow  # compiles

SCRIPT = """
import torch, sys, tuidebug
def f(**kwargs):
    return kwargs["input_ids"] * 2 + 1
with tuidebug.capture(sys.argv[1]):
    g = torch.compile(f)
    g(input_ids=torch.ones(2, 8))
    g(input_ids=torch.ones(2, 16))
"""


def test_a_recompile_of_a_keyword_tensor_is_explained(tmp_path: Path) -> None:
    out = tmp_path / "t"
    env = dict(os.environ, PYTHONPATH=pythonpath(),
               TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(out)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = compile_dynamic(Trace(out), "0/1")["recompile"]
    assert r is not None and "kwargs['input_ids']" in r["failed_guard"], r
    assert r["source"] == "L['kwargs']['input_ids'].size()[1]", r
    assert r["expected"] == "8" and str(r["failing_value"]) == "16", r
    assert "dimension 1 of" in r["suggestion"] and "maybe_mark_dynamic" in r["suggestion"], r
