"""Numerics on CUDA (run on the GPU machine: ``pytest -m gpu tests/gpu/test_cuda_numerics.py``):
a bf16 training step judged on its outputs and gradients with no false alarm, and the Triton
relu bug in a backward kernel named as the first divergence."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, pythonpath
from tuidebug.trace.format.reader import Trace

SCRIPT = Path(__file__).resolve().parent / "scripts" / "bf16_train_step.py"

pytestmark = pytest.mark.gpu


def _trace(out: Path, mode: str, *opts: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuidebug.cli", "trace", *opts, "-o", str(out),
                           str(SCRIPT), mode], env=dict(os.environ, PYTHONPATH=pythonpath()),
                          capture_output=True, text=True, cwd=ROOT, timeout=900)


def _summary(trace: Path) -> dict:
    return json.loads(subprocess.run(
        [sys.executable, "-m", "tuidebug.cli", "info", "--json", str(trace)], capture_output=True,
        text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=pythonpath()), check=True).stdout)


def test_bf16_training_step_gradients_judged_without_false_alarm(tmp_path: Path) -> None:
    proc = _trace(tmp_path / "ok", "ok", "--numerics")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    checks = list(Trace(tmp_path / "ok").runtime["checks"].values())
    assert checks and all(c.get("close") is True for c in checks), checks
    grads = [g for c in checks for g in (c.get("gradients") or {}).get("outputs") or []]
    assert len(grads) >= 8 and all(g["ok"] for g in grads), grads
    assert {g["dtype"] for g in grads} == {"bfloat16"}
    assert any(g["name"] == "fc1.weight.grad" for g in grads), [g["name"] for g in grads]
    entries = _summary(tmp_path / "ok")["numerics"].values()
    kernels = [k for e in entries for k in e["kernels"]]
    assert kernels and all(e["first"] is None for e in entries), entries
    print("bf16 step:", len(grads), "gradients,", len(kernels), "kernel calls judged; worst "
          "compiled/eager RMSE ratio",
          max(g["err_compiled"] / max(g["err_eager"], 1e-30) for g in grads
              if g["err_compiled"] is not None))


def test_triton_relu_bug_in_a_backward_kernel_is_named(tmp_path: Path) -> None:
    """The planted bug with the loss scaled (the script's LOSS_SCALE: unscaled, every gradient
    of the mean loss is inside bf16's absolute tolerance and the bug was judged a match on an
    H100): the check fails on a gradient, the forward matches, and the relu kernel of the
    custom backward is the first divergence."""
    proc = _trace(tmp_path / "bug", "relu_bug")
    bad = [c for c in Trace(tmp_path / "bug").runtime["checks"].values()
           if c.get("close") is False]
    assert bad, (proc.stdout + proc.stderr)[-4000:]
    check = bad[0]
    assert all(o["ok"] for o in check["outputs"]), check["outputs"]
    assert str(check["detail"]).split(":")[0].endswith(".grad"), check["detail"]
    (entry,) = [e for e in _summary(tmp_path / "bug")["numerics"].values() if e["first"]]
    first = entry["first"]
    assert first["kind"] == "backward" and "relu" in first["kernel"], first
    assert all(k["ok"] for k in entry["kernels"] if k["kind"] == "forward"), entry["kernels"]


def test_numerics_command_classifies_the_bf16_relu_bug_as_a_wrong_kernel(tmp_path: Path) -> None:
    """``tuidebug numerics`` on the relu-bug step traced with --no-check: the backward relu
    kernel is named; the kernels write bfloat16, so the script runs again with
    emulate_precision_casts=True, and the difference stays: a wrong kernel, not precision
    casts (no random op: no fallback_random run); the control run (same settings) saw the
    same kernel call diverge again; exit code 1."""
    trace = tmp_path / "bug"
    _trace(trace, "relu_bug", "--no-check")
    proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", "numerics", "--yes", "--json",
                           str(trace)], capture_output=True, text=True, cwd=ROOT, timeout=1800,
                          env=dict(os.environ, PYTHONPATH=pythonpath()))
    assert proc.returncode == 1, proc.stderr[-4000:]  # a kernel judged wrong
    found = json.loads(proc.stdout)
    (c,) = [c for c in found["classified"] if c["kernel"]]
    assert "relu" in c["kernel"] and c["verdict"] == "a wrong kernel", c
    control, casts, random = c["reruns"]
    assert control["flag"] == "control" and control["outcome"] == "stays", control
    assert casts["flag"] == "emulate_precision_casts" and casts["outcome"] == "stays", casts
    assert random["outcome"] == "not run", random
    print("numerics:", json.dumps(c, indent=1))


def test_an_embedding_gradient_accumulated_by_a_later_kernel_is_no_divergence(
        tmp_path: Path) -> None:
    """On the CPU a tiny BERT's bf16 step named the kernel that only zero-fills the embedding's
    gradient 'a wrong kernel' (its buffer judged before the kernel that accumulates into it
    ran); the Triton kernels' signatures say which arguments they write the same way."""
    script = Path(__file__).resolve().parent / "scripts" / "embedding_step.py"
    proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", "trace", "--numerics", "-o",
                           str(tmp_path / "emb"), str(script)],
                          env=dict(os.environ, PYTHONPATH=pythonpath()), capture_output=True,
                          text=True, cwd=ROOT, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    entries = _summary(tmp_path / "emb")["numerics"].values()
    kernels = [k for e in entries for k in e["kernels"]]
    assert kernels and all(e["first"] is None for e in entries), entries
