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
from tuidebug.trace.format.manifest import read_manifest


def _run_repro(path: Path, tmp: Path) -> tuple[int, dict, str]:
    result_file = tmp / f"{path.stem}.result.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_BISECT")}
    env["TUIDEBUG_REPRO_RESULT"] = str(result_file)
    proc = subprocess.run([sys.executable, str(path)], env=env, cwd=tmp, capture_output=True,
                          text=True, timeout=600)
    return proc.returncode, json.loads(result_file.read_text()), proc.stderr


@pytest.fixture(scope="module")
def minified(bug_traces: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    """bug -> (MinifyResult, progress reports); each bug is minified once per module. The
    compile error is minified with two candidate workers (the parallel pool, speculative runs
    included, end to end to a verified repro; a pool of two cancelled: the cancel test below),
    the other two with one: the same steps and checks, without a second warm worker's torch
    import and the speculative runs it makes (about 5 s of CPU a minify: 18-20 s with two, 14 s
    with one)."""
    done: dict[str, tuple[MinifyResult, list]] = {}
    root = tmp_path_factory.mktemp("repros")

    def get(bug: str) -> tuple[MinifyResult, list]:
        if bug not in done:
            seen: list = []

            def on_progress(p) -> None:
                seen.append(p)
                if p.step == "done":  # a cancel once all is done must not lose the result
                    raise _Cancel()
            result = minify(bug_traces[bug], root / f"repro_{bug}.py",
                            jobs=2 if bug == "compile_error" else 1, timeout=120,
                            on_progress=on_progress)
            done[bug] = (result, seen)
        return done[bug]
    return get


class _Cancel(Exception):
    """What a caller (the TUI) raises from ``on_progress`` to cancel."""


@pytest.mark.parametrize("bug", ["compile_error", "runtime_error", "accuracy"])
def test_planted_bug_minifies_to_a_tiny_standalone_repro(bug: str, bug_traces: dict[str, Path],
                                                         minified, tmp_path: Path) -> None:
    result, seen = minified(bug)
    out = result.repro_path
    assert result.verified and not result.interrupted, result.message
    assert result.nodes_before >= 50
    assert 1 <= result.nodes_after <= 3
    assert out is not None and out.exists()
    assert seen and seen[-1].nodes == result.nodes_after and seen[-1].attempts == result.attempts
    assert seen[-1].step == "done" and result.work_dir is None
    # the two confirmation re-runs of the start are counted apart from the candidates
    (confirm,) = [s for s in result.steps if s["step"] == "confirm"]
    assert result.confirm_runs == confirm["confirm_runs"] == 2 and confirm["attempts"] == 0
    assert result.attempts == sum(s["attempts"] for s in result.steps)
    # the repro needs only torch and fails the same way on its own, in a fresh process
    text = out.read_text()
    # its input was simplified as far as the failure allows: one element, all zeros
    assert "((1, 1), (1, 1), torch.float32, 'cpu', 'zeros')," in text
    assert "tuidebug" not in "\n".join(l for l in text.splitlines() if not l.startswith("#"))
    assert "inject_relu_bug_TESTING_ONLY" in text and "torch.compile(" in text
    rc, res, stderr = _run_repro(out, tmp_path)
    assert rc == 1, stderr[-3000:]
    trace_sig = Signature.from_trace_error(read_manifest(bug_traces[bug]).error)
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
    proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", "minify", "--yes", str(ok), "-o",
                           str(tmp_path / "r.py")], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    assert "did not fail" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "r.py").exists()


def test_bisect_names_the_lowering_of_the_planted_relu(bug_traces: dict[str, Path],
                                                       minified) -> None:
    """Through BisectTask, as the TUI runs it: the bisector in a child process, its progress
    and its report as JSON-lines events."""
    from tuidebug.minify.bisect_task import BisectTask

    result, _ = minified("runtime_error")
    task = BisectTask(bug_traces["runtime_error"], result.repro_path, timeout=120)
    events = list(task.messages())
    tail = task.log_tail()
    assert task.close() == 0, (events, tail)
    steps = [e for e in events if e["event"] == "progress"]
    assert [e["run"] for e in steps] == list(range(1, len(steps) + 1))
    assert [e["event"] for e in events[len(steps):]] == ["result"], events
    report = events[-1]["result"]
    # eager and the AOT backends are fine; inductor fails, and falling back from Inductor's
    # lowering of the relu (the op whose generated code is broken) fixes it
    assert (report["backend"], report["subsystem"]) == ("inductor", "lowerings"), report["log"]
    assert "relu" in (report["debug_info"] or "")
    assert report["runs"] == len(steps) >= 5


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


def test_repro_run_against_a_different_failure_exits_3(bug_traces: dict[str, Path],
                                                       tmp_path: Path) -> None:
    """The repro checks the whole signature, not just kind and type: compiled for real, the
    relu's CppCompileError is not the one this repro expects, and it says so (exit 3)."""
    from tuidebug.minify.codegen import ReproInfo, render
    from tuidebug.minify.program import Reducer

    failure = load_failure(bug_traces["compile_error"])
    sig = failure.signature
    prog = Reducer(failure.graph, failure.flags).build(Spec(frozenset({"relu"}),
                                                            frozenset(failure.flags)))
    other = ReproInfo(kind=sig.kind, type=sig.type, key=sig.key,
                      diags=("expected ';' before '}' token",))
    out = tmp_path / "other.py"
    out.write_text(render(prog, other))
    rc, res, stderr = _run_repro(out, tmp_path)
    assert (res["kind"], res["type"]) == ("compile", "torch._inductor.exc.CppCompileError")
    assert rc == 3, stderr[-3000:]
    assert "failed DIFFERENTLY" in stderr and "expected ';' before '}' token" in stderr
    # the compiler's own error comes first, not buried in (or cut from) g++'s header warnings
    declared = stderr.find("was not declared in this scope")
    assert 0 <= declared < stderr.find(res["traceback"][:500])


def test_cancel_from_on_progress_keeps_the_best_repro_so_far(bug_traces: dict[str, Path],
                                                             tmp_path: Path) -> None:
    """The TUI cancels by raising from on_progress: like Ctrl-C, the best repro found so far is
    written (not verified), the workers and the work directory are cleaned up, and the callback
    is not called again."""
    calls_after: list = []
    cancelled = False

    def on_progress(p) -> None:
        nonlocal cancelled
        if cancelled:
            calls_after.append(p)
        elif p.step == "nodes":  # the start (a kernel's region) has reproduced, and is confirmed
            cancelled = True
            raise _Cancel()

    out = tmp_path / "repro.py"
    result = minify(bug_traces["runtime_error"], out, jobs=2, timeout=120,
                    on_progress=on_progress)
    assert result.interrupted and not result.verified and not calls_after
    assert result.message.startswith("cancelled: wrote the best repro found so far"), result.message
    assert result.repro_path == out and out.exists()
    assert result.nodes_after < result.nodes_before and result.work_dir is None
    rc, res, stderr = _run_repro(out, tmp_path)
    assert rc == 1, stderr[-3000:]


def test_limits_must_be_positive(bug_traces: dict[str, Path], tmp_path: Path) -> None:
    from tuidebug.minify.source import MinifyError

    env = dict(os.environ, PYTHONPATH=pythonpath())
    for opt, value in (("--timeout", "0"), ("--accuracy-tol", "-1e-3"), ("--accuracy-tol", "0"),
                       ("--timeout", "nan")):
        proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", "minify", "--yes",
                               str(bug_traces["runtime_error"]), "-o", str(tmp_path / "r.py"),
                               f"{opt}={value}"], env=env, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 2 and f"{opt}: must be a positive number" in proc.stderr, \
            (opt, value, proc.stderr)
    with pytest.raises(MinifyError, match="timeout must be a positive number"):
        minify(bug_traces["runtime_error"], tmp_path / "r.py", timeout=-5)
    assert not (tmp_path / "r.py").exists()


def test_plain_bisect_of_an_accuracy_trace_says_to_minify_first(bug_traces: dict[str, Path],
                                                               tmp_path: Path) -> None:
    """An accuracy mismatch does not show in a script's exit status: re-running the script
    cannot tell good from bad, so bisect refuses and says how to bisect a repro instead."""
    trace = bug_traces["accuracy"]
    proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", "bisect", "--yes", str(trace)],
                          env=dict(os.environ, PYTHONPATH=pythonpath()), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "accuracy mismatch" in proc.stderr and "Traceback" not in proc.stderr
    assert f"tuidebug minify {trace} -o repro.py" in proc.stderr
    assert f"tuidebug bisect {trace} --repro repro.py" in proc.stderr


RELU_SCRIPT = """
import torch

x = torch.randn(8, 16)
print(torch.compile(lambda t: torch.relu(t * 2) + 1)(x).sum())
"""


@pytest.mark.slow  # traces and bisects
def test_plain_bisect_runs_the_script_with_the_flags_it_was_traced_with(tmp_path: Path) -> None:
    """A failure that needs a `tuidebug trace --set` flag: each bisection run of the traced
    script (a fresh process) applies that flag again, or the failure would never happen."""
    from tuidebug.minify.bisection import _test_command
    from tuidebug.minify.pool import child_env
    from tuidebug.trace.format.reader import Trace

    script, trace = tmp_path / "relu.py", tmp_path / "trace"
    script.write_text(RELU_SCRIPT)
    env = dict(os.environ, PYTHONPATH=pythonpath())
    p = subprocess.run([sys.executable, "-m", "tuidebug.cli", "trace", "-o", str(trace), "--set",
                        "cpp.inject_relu_bug_TESTING_ONLY=runtime_error", str(script)], env=env,
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    manifest = json.loads((trace / "manifest.json").read_text())
    assert manifest["status"] == "failed", p.stderr[-3000:]
    assert manifest["config_overrides"] == {"cpp.inject_relu_bug_TESTING_ONLY": "runtime_error"}

    def run_once() -> subprocess.CompletedProcess[str]:
        t = Trace(trace)
        cmd, cwd = _test_command(t, None, Signature.from_trace_error(t.error))
        return subprocess.run(cmd, cwd=cwd, env=child_env(), capture_output=True, text=True,
                              timeout=600)

    run = run_once()
    assert run.returncode != 0 and "RuntimeError: unhandled error" in run.stderr, run.stderr[-3000:]
    # the script alone is fine: the failure above came from the flag the child applied
    manifest["config_overrides"] = {}
    (trace / "manifest.json").write_text(json.dumps(manifest))
    run = run_once()
    assert run.returncode == 0, run.stderr[-3000:]


def test_an_accuracy_failure_minifies_from_its_first_diverging_kernel(minified) -> None:
    """The eager check named the first diverging kernel: minify starts from its FX nodes, and
    that region reproduces the failure at its first candidate; the repro fails the trace's way.
    (How many fewer candidates than a start from the whole graph: bench/minify_vs_torch.py
    --starts divergence,kernels,graph, which runs both — a second minify is too dear for CI.)"""
    result, _ = minified("accuracy")
    assert result.verified and result.start.startswith("the first diverging kernel cpp_"), \
        (result.start, result.message)
    (region,) = [s for s in result.steps if s["step"] == "region"]
    assert region["attempts"] == 1, result.steps  # the kernel's region reproduced at once
