"""Hostile job directories (tests/faults/hostile_jobs.py) through ``info`` and ``info --json``:
no traceback, no hang, no escape sequence from the data on the terminal, nothing read outside the
job folder, and what was not read named as a problem."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import digest
from tests.faults import hostile_jobs
from tests.faults.conftest import Case
from tests.faults.test_hostile_traces import data_escapes, run_cli


@pytest.mark.parametrize("name", list(hostile_jobs.CASES))
def test_hostile_job_dir_info(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str], case: Case) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "160")
    case.note = name
    job, problem = hostile_jobs.build(name, tmp_path / "jobs", tmp_path / "outside")
    before = digest(tmp_path)
    t0 = time.monotonic()
    rc, text = run_cli(["info", str(job)], capsys, timeout=60)
    assert rc in (0, 1, 2), text
    assert not data_escapes(text), data_escapes(text)[:5]
    assert "outside the trace" not in text
    assert "SECRET_OP" not in text, "a progress log outside the job folder was read"
    if problem:
        assert problem in text, text[-3000:]
    rc, js = run_cli(["info", "--json", str(job)], capsys, timeout=60)
    assert rc in (0, 1, 2), js
    report = json.loads(js, parse_constant=lambda c: pytest.fail(f"bare {c} in --json"))
    if problem:
        assert any(problem in p for p in report["problems"]), report["problems"]
    assert time.monotonic() - t0 < 60
    assert digest(tmp_path) == before, "info wrote a file"
    case.survived = True
    case.data_lost = False


def test_merge_copies_only_folders_and_regular_files(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str],
                                                    case: Case) -> None:
    """``tuidebug merge`` of a job folder holding a FIFO and a link out of it: neither is
    copied (the FIFO raised shutil.Error: a traceback), the rest is merged."""
    import os

    case.note = "merge: FIFO and link in a rank folder"
    job, _ = hostile_jobs.build("job_escapes", tmp_path / "jobs", tmp_path / "outside")
    (tmp_path / "outside" / "secret.txt").write_text("SECRET")
    os.mkfifo(job / "rank_1" / "graphs" / "fifo")
    (job / "rank_1" / "secret.txt").symlink_to(tmp_path / "outside" / "secret.txt")
    before = digest(tmp_path / "jobs")
    rc, text = run_cli(["merge", str(job), "-o", str(tmp_path / "merged")], capsys, timeout=60)
    assert rc == 0, text
    merged = tmp_path / "merged" / "rank_1"
    assert (merged / "manifest.json").is_file()
    assert not (merged / "graphs" / "fifo").exists() and not (merged / "secret.txt").exists()
    assert digest(tmp_path / "jobs") == before
    case.survived = True
    case.data_lost = False
