"""End to end, with the real compiler: each planted bug minified to a tiny repro that fails the
same way in a fresh process; candidates failing differently are rejected; the cache works."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, pythonpath
from tuidebug.minify.minifier import Minifier, MinifyResult, minify
from tuidebug.minify.program import Spec
from tuidebug.minify.signature import Signature
from tuidebug.minify.source import load_failure


def _run_repro(path: Path, tmp: Path) -> tuple[int, dict, str]:
    result_file = tmp / f"{path.stem}.result.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_BISECT")}
    env["TUIDEBUG_REPRO_RESULT"] = str(result_file)
    proc = subprocess.run([sys.executable, str(path)], env=env, cwd=tmp, capture_output=True,
                          text=True, timeout=600)
    return proc.returncode, json.loads(result_file.read_text()), proc.stderr


@pytest.fixture(scope="module")
def minified(bug_traces: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    """bug -> (MinifyResult, progress reports); each bug is minified once per module."""
    done: dict[str, tuple[MinifyResult, list]] = {}
    root = tmp_path_factory.mktemp("repros")

    def get(bug: str) -> tuple[MinifyResult, list]:
        if bug not in done:
            seen: list = []
            result = minify(bug_traces[bug], root / f"repro_{bug}.py", jobs=2, timeout=120,
                            on_progress=seen.append)
            done[bug] = (result, seen)
        return done[bug]
    return get


@pytest.mark.parametrize("bug", ["compile_error", "runtime_error", "accuracy"])
def test_planted_bug_minifies_to_a_tiny_standalone_repro(bug: str, bug_traces: dict[str, Path],
                                                         minified, tmp_path: Path) -> None:
    result, seen = minified(bug)
    out = result.repro_path
    assert result.verified, result.message
    assert result.nodes_before >= 50
    assert 1 <= result.nodes_after <= 3
    assert out is not None and out.exists()
    assert seen and seen[-1].nodes == result.nodes_after and seen[-1].attempts == result.attempts
    # the repro needs only torch and fails the same way on its own, in a fresh process
    text = out.read_text()
    assert "tuidebug" not in "\n".join(l for l in text.splitlines() if not l.startswith("#"))
    assert "inject_relu_bug_TESTING_ONLY" in text and "torch.compile(" in text
    rc, res, stderr = _run_repro(out, tmp_path)
    assert rc == 1, stderr[-3000:]
    trace_sig = Signature.from_trace_error(
        json.loads((bug_traces[bug] / "manifest.json").read_text())["error"])
    assert trace_sig.matches(Signature.from_result(res)), res


def test_different_failures_are_rejected_and_candidates_cached(bug_traces: dict[str, Path],
                                                               tmp_path: Path) -> None:
    failure = load_failure(bug_traces["compile_error"])
    # the same graph, compiled with the runtime bug planted instead: it fails, but differently
    failure.flags = {"cpp.inject_relu_bug_TESTING_ONLY": "runtime_error"}
    m = Minifier(failure, tmp_path / "repro.py", jobs=1, timeout=120, work_dir=tmp_path / "w")
    from tuidebug.minify.pool import WorkerPool

    m.pool = WorkerPool(1, log_dir=m.work_dir)
    try:
        flags = frozenset(failure.flags)
        relu, relu_1 = Spec(frozenset({"relu"}), flags), Spec(frozenset({"relu_1"}), flags)
        assert m.first_failing([relu]) is None
        assert (m.attempts, m.rejected) == (1, 1)
        row = json.loads((m.work_dir / "candidates.jsonl").read_text().splitlines()[-1])
        assert (row["outcome"], row["kind"], row["match"]) == ("failed", "runtime", False)
        # the same candidate, and a structurally identical one, are never compiled again
        assert m.first_failing([relu, relu_1]) is None
        assert (m.attempts, m.cache_hits) == (1, 2)
    finally:
        m.pool.close()


def test_cli_rejects_a_trace_that_did_not_fail(bug_traces: dict[str, Path], copy_trace,
                                               tmp_path: Path) -> None:
    ok = copy_trace(bug_traces["runtime_error"], "ok")
    manifest = json.loads((ok / "manifest.json").read_text())
    manifest.update(status="ok", error=None)
    (ok / "manifest.json").write_text(json.dumps(manifest))
    env = dict(os.environ, PYTHONPATH=pythonpath())
    proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", "minify", str(ok), "-o",
                           str(tmp_path / "r.py")], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    assert "did not fail" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "r.py").exists()


def test_bisect_names_the_lowering_of_the_planted_relu(bug_traces: dict[str, Path],
                                                       minified) -> None:
    from tuidebug.minify.bisection import bisect

    result, _ = minified("runtime_error")
    steps: list = []
    report = bisect(bug_traces["runtime_error"], str(result.repro_path), timeout=120,
                    on_step=lambda n, text: steps.append(text))
    # eager and the AOT backends are fine; inductor fails, and falling back from Inductor's
    # lowering of the relu (the op whose generated code is broken) fixes it
    assert (report.backend, report.subsystem) == ("inductor", "lowerings"), report.log
    assert "relu" in (report.debug_info or "")
    assert report.runs == len(steps) >= 5


def test_bisect_on_a_torch_without_the_bisector_api_says_so(bug_traces: dict[str, Path],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    import torch._inductor.compiler_bisector as compiler_bisector

    from tuidebug.compiler import compat
    from tuidebug.minify.bisection import bisect
    from tuidebug.minify.source import MinifyError

    monkeypatch.delattr(compiler_bisector.CompilerBisector, "do_bisect")
    expected = (f"torch._inductor.compiler_bisector.CompilerBisector.do_bisect is not available "
                f"in torch {compat.TORCH_VERSION}")
    with pytest.raises(MinifyError, match=re.escape(expected)):
        bisect(bug_traces["runtime_error"], timeout=60)
