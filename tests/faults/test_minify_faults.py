"""Minify interrupted with Ctrl-C: the best repro found so far is saved and still fails."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT, pythonpath
from tests.faults.conftest import Case


def test_minify_interrupted_keeps_best_repro(failing_trace: Path, tmp_path: Path,
                                            case: Case) -> None:
    out = tmp_path / "repro.py"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuidebug.cli", "minify", str(failing_trace), "-o", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=pythonpath()), start_new_session=False)
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
