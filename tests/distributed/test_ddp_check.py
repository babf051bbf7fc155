"""The eager check of a compiled DistributedDataParallel model that DDPOptimizer splits at its
gradient buckets (a real gloo process group of one rank, a real compile): DDPOptimizer runs
each bucket's compiled piece on fake tensors while it compiles the next; the check waits for
the first real call (it was "eager re-run failed: DataDependentOutputException" on every rank)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import pythonpath

SCRIPT = """
import os, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
torch.manual_seed(0)
net = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(3)])
class Net(torch.nn.Module):  # a forward of the user's own: Dynamo compiles it under DDP
    def __init__(self):
        super().__init__()
        self.net = net
    def forward(self, x):
        return torch.relu(self.net(x))
m = torch.compile(DDP(Net(), bucket_cap_mb=1))
m(torch.randn(8, 512)).sum().backward()
"""


@pytest.mark.slow
def test_the_eager_check_judges_ddp_split_graphs(tmp_path: Path) -> None:
    script = tmp_path / "ddp.py"
    script.write_text(SCRIPT)
    out = tmp_path / "t"
    proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", "trace", "-o", str(out),
                           str(script)], env=dict(os.environ, PYTHONPATH=pythonpath()),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    meta = [json.loads(p.read_text()) for p in sorted((out / "graphs").glob("*/meta.json"))]
    buckets = [m["ddp_bucket"] for m in meta if m.get("ddp_bucket")]
    assert len(buckets) >= 2, meta  # DDPOptimizer split the graph
    checks = json.loads((out / "runtime.json").read_text())["checks"]
    assert checks, "no eager check recorded"
    for cid, c in checks.items():
        assert "skipped" not in c, (cid, c)
        assert c["close"] is True and c["gradients"]["close"] is True, (cid, c)
