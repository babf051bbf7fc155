"""Bad input to ``tuidebug trace``: a clear one-line error and a non-zero exit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import EXAMPLES, ROOT, pythonpath


def tuidebug(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=pythonpath())
    return subprocess.run([sys.executable, "-m", "tuidebug.cli", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=600)


def _error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [l for l in proc.stderr.splitlines() if l.startswith("tuidebug: error:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_missing_script(tmp_path: Path) -> None:
    p = tuidebug("trace", "-o", str(tmp_path / "o"), str(tmp_path / "nope.py"))
    assert p.returncode == 2
    assert "no such script" in _error_line(p)


def test_script_raising_before_compiling(tmp_path: Path) -> None:
    s = tmp_path / "boom.py"
    s.write_text("import torch\nraise ValueError('bad config')\n")
    p = tuidebug("trace", "-o", str(tmp_path / "o"), str(s))
    assert p.returncode == 3
    assert "before compiling" in _error_line(p)
    assert "ValueError: bad config" in p.stderr


def test_script_that_never_compiles(tmp_path: Path) -> None:
    s = tmp_path / "plain.py"
    s.write_text("import torch\nprint(torch.ones(2).sum())\n")
    p = tuidebug("trace", "-o", str(tmp_path / "o"), str(s))
    assert p.returncode == 3
    assert "never compiled" in _error_line(p)


def test_unwritable_output_directory(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):  # root ignores permissions: use a path under a file
            target = tmp_path / "afile"
            target.write_text("x")
            out = target / "trace"
        else:
            out = ro / "trace"
        p = tuidebug("trace", "-o", str(out), str(EXAMPLES / "mlp.py"))
    finally:
        ro.chmod(0o700)
    assert p.returncode == 2
    assert "cannot write the trace" in _error_line(p)


def test_info_on_a_non_trace(tmp_path: Path) -> None:
    p = tuidebug("info", str(tmp_path))
    assert p.returncode == 2
    assert "not a tuidebug trace" in _error_line(p)
    p = tuidebug("info", str(tmp_path / "missing"))
    assert p.returncode == 2 and "no such trace" in _error_line(p)
