"""The warm worker pool survives candidates that segfault or hang."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuidebug.minify.pool import WorkerPool

pytestmark = pytest.mark.slow  # runs torch in its workers


def _script(path: Path, body: str) -> Path:
    path.write_text("def run():\n" + "".join(f"    {line}\n" for line in body.splitlines()))
    return path


def test_crash_and_hang_are_reported_and_the_worker_replaced(tmp_path: Path) -> None:
    crash = _script(tmp_path / "crash.py", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")
    hang = _script(tmp_path / "hang.py", "import time\ntime.sleep(600)")
    ok = _script(tmp_path / "ok.py", "import torch\nreturn {'outcome': 'passed', 'torch': torch.__version__}")
    with WorkerPool(1, log_dir=tmp_path / "logs") as pool:
        r = pool.submit(ok, 60).result()
        assert r["outcome"] == "passed" and r["seconds"] < 30
        r = pool.submit(crash, 60).result()
        assert r["outcome"] == "crashed" and "SIGSEGV" in r["message"]
        r = pool.submit(hang, 3).result()
        assert r["outcome"] == "timeout"
        r = pool.submit(ok, 60).result()  # a fresh worker took over
        assert r["outcome"] == "passed"
        assert pool.launches == 3 and pool.restarts == 2
