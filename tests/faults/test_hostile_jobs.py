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
