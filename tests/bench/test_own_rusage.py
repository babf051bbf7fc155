"""bench/_own_rusage.py starts a command and reports its own CPU, peak RSS and wall time;
bench/import_torch_trace.py's ``run`` reads them, a command that failed told by its stderr."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

HELPER = ROOT / "bench" / "_own_rusage.py"


def test_the_wall_time_is_the_commands_spawn_to_wait4(tmp_path: Path) -> None:
    """Review: the bench timed the helper around it, its own Python start-up included. The
    helper writes the wall time from spawn to wait4: at least the command's sleep, less than
    the helper's whole run as timed from outside."""
    out = tmp_path / "usage"
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, str(HELPER), str(out), sys.executable, "-c",
                        "import time; time.sleep(0.3)"], capture_output=True, text=True,
                       timeout=120)
    outside = time.perf_counter() - t0
    assert p.returncode == 0, p.stderr
    cpu_s, maxrss_kb, wall_s = out.read_text().split()
    assert 0 < float(cpu_s) < outside and int(maxrss_kb) > 1000
    assert 0.3 <= float(wall_s) < outside, (wall_s, outside)


def test_a_command_that_cannot_start_is_told_by_its_reason(tmp_path: Path) -> None:
    """Review: a command that could not be started left no usage file, and the bench's
    ``run`` read it before the exit code: a ValueError, the helper's stderr lost. Now the
    exit code comes first and the error says why."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from import_torch_trace import run
    finally:
        sys.path.remove(str(ROOT / "bench"))
    missing = str(tmp_path / "no-such-command")
    with pytest.raises(RuntimeError, match=r"failed \(exit 127\):\n_own_rusage: cannot start "):
        run([missing, "x"])
    wall, cpu, rss = run([sys.executable, "-c", "pass"])
    assert 0 < wall < 60 and 0 < cpu < 60 and rss > 1
