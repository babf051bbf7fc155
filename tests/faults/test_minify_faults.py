"""Minify interrupted with Ctrl-C: the best repro found so far is saved and still fails."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, pythonpath
from tests.faults.conftest import Case


@pytest.mark.slow  # minifies
def test_minify_interrupted_keeps_best_repro(failing_trace: Path, tmp_path: Path,
                                            case: Case) -> None:
    out = tmp_path / "repro.py"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuidebug.cli", "minify", "--yes", str(failing_trace), "-o", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=pythonpath()), start_new_session=False,
        # a suite started in the background (`… &`) inherits SIGINT ignored: Ctrl-C must reach it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout is not None
    seen = []
    deadline = time.time() + 300
    for line in proc.stdout:  # interrupt once a first candidate has reproduced the failure
        seen.append(line)
        m = re.search(r"attempts (\d+)\s+nodes (\d+)/(\d+)", line)
        if m and int(m[1]) >= 1 and int(m[2]) < int(m[3]):
            proc.send_signal(signal.SIGINT)
            break
        assert time.time() < deadline, "".join(seen)
    rest, _ = proc.communicate(timeout=120)
    text = "".join(seen) + rest
    assert proc.returncode == 130, text
    assert "best repro found so far" in text
    case.survived = True
    assert out.exists()
    run = subprocess.run([sys.executable, str(out)], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=pythonpath()))
    assert run.returncode == 1, run.stdout + run.stderr  # exit 1: failed the expected way
    case.data_lost = False


FLAKY_MODEL = """
import torch

class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 16)
        self.b = torch.nn.Linear(16, 16)

    def forward(self, x):
        h = torch.relu(self.a(x)) * 2
        return torch.tanh(self.b(h)) + h.sum(-1, keepdim=True)

print(torch.compile(M())(torch.randn(4, 16)).shape)
"""


@pytest.fixture(scope="module")
def flaky_trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A trace whose compile failed because the C++ toolchain failed (tests/faults/flaky_cxx.sh),
    and the environment that puts that toolchain in place (with its own Inductor cache, so
    kernels really compile)."""
    root = tmp_path_factory.mktemp("flaky")
    env = dict(os.environ, PYTHONPATH=pythonpath(), CXX=str(Path(__file__).with_name("flaky_cxx.sh")),
               FLAKY_CXX_DIR=str(root), TORCHINDUCTOR_CACHE_DIR=str(root / "inductor-cache"))
    (root / "model.py").write_text(FLAKY_MODEL)
    trace = root / "trace"
    p = subprocess.run([sys.executable, "-m", "tuidebug.cli", "trace", "-o", str(trace),
                        str(root / "model.py")], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=600)
    assert p.returncode != 0 and "compilation failed" in p.stderr, p.stderr[-3000:]
    assert "flaky toolchain" in (trace / "manifest.json").read_text()
    return trace, env


def _minify(trace: Path, out: Path, env: dict[str, str], count: int,
            **extra: str) -> subprocess.CompletedProcess[str]:
    """``minify`` with one candidate worker: what these tests are about is the toolchain's
    flakiness and the fresh-process verification, which a second warm worker (another torch
    import) does not change; the parallel pool is tested in tests/minify and by the Ctrl-C
    test above."""
    shutil.rmtree(env["TORCHINDUCTOR_CACHE_DIR"], ignore_errors=True)
    Path(env["FLAKY_CXX_DIR"], "count").write_text(str(count))
    return subprocess.run([sys.executable, "-m", "tuidebug.cli", "minify", "--yes", "--jobs", "1",
                           str(trace), "-o", str(out)], capture_output=True, text=True,
                          env=dict(env, **extra), cwd=ROOT, timeout=600)


def test_flaky_failure_gives_no_repro(flaky_trace: tuple[Path, dict[str, str]], tmp_path: Path,
                                      case: Case) -> None:
    """A C++ toolchain that fails one compile of the tanh kernel in three (a counter shared by
    every process): the minifier finds the failing start, sees it pass when run again, and
    stops with a message instead of writing a repro that would not reproduce."""
    trace, env = flaky_trace
    out = tmp_path / "repro.py"
    m = _minify(trace, out, env, 0)  # the next compile of the kernel fails, then two pass
    text = m.stdout + m.stderr
    assert m.returncode != 0, text
    assert "the failure is flaky" in text and "in 1 of 2 runs" in text, text
    assert "none was written" in text
    case.survived = True
    assert not out.exists(), "a repro of a flaky failure was written"
    assert not list(tmp_path.glob("*.py*.tmp")) and not list(tmp_path.glob(".repro*"))
    case.data_lost = False


def test_repro_that_passes_in_a_fresh_process_is_not_left_behind(
        flaky_trace: tuple[Path, dict[str, str]], tmp_path: Path, case: Case) -> None:
    """The toolchain fails the first three compiles (the start and both confirmation runs),
    then recovers: the minifier reduces as far as it can, the written repro passes in the fresh
    verification process, and it is moved out of the way instead of left as ``repro.py``."""
    trace, env = flaky_trace
    out = tmp_path / "repro.py"
    m = _minify(trace, out, env, 0, FLAKY_CXX_FAIL_FIRST="3")
    text = m.stdout + m.stderr
    assert m.returncode == 1, text
    assert "no repro written" in text and "unverified candidate is kept as" in text, text
    case.survived = True
    kept = Path(re.search(r"kept as (\S+unverified-repro\.py)", text)[1])
    assert kept.is_file() and "def forward" in kept.read_text()
    assert not out.exists(), "a repro that does not reproduce was left at the output path"
    case.data_lost = False
