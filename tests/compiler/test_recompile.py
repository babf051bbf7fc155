"""Recompile with changed flags in the warm worker: real compiles, real crashes, no mocks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from bench._hogs import hogging
from tests.conftest import ROOT, Case, digest
from tuidebug.compiler import recompile
from tuidebug.compiler.flags import FlagValueError, UnknownFlag
from tuidebug.compiler.worker import RecompileWorker
from tuidebug.trace.diff import diff_traces
from tuidebug.trace.format.reader import Trace

SMALL = """
import torch
def f(x):
    return (x * 2).relu() + 1
print(torch.compile(f)(torch.randn(8)).sum().item())
"""


def script(tmp_path: Path, name: str, body: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p


# -- validation (no compiler) ---------------------------------------------------------------------

def test_parse_sets_validates_against_the_registry() -> None:
    assert recompile.parse_sets(["max_fusion_size=1", "size_asserts=false"]) == {
        "max_fusion_size": 1, "size_asserts": False}
    assert recompile.parse_sets(["triton.cudagraphs=1"]) == {"triton.cudagraphs": True}
    with pytest.raises(UnknownFlag, match="did you mean: max_fusion_size"):
        recompile.parse_sets(["max_fusion_sise=1"])
    with pytest.raises(FlagValueError, match="expects an int"):
        recompile.parse_sets(["max_fusion_size=big"])
    with pytest.raises(recompile.RecompileError, match="NAME=VALUE"):
        recompile.parse_sets(["max_fusion_size"])


def test_default_out_is_beside_the_trace_and_never_reused(tmp_path: Path) -> None:
    trace = tmp_path / "mlp"
    trace.mkdir()
    first = recompile.default_out(trace, {"max_fusion_size": 1})
    assert first == tmp_path / "mlp-max_fusion_size=1"
    first.mkdir()
    (first / "manifest.json").write_text("{}")
    assert recompile.default_out(trace, {"max_fusion_size": 1}).name == "mlp-max_fusion_size=1-2"


def test_cli_rejects_bad_input_with_exit_2(mlp_trace: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tuidebug.cli", "recompile", "--yes", str(mlp_trace),
                               *args], env=env, capture_output=True, text=True, timeout=120)

    p = run("--set", "max_fusion_sz=1")
    assert p.returncode == 2 and "did you mean: max_fusion_size" in p.stderr, p.stderr
    p = run("--set", "max_fusion_size=abc")
    assert p.returncode == 2 and "expects an int, got 'abc'\n" in p.stderr, p.stderr
    p = run("--set", "pick_loop_orders")
    assert p.returncode == 2 and "NAME=VALUE, got 'pick_loop_orders'\n" in p.stderr, p.stderr
    p = run()
    assert p.returncode == 2 and "--set" in p.stderr
    p = run("--set", "max_fusion_size=1", "-o", str(mlp_trace))
    assert p.returncode == 2 and "never modified" in p.stderr


def test_client_modules_do_not_import_torch() -> None:
    code = ("import sys; import tuidebug.compiler.worker, tuidebug.compiler.recompile, "
            "tuidebug.compiler.flag_demos, tuidebug.compiler.demo_run, tuidebug.trace.diff, "
            "tuidebug.viewers.diff_view, "
            "tuidebug.cli.compiling; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# -- real recompiles ------------------------------------------------------------------------------

def test_max_fusion_size_1_gives_more_kernels_and_leaves_the_original(
        worker: RecompileWorker, mlp_trace: Path, copy_trace) -> None:
    original = copy_trace(mlp_trace, "mlp")
    before = digest(original)
    messages: list[str] = []
    job = worker.submit(original, ["max_fusion_size=1"], on_progress=lambda j, m: messages.append(m))
    assert job.wait(600)
    assert job.state == "ok", (job.error, job.result)
    assert job.out == original.parent / "mlp-max_fusion_size=1"
    assert digest(original) == before, "the original trace was modified"
    assert any(m.startswith("phase lowering") for m in messages), messages

    new = Trace(job.out)
    assert new.status == "ok"
    assert new.manifest.config_overrides == {"max_fusion_size": 1}
    assert new.manifest.recompile["sets"] == {"max_fusion_size": 1}
    assert new.manifest.command == Trace(original).manifest.command

    d = diff_traces(original, job.out)
    changed = {c["name"]: c for c in d["config"]["changed"]}
    assert changed["max_fusion_size"]["a"] == 64 and changed["max_fusion_size"]["b"] == 1
    s = d["summary"]
    # one Inductor kernel per scheduler node after fusion: more of them without fusion (on CPU
    # the C++ backend packs the loop nests between two extern calls into one function)
    assert s["scheduler_kernels"]["b"] > s["scheduler_kernels"]["a"], s
    assert s["fused"]["b"] < s["fused"]["a"]
    assert s["kernels"]["b"] >= s["kernels"]["a"]


def test_unchanged_recompile_reproduces_the_cold_trace(worker: RecompileWorker, mlp_trace: Path,
                                                       tmp_path: Path) -> None:
    """Fidelity of the warm worker: same flags → same passes, IR, kernels and wrapper."""
    job = worker.submit(mlp_trace, {}, tmp_path / "same")
    assert job.wait(600) and job.state == "ok", job.error
    d = diff_traces(mlp_trace, job.out)
    (g,) = d["graphs"]
    assert not g["passes"] and not g["ops"] and not g["stages"]
    assert g["ir"]["pre"]["a"] == g["ir"]["pre"]["b"] and g["ir"]["post"]["a"] == g["ir"]["post"]["b"]
    assert {k["status"] for k in g["kernels"]} == {"unchanged"}
    assert not g["wrapper"]["changed"], g["wrapper"]["diff"]
    assert [c["name"] for c in d["config"]["changed"] if not c["capture"]] == []
    # config.json written, and the same capture settings (one cache policy) as the cold trace
    assert (job.out / "config.json").is_file() and d["config"]["note"] is None
    assert d["config"]["capture_settings"] == [], d["config"]["capture_settings"]


def test_cache_policy_leaves_a_set_cache_flag_to_the_user() -> None:
    from tuidebug.compiler import compat

    assert compat.caches_off() == compat.CACHES_OFF
    assert compat.caches_off({"max_fusion_size": 1}) == compat.CACHES_OFF
    # the AOTAutograd cache stores FX-graph-cache entries: it goes with fx_graph_cache
    assert compat.caches_off({"fx_graph_cache": True}) == {
        "dynamo.automatic_dynamic_local_pgo": False}


def test_graph_caches_stay_off_so_a_second_job_records_everything(
        worker: RecompileWorker, tmp_path: Path) -> None:
    """Two identical jobs on one cache directory: without the capture's graph-level caches off,
    the second would hit the AOTAutograd/FX graph caches and skip the pre-grad passes (and with
    them config.json, passes and IR). A --set of fx_graph_cache hands both caches back."""
    small = script(tmp_path, "small.py", SMALL)
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor-cache")}

    def run(name: str, sets: list[str]) -> Trace:
        job = worker.submit_script(small, sets=sets, out=tmp_path / name, env=env)
        assert job.wait(600) and job.state == "ok", (job.error, job.result)
        return Trace(job.out)

    def hits(t: Trace) -> int:
        return sum(int((c.get("counters") or {}).get(group, {}).get(key, 0))
                   for c in t.compiles.values()
                   for group, key in (("inductor", "fxgraph_cache_hit"),
                                      ("aot_autograd", "autograd_cache_hit")))

    for name in ("first", "second"):
        t = run(name, [])
        assert (t.root / "config.json").is_file(), name
        assert hits(t) == 0, name
    assert {k: v for k, v in t.manifest.tuidebug_config.items()
            if k != "trace.provenance_tracking_level"} == {
        "fx_graph_cache": False, "functorch.enable_autograd_cache": False,
        "dynamo.automatic_dynamic_local_pgo": False}
    run("cached-1", ["fx_graph_cache=True"])
    t = run("cached-2", ["fx_graph_cache=True"])
    assert set(t.manifest.tuidebug_config) == {"trace.provenance_tracking_level",
                                                  "dynamo.automatic_dynamic_local_pgo"}
    assert hits(t) > 0


def test_crashing_job_is_reported_and_the_worker_goes_on(worker: RecompileWorker,
                                                         tmp_path: Path, case: Case) -> None:
    abort = script(tmp_path, "abort.py", SMALL + "import os; os.abort()\n")
    job = worker.submit_script(abort, out=tmp_path / "aborted")
    assert job.wait(600)
    assert job.state == "crashed", job.result
    assert job.result.signal == "SIGABRT"
    assert "died" in job.error
    assert Trace(job.out).status == "crashed"  # the trace says how far it got

    ok = worker.submit_script(script(tmp_path, "small.py", SMALL), out=tmp_path / "after")
    assert ok.wait(600) and ok.state == "ok", ok.error
    case.survived = True
    case.data_lost = False


def test_compile_failure_from_a_set_is_reported(worker: RecompileWorker, tmp_path: Path,
                                                case: Case) -> None:
    base = worker.submit_script(script(tmp_path, "small.py", SMALL), out=tmp_path / "small")
    assert base.wait(600) and base.state == "ok", base.error
    # Inductor's planted bug: the C++ code generated for relu does not compile
    job = worker.submit(base.out, ["cpp.inject_relu_bug_TESTING_ONLY=compile_error"],
                        tmp_path / "broken")
    assert job.wait(600)
    assert job.state == "failed", job.result
    assert "CppCompileError" in job.error and job.result.trace_status == "failed"
    assert Trace(job.out).status == "failed"
    ok = worker.submit(base.out, ["max_fusion_size=2"], tmp_path / "after")
    assert ok.wait(600) and ok.state == "ok", ok.error
    case.survived = True
    case.data_lost = Trace(base.out).status != "ok"  # the source trace is untouched


def test_hanging_job_hits_the_timeout(worker: RecompileWorker, tmp_path: Path,
                                      case: Case) -> None:
    hang = script(tmp_path, "hang.py", SMALL + "import time; time.sleep(3600)\n")
    t0 = time.monotonic()
    job = worker.submit_script(hang, out=tmp_path / "hung", timeout=8)
    assert job.wait(120)
    assert job.state == "timeout", job.result
    assert time.monotonic() - t0 < 90
    assert "timed out after 8s" in job.error
    try:
        os.kill(job.pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive, "the hung job's process is still running"
    ok = worker.submit_script(script(tmp_path, "small.py", SMALL), out=tmp_path / "after")
    assert ok.wait(600) and ok.state == "ok", ok.error
    case.survived = True
    case.data_lost = False


@pytest.mark.slow  # starts a recompile worker
def test_worker_restarts_when_its_process_dies(tmp_path: Path, case: Case) -> None:
    w = RecompileWorker(warmup=False, timeout=300).start()
    try:
        assert w.wait_ready(300), w.log_tail()
        first_pid = w.pid
        hang = script(tmp_path, "hang.py", SMALL + "import time; time.sleep(3600)\n")
        job = w.submit_script(hang, out=tmp_path / "hung")
        deadline = time.monotonic() + 120
        while job.state != "running" and time.monotonic() < deadline:
            time.sleep(0.1)
        os.kill(first_pid, signal.SIGKILL)  # the worker itself dies mid-job
        assert job.wait(60)
        assert job.state == "crashed" and "worker process died" in job.error
        ok = w.submit_script(script(tmp_path, "small.py", SMALL), out=tmp_path / "after")
        assert ok.wait(600) and ok.state == "ok", (ok.error, w.log_tail())
        assert w.pid != first_pid and w.restarts == 1
        case.survived = True
        case.data_lost = False
    finally:
        w.close()


def test_cli_recompile_prints_the_comparison(mlp_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "asserts-off"
    p = subprocess.run([sys.executable, "-m", "tuidebug.cli", "recompile", "--yes", str(mlp_trace),
                        "--set", "size_asserts=false", "-o", str(out), "--json", "-q"],
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    d = json.loads(p.stdout)
    assert d["job"]["state"] == "ok"
    assert d["summary"]["wrapper_markers"]["assert_size_stride"]["b"] == 0
    assert d["summary"]["wrapper_markers"]["assert_size_stride"]["a"] > 0
    assert any(c["name"] == "size_asserts" for c in d["config"]["changed"])


def test_a_flag_that_changes_nothing_is_no_change_with_every_core_hogged(
        profiled_trace: Path, tmp_path: Path) -> None:
    """``recompile --set max_fusion_size=63`` (the MLP has no fusion near 63 nodes: same IR,
    same kernels) while busy loops compete for every core: no kernel is reported changed,
    and the run time reads as no change (each trace's compiled call timed against eager
    side by side; identical kernels' run times never a change). The CPU was contended: a hog
    per core ran from the job's kernel compile (after Dynamo and Inductor, before the graph
    first runs: its check, its kernels timed, the whole call timed) to the recompile's end,
    each getting CPU time (a single hog on two cores left one free, and nothing checked that
    it ran). Hogging the compile before it, which times nothing, only slowed the suite."""
    out = tmp_path / "fusion63"
    with open(tmp_path / "stdout.json", "w+") as stdout:
        p = subprocess.Popen([sys.executable, "-m", "tuidebug.cli", "recompile", "--yes",
                              str(profiled_trace), "--set", "max_fusion_size=63", "-o", str(out),
                              "--json"], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                             stdout=stdout, stderr=subprocess.PIPE, text=True)
        assert p.stderr is not None
        said = []
        watchdog = threading.Timer(900, p.kill)  # the reading below has no timeout of its own
        watchdog.start()
        try:
            for line in p.stderr:  # the job's progress: "[tuidebug] phase <phase>"
                said.append(line)
                if "phase kernel_compile" in line:
                    break
            assert said and "phase kernel_compile" in said[-1], "".join(said)[-3000:]
            with hogging() as load:
                _, rest = p.communicate(timeout=900)
        finally:
            watchdog.cancel()
            if p.poll() is None:
                p.kill()
                p.wait()
        stdout.seek(0)
        printed = stdout.read()
    assert load.contended, load.describe()
    assert p.returncode == 0, ("".join(said) + rest)[-3000:]
    d = json.loads(printed)
    kernels = [k for g in d["graphs"] for k in g["kernels"]]
    assert kernels, "no kernel compared"
    assert {k["status"] for k in kernels} <= {"unchanged", "renamed"}, kernels
    assert d["summary"]["kernel_changes"]["changed"] == 0
    assert d["profile"]["calls_same"] is True, d["profile"]["verdict"]
    found = d["lines"]
    (line,) = [f for f in found if f.startswith("compiled vs eager")]
    assert "no change" in line, found
    assert not any(w in f for f in found for w in ("faster", "slower", "×")), found
