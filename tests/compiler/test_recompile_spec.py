"""The recompile job spec: one typed record from the confirm dialog / CLI to the job's process,
validated once where it is read back (tuidebug/compiler/recompile_spec.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tuidebug.compiler import recompile
from tuidebug.compiler.recompile_spec import RecompileSpec
from tuidebug.compiler.worker import RecompileWorker
from tuidebug.errors import RecompileError
from tuidebug.trace.format.reader import Trace


def _spec(tmp_path: Path) -> RecompileSpec:
    script = tmp_path / "s.py"
    script.write_text("print('hi')\n")
    return recompile.script_spec(script, ["--n", "3"], {"max_fusion_size": 2}, tmp_path / "out",
                                 env={"A": "1"}, timeout=30)


def test_a_spec_crosses_as_json_unchanged(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    data = json.loads(json.dumps(spec.to_json()))  # what the worker protocol carries
    assert RecompileSpec.from_json(data) == spec
    assert data["args"] == ["--n", "3"] and data["overrides"] == {"max_fusion_size": 2}
    assert spec.kind == "trace" and spec.out == str((tmp_path / "out").resolve())


@pytest.mark.parametrize("key, value, said", [
    ("kind", "rm", "kind"), ("script", None, "script"), ("args", "a b", "args"),
    ("args", [1], "args"), ("env", ["A"], "env"), ("overrides", {1: 2}, "overrides"),
    ("check", "yes", "check"), ("timeout", -1, "timeout"), ("timeout", True, "timeout"),
    ("out", "", "out")])
def test_a_bad_spec_is_refused_naming_what_is_wrong(tmp_path: Path, key: str, value: object,
                                                    said: str) -> None:
    data = {**_spec(tmp_path).to_json(), key: value}
    with pytest.raises(RecompileError, match=f"job spec's {said}"):
        RecompileSpec.from_json(data)


def test_an_untrusted_tolerance_or_profile_count_reads_as_absent(tmp_path: Path) -> None:
    data = {**_spec(tmp_path).to_json(), "accuracy_tol": 1e300, "profile": -5}
    spec = RecompileSpec.from_json(data)
    assert spec.accuracy_tol is None and spec.profile == 0


def test_confirmed_applies_only_the_value_shown_and_a_set_wins(tmp_path: Path) -> None:
    spec = RecompileSpec(
        kind="recompile", script="/s.py", script_arg="s.py", cwd="/", out="/o",
        source_trace="/t", overrides={"a": 1, "cpp.cxx": "mine"}, sets={"cpp.cxx": "mine"},
        confirm={"cuda.cutlass_dir": "/x"})
    assert spec.confirmed({}) is spec
    assert spec.confirmed({"cuda.cutlass_dir": "/other"}) == spec  # not the value shown
    done = spec.confirmed({"cuda.cutlass_dir": "/x"})
    assert done.overrides == {"a": 1, "cuda.cutlass_dir": "/x", "cpp.cxx": "mine"}
    assert list(done.overrides)[-1] == "cpp.cxx"  # the user's --set is applied last
    assert done.confirm == {} and spec.confirm  # a new spec; the one shown is unchanged


def test_a_spawned_job_with_a_bad_spec_runs_nothing(tmp_path: Path) -> None:
    """The spawned job's process reads its spec back through the one validation; a bad one
    stops it before it imports torch or runs the script."""
    marker = tmp_path / "RAN"
    script = tmp_path / "s.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    bad = {**_spec(tmp_path).to_json(), "script": str(script), "args": "not a list"}
    out = subprocess.run([sys.executable, "-m", "tuidebug.compiler.worker", "--job",
                          json.dumps(bad)], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode != 0
    assert "job spec's args is a list of strings" in out.stderr, out.stderr[-2000:]
    assert not marker.exists()


@pytest.mark.slow
def test_the_spec_submitted_is_the_job_that_runs(tmp_path: Path) -> None:
    """A spec crosses two process boundaries (client → server → a job spawned fresh) and the
    job runs exactly it: its script, arguments, directory, overrides and environment."""
    script = tmp_path / "small.py"
    script.write_text(textwrap.dedent("""
        import os, sys, torch
        assert sys.argv[1:] == ["--n", "3"] and os.environ["TUIDEBUG_SPEC_TEST"] == "yes"
        print(torch.compile(lambda x: (x * 2).relu() + 1)(torch.randn(8)).sum().item())
    """))
    work = tmp_path / "work"
    work.mkdir()
    spec = recompile.script_spec(script, ["--n", "3"], {"max_fusion_size": 2}, tmp_path / "out",
                                 cwd=str(work), check=False, env={"TUIDEBUG_SPEC_TEST": "yes"})
    with RecompileWorker(warmup=False, timeout=600,
                         env={"TUIDEBUG_WORKER_START": "spawn"}) as worker:
        job = worker.submit_spec(spec)
        assert job.wait(600) and job.state == "ok", (job.error, job.result)
    assert job.spec == spec.with_timeout(600)
    m = Trace(job.out).manifest
    assert m.command == ["tuidebug", "trace", str(script), "--n", "3"]
    assert m.cwd == str(work) and m.config_overrides == {"max_fusion_size": 2}
    assert m.check_accuracy is False and m.recompile["sets"] == {"max_fusion_size": 2}
