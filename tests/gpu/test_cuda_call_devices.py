"""On the GPU (``pytest -m gpu tests/gpu/test_cuda_call_devices.py``; skipped without CUDA):
the call's device is a CUDA one even where a ``meta`` tensor comes first, every CUDA device of
a call spread over two GPUs is found (CUDA first, in the order met), and ``--profile`` leaves
the user's CUDA peak statistics alone: a script printing ``torch.cuda.max_memory_allocated()``
at its end prints what it prints untraced; a whole call over two GPUs is timed until both are
done (2 GPUs: ``NCCL_NVLS_ENABLE=0 pytest -m gpu tests/gpu/test_cuda_call_devices.py``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import pythonpath, trace_script

pytestmark = pytest.mark.gpu


def test_the_call_devices_are_cuda_first() -> None:
    import torch

    from tuidebug.compiler import compat

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    meta, host, gpu = torch.empty(1, device="meta"), torch.ones(1), torch.ones(1, device="cuda")
    assert compat.call_device([meta, host, gpu]) == gpu.device
    assert compat.call_devices([meta, gpu, host]) == [gpu.device, meta.device]
    if torch.cuda.device_count() >= 2:
        one = torch.ones(1, device="cuda:1")
        assert compat.call_devices([meta, one, gpu]) == [one.device, gpu.device, meta.device]
        assert compat.call_device([meta, one, gpu]) == one.device


PEAK = """import torch

big = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")  # the user's own peak
del big


@torch.compile
def peak_f(x):
    return (x * 2).sin().sum()


peak_f(torch.ones(1024, device="cuda"))
torch.cuda.synchronize()
print("PEAK", torch.cuda.max_memory_allocated())
"""


def test_the_users_peak_statistics_are_not_reset(tmp_path: Path) -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    script = tmp_path / "peak.py"
    script.write_text(PEAK)
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           timeout=600, env=dict(os.environ))
    assert plain.returncode == 0, plain.stderr[-2000:]
    (untraced,) = [ln for ln in plain.stdout.splitlines() if ln.startswith("PEAK")]
    _, proc = trace_script(tmp_path, "peak", PEAK, "--profile", "5")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (traced,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("PEAK")]
    assert traced == untraced, (traced, untraced)


def test_a_call_over_two_gpus_is_timed_until_both_are_done(tmp_path: Path) -> None:
    """The call's arguments are on cuda:0 and its long matmul on cuda:1: waited for on cuda:0
    alone, the whole call's time was the launches' (the cuda:1 kernel still running). Every
    device of the call is waited for: compiled and eager medians cover that kernel."""
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 CUDA GPUs")
    script = Path(__file__).parent / "scripts" / "two_gpu_call.py"
    out = tmp_path / "two"
    env = dict(os.environ, PYTHONPATH=pythonpath())
    proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", "trace", "--profile", "3",
                           "-o", str(out), str(script)], env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (kernel,) = [float(s) for s in re.findall(r"two gpus: kernel (\d+\.\d+) s", proc.stdout)]
    assert kernel > 5e-3, kernel  # long enough to tell from its launch
    calls = {c["callable"]: c for c in json.loads((out / "profile.json").read_text())["calls"]}
    call = calls["split"]
    assert "not_measured" not in call and call["device"] == "cuda", call
    assert call["compiled"]["median_s"] >= 0.9 * kernel, (kernel, call["compiled"])
    assert call["eager"]["median_s"] >= 0.9 * kernel, (kernel, call["eager"])
