"""Graph-cache misses explained, with the real compiler: one script traced three times into one
Inductor cache directory (``--use-cache``) — A fills it (its recompile misses: a new input
shape), B hits, C misses because of a config change — and the key components named."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import pythonpath
from tuidebug.trace.queries import cache_keys
from tuidebug.trace.diff import diff_traces
from tuidebug.trace.format.reader import Trace

SCRIPT = """\
import torch

def f(x):
    return (x.sin() + 1).relu().sum(1)

g = torch.compile(f, dynamic=False)
g(torch.randn(4, 16))
g(torch.randn(8, 16))  # a recompile: its key's input metadata differs
"""


def _trace(out: Path, script: Path, cache: Path, *extra: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=pythonpath(), TORCHINDUCTOR_CACHE_DIR=str(cache))
    return subprocess.Popen([sys.executable, "-m", "tuidebug.cli", "trace", "--use-cache",
                             "--no-check", *extra, "-o", str(out), str(script)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def cached_traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("cache_keys")
    script, cache = base / "script.py", base / "inductor-cache"
    script.write_text(SCRIPT)
    first = _trace(base / "a", script, cache)
    log = first.communicate(timeout=600)[0]
    assert (base / "a" / "manifest.json").exists(), log
    later = [_trace(base / "b", script, cache),
             _trace(base / "c", script, cache, "--set", "size_asserts=False")]
    for p in later:
        log = p.communicate(timeout=600)[0]
        assert p.returncode == 0, log
    return {n: base / n for n in "abc"}


def _lookups(trace: Path, cache: str = "fx_graph") -> dict[str, dict[str, Any]]:
    found = cache_keys.explain(Trace(trace).cache_lookups())
    return {lk["compile_id"]: lk for lk in found if lk["cache"] == cache}


def test_a_recompile_that_missed_names_the_input(cached_traces: dict[str, Path]) -> None:
    a = _lookups(cached_traces["a"])
    assert a["0/0"]["result"] == "miss" and a["0/0"]["compared_with"] is None
    assert "no earlier lookup" in a["0/0"]["miss_reason"][0]
    assert a["0/1"]["result"] == "miss" and a["0/1"]["compared_with"] == "0/0"
    assert any(re.search(r"^inputs: arg\d+ shape \[4, 16\] → \[8, 16\]", r)
               for r in a["0/1"]["miss_reason"]), a["0/1"]["miss_reason"]
    assert not any(r.startswith("config:") for r in a["0/1"]["miss_reason"])
    comps = Trace(cached_traces["a"]).compile_cache_lookups("0/0")[0]["components"]
    assert {"gm", "torch_version"} <= {c["name"] for c in comps}
    assert all(re.fullmatch(r"[0-9a-z]+", c["hash"]) for c in comps)


def test_the_same_run_again_hits(cached_traces: dict[str, Path]) -> None:
    b = _lookups(cached_traces["b"])
    assert {cid: lk["result"] for cid, lk in b.items()} == {"0/0": "hit", "0/1": "hit"}
    assert all("miss_reason" not in lk for lk in b.values())
    pairs = [p for p in diff_traces(cached_traces["a"], cached_traces["b"], code=False)["cache"]
             if p["cache"] == "fx_graph"]
    assert pairs and all(p["same_key"] for p in pairs)


def test_a_config_change_misses_and_names_the_key(cached_traces: dict[str, Path]) -> None:
    c = _lookups(cached_traces["c"])
    assert {lk["result"] for lk in c.values()} == {"miss"}
    d = diff_traces(cached_traces["a"], cached_traces["c"], code=False)
    fx = [p for p in d["cache"] if p["cache"] == "fx_graph"]
    assert len(fx) == 2 and not any(p["same_key"] for p in fx)
    for p in fx:
        assert p["reasons"] == ["config: size_asserts True → False"], p
    assert any(line.startswith("fx_graph cache (0/0") and "size_asserts True → False" in line
               for line in d["lines"]), d["lines"]


def test_info_json_gives_each_graph_its_lookups(cached_traces: dict[str, Path]) -> None:
    env = dict(os.environ, PYTHONPATH=pythonpath())
    proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", "info", "--json",
                           str(cached_traces["a"])], capture_output=True, text=True, env=env,
                          timeout=120)
    s = json.loads(proc.stdout)
    by_graph = {g["compile_id"]: g["cache"] for g in s["graphs"] if g["cache"]}
    fx = [lk for lk in by_graph["0/1"] if lk["cache"] == "fx_graph"]
    assert fx and fx[0]["result"] == "miss" and fx[0]["key"]
    assert any("shape [4, 16] → [8, 16]" in r for r in fx[0]["miss_reason"])
    (c1,) = [c for c in s["compiles"] if c["id"] == "0/1"]
    assert [lk["result"] for lk in c1["cache_lookups"] if lk["cache"] == "fx_graph"] == ["miss"]
