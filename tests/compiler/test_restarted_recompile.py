"""A recompile whose analysis restarted, traced live (tests/fixtures/float_restart.py): the
float ``s`` changes, 0/1 makes it a symbol, the backend cannot keep it one and Dynamo restarts
the analysis (0/1_1) with it specialized; 0/2 compiles again. What the recompile's answer says
the compile did must be what 0/1_1 (the attempt that made the graph) did, in every view: before,
0/1's own record made ``info``, the MCP answer and ``advise`` say "makes it a symbol, later
values reuse it" and offer ``dynamic=True`` (which compiles 3 times all the same: checked with
TORCH_LOGS=recompiles on torch 2.13)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, _make, pythonpath
from tuidebug.mcp.answers import recompile_items
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.advice import recompile_advice
from tuidebug.trace.queries.attempts import final_attempt

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def restart_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make(tmp_path_factory, "float_restart",
                 str(ROOT / "tests" / "fixtures" / "float_restart.py"), extra=["--no-check"])


def test_a_restarted_recompile_says_what_its_restart_did(restart_trace: Path) -> None:
    t = Trace(restart_trace)
    assert {"0/0", "0/1", "0/1_1", "0/2"} <= set(t.compiles), list(t.compiles)
    assert final_attempt(t.compiles, "0/1") == "0/1_1"
    # what the compiler did: the first attempt holds s as a symbol, its restart specialized it
    first = {s["source"]: s for s in t.compile_shapes_brief("0/1")["symbols"]}
    assert first["L['s']"]["replaced_by"] is None, first
    held = [sp for sp in t.compile_shapes_brief("0/1_1")["specializations"]
            if sp.get("source") == "L['s']"]
    assert held and "Eq(" in str(held[0]["guard"]), held

    env = dict(os.environ, PYTHONPATH=pythonpath(), COLUMNS="300")
    info = subprocess.run([sys.executable, "-m", "tuidebug.cli", "info", str(restart_trace),
                           "--json"], env=env, capture_output=True, text=True, timeout=300)
    assert info.returncode == 0, info.stderr[-3000:]
    (c,) = [c for c in json.loads(info.stdout)["compiles"] if c["id"] == "0/1"]
    (mcp,) = [r for r in recompile_items(t) if r["compile_id"] == "0/1"]
    seen = 0
    for said in (c["recompile"]["suggestion"], mcp["suggestion"]):
        assert "specialized it to 3.5" in said, said
        assert "each value compiles once" in said, said
        assert "later values reuse it" not in said, said
        seen += 1
    assert seen == 2
    ids = {s.id for s in recompile_advice(t)}
    assert "dynamic=True" not in ids, ids
