"""A compile error in ``info`` as the Errors screen has it: the kernel, the generated line the
compiler points at, the compiler's first error (one query, ``failure.error_report``); and an
accuracy failure's trace does not end with "compilation failed"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import pythonpath
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.failure import error_report

pytestmark = pytest.mark.slow


def _info(trace: Path, *args: str) -> str:
    env = dict(os.environ, PYTHONPATH=pythonpath(), COLUMNS="400")
    proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", "info", str(trace), *args],
                          env=env, capture_output=True, text=True, timeout=120)
    return proc.stdout


def test_info_names_the_kernel_its_failing_line_and_the_first_compiler_error(
        failing_trace: Path) -> None:
    t = Trace(failing_trace)
    report = error_report(t)  # what the Errors screen shows
    assert report.site is not None and report.first_error, report
    code = t.graph(report.site.graph).kernel(report.site.kernel)
    assert code is not None
    text = t.graph(report.site.graph).code(str(code.file)) or ""
    assert text.splitlines()[report.site.line - 1].strip() == report.site.code
    err = json.loads(_info(failing_trace, "--json"))["error"]
    assert (err["kernel"], err["kernel_line"], err["code"]) == (
        report.site.kernel, report.site.line, report.site.code)
    assert "error:" in err["first_error"] and "/" not in err["first_error"].split(":")[0]
    out = _info(failing_trace)
    assert (f"in kernel {report.site.kernel} ({report.site.graph}), line {report.site.line}: "
            f"{report.site.code}") in out, out
    assert f"compiler: {err['first_error']}" in out, out


def test_an_accuracy_failure_is_not_called_a_compilation_failure(accuracy_trace: Path) -> None:
    log = (accuracy_trace.parent / f"{accuracy_trace.name}.log").read_text()
    assert "compilation failed" not in log, log[-2000:]
    assert "outputs differ from eager" in log, log[-2000:]
