"""Failing traces of the planted bugs in examples/failing_compile.py, made once per session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import live_trace_fixture, made_once, trace_example

# the minifier's input is what capture writes now: compiled live, as the runtime error below
failing_trace = live_trace_fixture("failing")
accuracy_trace = live_trace_fixture("accuracy")

BUGS = ("compile_error", "runtime_error", "accuracy")


@pytest.fixture(scope="session")
def bug_traces(tmp_path_factory: pytest.TempPathFactory, failing_trace: Path,
               accuracy_trace: Path) -> dict[str, Path]:
    """bug -> failed trace of examples/failing_compile.py --bug BUG.

    The compile error and the accuracy bug are the shared ``failing_trace`` and
    ``accuracy_trace``; the runtime error is traced here, once per test run (``made_once``:
    the three files that ask may run on three xdist workers).
    """
    def make(bug: str) -> Path:
        return made_once(tmp_path_factory, f"minify-{bug}", lambda out: _trace_bug(out, bug))

    def _trace_bug(out: Path, bug: str) -> None:
        proc = trace_example(out, "failing_compile.py", "--bug", bug)
        manifest = out / "manifest.json"
        if not manifest.exists():
            raise RuntimeError(f"tracing --bug {bug} wrote no trace:\n{proc.stdout}\n{proc.stderr}")
        status = json.loads(manifest.read_text()).get("status")
        assert status == "failed", f"--bug {bug}: trace status {status}\n{proc.stderr[-3000:]}"

    status = json.loads((failing_trace / "manifest.json").read_text()).get("status")
    assert status == "failed", f"the shared failing_trace did not fail (status {status})"
    status = json.loads((accuracy_trace / "manifest.json").read_text()).get("status")
    assert status == "failed", f"the shared accuracy_trace did not fail (status {status})"
    return {"compile_error": failing_trace, "runtime_error": make("runtime_error"),
            "accuracy": accuracy_trace}
