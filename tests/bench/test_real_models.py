"""Two small real models from ``transformers`` (bench/real_models.py's workloads, random weights
from configs) traced with the real compiler: status ok, every generated kernel names its source
line, and no false accuracy verdict (the GPT-2 training step has dropout: not compared)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import ROOT, pythonpath

sys.path.insert(0, str(ROOT / "bench"))
from real_models import WORKLOAD, trace_stats  # noqa: E402

pytestmark = pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                reason="transformers is not installed (pip install -e '.[bench]'"
                                       " or scripts/setup.sh)")
MODELS = ("gpt2_train", "vit")


@pytest.fixture(scope="module")
def real_traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    root = tmp_path_factory.mktemp("real-models")

    def make(name: str) -> tuple[str, tuple[Path, str]]:
        env = dict(os.environ, PYTHONPATH=pythonpath(), REAL_MODEL=name, REAL_MODE="default",
                   REAL_DEVICE="cpu", REAL_DTYPE="float32",
                   REAL_LAYERS="1")  # one layer: what is checked holds per layer
        proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", "trace", "-o",
                               str(root / name), str(WORKLOAD)], env=env, capture_output=True,
                              text=True, timeout=1200, cwd=ROOT)
        return name, (root / name, proc.stdout + proc.stderr)

    with ThreadPoolExecutor(len(MODELS)) as ex:
        return dict(ex.map(make, MODELS))


@pytest.mark.parametrize("name", MODELS)
def test_real_model_traces_ok_with_every_kernel_sourced(real_traces, name: str) -> None:
    trace, output = real_traces[name]
    assert (trace / "manifest.json").exists(), output[-3000:]
    s = trace_stats(trace)
    assert s["status"] == "ok", (s, output[-3000:])
    assert s["graphs"] >= 1 and s["kernels"] >= 1, s
    assert s["with_source"] == s["kernels"], s
    assert s["checks"]["mismatch"] == 0, s
    if name == "gpt2_train":  # dropout in training: never judged against eager's other numbers
        assert s["checks"]["not compared"] >= 1, s
    else:
        assert s["checks"]["match"] >= 1, s
