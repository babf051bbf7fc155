"""tuidebug's wrappers are never compiled by Dynamo as frames of the user's. Called from a frame
Dynamo runs eagerly while compiling is on (a graph break in a loop makes Dynamo run the whole
``forward`` eagerly, each call in it handed to Dynamo), the wrapper of a compiled module's call
was compiled as a frame of its own, and failed: the script raised ``TypeError: super(type, obj)``
where untraced it ends. A compiled function called there went through tuidebug's stand-in; a
rank's collective called there went through the wrapper that logs it, which Dynamo compiled
with Inductor (the user's all_reduce in a graph of tuidebug's making)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, pythonpath

pytestmark = pytest.mark.slow

SCRIPT = """
import torch

torch.manual_seed(0)
lin = torch.nn.Linear(4, 4)
inner = torch.compile(lin)


@torch.compile
def scaled(x):
    return x * 2


class Outer(torch.nn.Module):
    def forward(self, x):
        for _ in range(2):
            x = scaled(inner(x))
            torch._dynamo.graph_break()  # in a loop: Dynamo runs forward eagerly
        return x


outer = torch.compile(Outer())
x = torch.ones(2, 4)
with torch.no_grad():
    got = outer(x)
    want = lin(lin(x) * 2) * 2
print("same", bool(torch.allclose(got, want)))
"""


def test_a_compiled_module_called_from_a_frame_dynamo_runs_eagerly(tmp_path: Path) -> None:
    script = tmp_path / "nested.py"
    script.write_text(SCRIPT)
    out = tmp_path / "t"
    env = dict(os.environ, PYTHONPATH=pythonpath())
    proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", "trace", "-o", str(out),
                           str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "same True" in proc.stdout, proc.stdout
    info = json.loads(subprocess.run(
        [sys.executable, "-m", "tuidebug.cli", "info", str(out), "--json"], env=env,
        capture_output=True, text=True, timeout=300).stdout)
    own = str(ROOT / "tuidebug")
    frames = [(c["function"], c["file"]) for c in info["compiles"]]
    assert {f for f, _ in frames} >= {"forward", "scaled"}, frames  # both compiled, as untraced
    assert not [f for f in frames if str(f[1]).startswith(own)], frames
    checked = info["accuracy"]
    assert len(checked) >= 2, checked  # the inner module's and the function's calls were seen


RANK_SCRIPT = """
import torch
import torch.distributed as dist

dist.init_process_group("gloo")


class Outer(torch.nn.Module):
    def forward(self, x):
        for _ in range(2):
            x = x * 2
            dist.all_reduce(x)  # called from a forward Dynamo runs eagerly
            torch._dynamo.graph_break()  # in a loop: Dynamo runs forward eagerly
        return x


outer = torch.compile(Outer())
print("sum", outer(torch.ones(4)).sum().item())
dist.destroy_process_group()
"""


def test_a_collective_called_from_a_frame_dynamo_runs_eagerly(tmp_path: Path) -> None:
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    out = tmp_path / "job"
    env = dict(os.environ, PYTHONPATH=pythonpath())
    proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", "trace", "--nproc-per-node", "1",
                           "-o", str(out), str(script)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "sum 16.0" in proc.stdout, proc.stdout
    info = json.loads(subprocess.run(
        [sys.executable, "-m", "tuidebug.cli", "info", str(out), "--rank", "0", "--json"],
        env=env, capture_output=True, text=True, timeout=300).stdout)
    frames = [(c["function"], c["file"]) for c in info["compiles"]]
    assert [f for f, _ in frames] == ["forward"], frames  # as untraced: forward alone
    log = [json.loads(line) for line in
           (out / "job" / "rank_0.progress.jsonl").read_text().splitlines()]
    issued = [e for e in log if e["event"] == "collective"]
    assert [(e["op"], e["line"]) for e in issued] == [("all_reduce", "rank.py:12")] * 2, log
