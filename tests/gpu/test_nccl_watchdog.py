"""A collective the NCCL watchdog times out is a hang, named from what the rank said (run on a
machine with 2 GPUs: ``pytest -m gpu tests/gpu/test_nccl_watchdog.py``; skipped with fewer).

``tuidebug trace --nproc-per-node 2`` on scripts/nccl_watchdog.py (a 10 s process-group
timeout, rank 1 asleep): whichever way the installed torch ends rank 0 — a DistBackendError its
trace records, or the process torn down (SIGABRT) with the watchdog's line among the last it
wrote — ``info`` says ``hung:``, rank 0's collective timed out (the NCCL watchdog), and that
rank 0 issued all_reduce #2, which rank 1 never reached; never "stopped: … when another rank
ended"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import pythonpath

pytestmark = pytest.mark.gpu
SCRIPT = Path(__file__).resolve().parent / "scripts" / "nccl_watchdog.py"


def test_the_nccl_watchdog_timing_out_a_collective_is_a_named_hang(tmp_path: Path) -> None:
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    env = dict(os.environ, PYTHONPATH=pythonpath(), NCCL_NVLS_ENABLE="0")
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK"):
        env.pop(name, None)
    job = tmp_path / "job"
    proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", "trace", "--nproc-per-node",
                           "2", "--no-check", "-o", str(job), str(SCRIPT)],
                          env=env, capture_output=True, text=True, timeout=400)
    print(proc.stdout[-6000:], proc.stderr[-6000:])  # what the GPU run said, for the report
    info = subprocess.run([sys.executable, "-m", "tuidebug.cli", "info", "--json", str(job)],
                          env=env, capture_output=True, text=True, timeout=120)
    report = json.loads(info.stdout)
    print(json.dumps({"ranks": report["ranks"], "waits": report["waits"]}, indent=1,
                     default=str)[-8000:])
    w = report["waits"]
    assert w is not None and w["hung"], w
    timeouts = [e for e in w["ends"] if e["kind"] == "collective_timeout"]
    assert [e["ranks"] for e in timeouts] == [[0]], w["ends"]
    assert "the NCCL watchdog)" in timeouts[0]["text"], timeouts
    # NCCL's SeqNum is said as NCCL's, never beside tuidebug's own numbering as "#n"
    assert "ALLREDUCE #" not in timeouts[0]["text"], timeouts
    # rank 1, asleep, stopped by torchrun's SIGTERM: its record says so (not left running)
    ends = {r: e["kind"] for e in w["ends"] for r in e["ranks"]}
    assert ends.get(1) in ("killed", "timed_out"), w["ends"]
    # NCCL's all_reduce returns once enqueued: rank 0 issued #2, which rank 1 never reached
    assert any(m.get("waits_for") == [1] and m.get("seq") == 2 for m in w["mismatches"]), w
