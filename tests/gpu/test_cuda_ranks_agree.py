"""The whole call's agreement between ranks on 2 GPUs with NCCL (run on a 2-GPU machine:
``NCCL_NVLS_ENABLE=0 pytest -m gpu tests/gpu/test_cuda_ranks_agree.py``; skipped with fewer):
ranks that never call ``torch.cuda.set_device`` have their tensors on ``cuda:LOCAL_RANK``
while ``torch.cuda.current_device()`` is 0 on each; the agreement's flags go on the call's own
device (``agreement.agreement_device``), and the job is timed and ends as untraced. Each
rank's whole-call timing and graph profile run on the call's own device
(``compat.call_device``): rank 1's time of a long matmul on ``cuda:1`` covers that kernel (timed
on ``cuda:0``, its current device, it was the launch's tens of microseconds)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import pythonpath

pytestmark = pytest.mark.gpu
SCRIPT = Path(__file__).parent / "scripts" / "nccl_no_set_device.py"


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=pythonpath(), NCCL_NVLS_ENABLE="0")
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK"):
        env.pop(name, None)
    return env


def test_ranks_without_set_device_agree_on_their_own_devices(tmp_path: Path) -> None:
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 CUDA GPUs")
    plain = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                            "--nproc-per-node", "2", str(SCRIPT)], env=_env(),
                           capture_output=True, text=True, timeout=600)
    assert plain.returncode == 0, plain.stderr[-3000:]
    lines = sorted(re.findall(r"rank \d: nccl -?\d+\.\d+", plain.stdout))
    assert len(lines) == 2, plain.stdout
    job = tmp_path / "job"
    traced = subprocess.run([sys.executable, "-m", "tuidebug.cli", "trace", "--nproc-per-node",
                             "2", "--profile", "3", "--timeout", "300", "-o", str(job),
                             str(SCRIPT)], env=_env(), capture_output=True, text=True,
                            timeout=600)
    assert traced.returncode == 0, traced.stderr[-3000:]
    assert sorted(re.findall(r"rank \d: nccl -?\d+\.\d+", traced.stdout)) == lines
    for r in (0, 1):
        calls = {c["callable"]: c for c in json.loads(
            (job / f"rank_{r}" / "profile.json").read_text())["calls"]}
        call = calls["main.<locals>.step"]
        assert "not_measured" not in call and call["device"] == "cuda", (r, call)
        assert call["rounds"] >= 10, (r, call)
        manifest = json.loads((job / f"rank_{r}" / "manifest.json").read_text())
        assert manifest.get("error") is None, (r, manifest["error"])
        assert not any("whole call" in w for w in manifest.get("warnings", [])), manifest
    kernel = {int(r): float(s) for r, s in re.findall(
        r"rank (\d): kernel (\d+\.\d+) s on cuda:\1, current device cuda:0", traced.stdout)}
    assert sorted(kernel) == [0, 1], traced.stdout  # rank 1: on cuda:1, cuda:0 current
    for r, plain_s in kernel.items():
        assert plain_s > 5e-3, (r, plain_s)  # a kernel long enough to tell from its launch
        profile = json.loads((job / f"rank_{r}" / "profile.json").read_text())
        call = {c["callable"]: c for c in profile["calls"]}["matmul"]
        assert "not_measured" not in call and call["device"] == "cuda", (r, call)
        # the whole call, compiled and eager, takes at least its kernel's time
        assert call["compiled"]["median_s"] >= 0.9 * plain_s, (r, plain_s, call["compiled"])
        assert call["eager"]["median_s"] >= 0.9 * plain_s, (r, plain_s, call["eager"])
        # the ledger's marks are on the kernel's stream: the graph is most of the call
        graph_s = sum(p["seconds"] for p in call["ledger"] if p["part"] == "graph")
        assert graph_s >= 0.5 * call["compiled"]["median_s"], (r, call["ledger"])
        # and the graph's own profile (its compile's wall time) too
        walls = [c["compiled"]["wall_s"] for c in profile["compiles"].values()
                 if (c.get("compiled") or {}).get("wall_s") is not None]
        assert walls and max(walls) >= 0.9 * plain_s, (r, plain_s, walls)
