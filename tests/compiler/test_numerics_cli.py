"""``tuidebug numerics TRACE``: the first diverging kernel found for an existing trace by
re-running its script with ``--numerics`` after consent (tuidebug/compiler/numerics_rerun.py),
and each compile's difference classified (tuidebug/trace/queries/numerics_classes.py)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from tests.conftest import ROOT, pythonpath
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.queries.numerics_classes import (CASTS_VERDICT, CONTROL, NONE_DIVERGES,
                                                     NOT_REACHED, NOT_REPRODUCED,
                                                     RANDOM_CONTROL, RANDOM_VERDICT,
                                                     UNCONFIRMED, WRONG_KERNEL, classify,
                                                     control_needed, random_control_needed,
                                                     reruns_needed)


def _cli(*args: str, cwd: Path = ROOT, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tuidebug.cli", *args], capture_output=True,
                          text=True, cwd=cwd, input=stdin, timeout=900,
                          env=dict(os.environ, PYTHONPATH=pythonpath(), COLUMNS="200"))


def _trace(root: Path, command: list[str], *, imported: bool = False,
           checks: dict | None = None, changed: dict | None = None) -> Path:
    w = TraceWriter(root, command=command)
    if imported:
        w.update(imported_from={"kind": "torch_trace", "path": "/somewhere/log"})
    if checks is not None:
        w.write_runtime({"checks": checks})
    if changed is not None:
        w.write_config({"changed": changed})
    w.finish("ok")
    return root


def test_a_trace_that_cannot_be_re_run_is_a_clear_error(tmp_path: Path) -> None:
    """Imported from a log (no script recorded), a script gone, no script at all: one line
    each, exit 2, nothing run and nothing written."""
    script = tmp_path / "gone.py"
    cases = {
        "imported": (_trace(tmp_path / "imported", ["python", "x.py"], imported=True),
                     "was imported from a TORCH_TRACE log, which does not record the script"),
        "gone": (_trace(tmp_path / "gone", ["tuidebug", "trace", str(script)]),
                 f"the traced script {script} no longer exists"),
        "no script": (_trace(tmp_path / "noscript", ["python", "-c", "pass"]),
                      "cannot tell which script produced this trace"),
    }
    for name, (trace, said) in cases.items():
        proc = _cli("numerics", "--yes", str(trace))
        assert proc.returncode == 2, (name, proc.stdout, proc.stderr)
        assert said in proc.stderr and "Traceback" not in proc.stderr, (name, proc.stderr)
        assert not Path(f"{trace}-numerics").exists(), name
    assert len(cases) == 3


def test_nothing_runs_without_consent(tmp_path: Path) -> None:
    """No terminal and no --yes: the plan is shown, nothing runs."""
    script = tmp_path / "s.py"
    script.write_text("open('ran', 'w').write('x')\n")
    trace = _trace(tmp_path / "t", ["tuidebug", "trace", str(script)])
    proc = _cli("numerics", str(trace), cwd=tmp_path, stdin="")
    assert proc.returncode == 2 and "pass --yes" in proc.stderr, proc.stderr
    assert "tuidebug numerics will run:" in proc.stderr and str(script) in proc.stderr
    assert not (tmp_path / "ran").exists() and not Path(f"{trace}-numerics").exists()


def _kernel(name: str, ok: bool, dtype: str = "float32", classified: str | None = None) -> dict:
    k = {"kernel": name, "call": 0, "ok": ok, "err_compiled": 1.0 if not ok else 1e-7,
         "err_eager": 1e-7, "buffers": [{"buffer": "buf0", "node": "relu", "ok": ok,
                                         "dtype": dtype}]}
    if classified:
        k["classified"] = classified
    return k


def _report(kernels: list[dict], random_ops: list[str] | None = None) -> dict:
    graph = {"graph": "0_0-forward", "kind": "forward", "kernels": kernels}
    if random_ops:
        graph["random_ops"] = random_ops
    bad = next((k for k in kernels if not k["ok"]), None)
    return {"numerics": {"graphs": [graph],
                         "first": {"graph": "0_0-forward", "kind": "forward", **bad} if bad
                         else None}}


def test_a_difference_is_classified_by_the_re_runs_the_trace_calls_for(tmp_path: Path) -> None:
    """Which re-runs are asked for comes from the judged kernels (a 16-bit value: precision
    casts; random ops or kernels classified as random: fallback_random); the verdict from
    what each re-run found."""
    fp32 = _trace(tmp_path / "fp32", ["x.py"], checks={"0/0": _report(
        [_kernel("k0", True), _kernel("cpp_fused_relu_1", False)])})
    assert reruns_needed(Trace(fp32)) == {}  # float32, no random numbers: nothing to try
    assert control_needed(Trace(fp32)) == "compile 0/0: cpp_fused_relu_1 in 0_0-forward diverges"
    (c,) = classify(Trace(fp32), {CONTROL: Trace(fp32)})  # the same again: reproduced
    assert c.verdict == WRONG_KERNEL and c.kernel == "cpp_fused_relu_1", c
    assert [r.outcome for r in c.reruns] == ["stays", "not run", "not run"], c.reruns

    bf16 = _trace(tmp_path / "bf16", ["x.py"], checks={"0/0": _report(
        [_kernel("triton_0", False, "bfloat16")])})
    assert list(reruns_needed(Trace(bf16))) == ["emulate_precision_casts"]
    clean = _trace(tmp_path / "clean", ["x.py"], checks={"0/0": _report(
        [_kernel("triton_0", True, "bfloat16")])})
    wrong = _trace(tmp_path / "wrong", ["x.py"], checks={"0/0": _report(
        [_kernel("triton_0", False, "bfloat16")])})
    ctl = {CONTROL: Trace(bf16)}
    (c,) = classify(Trace(bf16), {**ctl, "emulate_precision_casts": Trace(clean)})
    assert c.verdict == CASTS_VERDICT and c.reruns[1].outcome == "disappears", c
    (c,) = classify(Trace(bf16), {**ctl, "emulate_precision_casts": Trace(wrong)})
    assert c.verdict == WRONG_KERNEL and c.reruns[1].outcome == "stays", c
    (c,) = classify(Trace(bf16), ctl, {"emulate_precision_casts": "not available in torch 2.11"})
    assert c.verdict.startswith(WRONG_KERNEL + " (unless") and \
        c.reruns[1].detail == "not available in torch 2.11", c

    drop = _trace(tmp_path / "drop", ["x.py"], checks={"0/0": _report(
        [_kernel("cpp_fused_dropout_0", True, classified="random numbers")], ["native_dropout"])})
    assert list(reruns_needed(Trace(drop))) == ["fallback_random"]
    drop_clean, drop_wrong = (Trace(_trace(tmp_path / f"drop_{ok}", ["x.py"], checks={
        "0/0": _report([_kernel("cpp_fused_dropout_0", ok)], ["native_dropout"])}))
        for ok in (True, False))
    (c,) = classify(Trace(drop), {"fallback_random": drop_clean})
    assert c.verdict == RANDOM_VERDICT and c.reruns[1].outcome == "disappears", c
    assert control_needed(Trace(drop)) is None  # no kernel diverges: none to blame
    # with the flag on the kernels may change (a dropout becomes eager's op): the same graph
    # judged whole is reached; a re-run that judged another graph says nothing of it
    (c,) = classify(Trace(drop), {"fallback_random": Trace(clean)})
    assert c.verdict == RANDOM_VERDICT and c.reruns[1].outcome == "disappears", c
    elsewhere = _report([_kernel("cpp_fused_dropout_0", True)], ["native_dropout"])
    elsewhere["numerics"]["graphs"][0]["graph"] = "1_0-forward"
    (c,) = classify(Trace(drop), {"fallback_random": Trace(_trace(
        tmp_path / "elsewhere", ["x.py"], checks={"0/0": elsewhere}))})
    assert c.verdict == NOT_REACHED and c.reruns[1].outcome == "not reached", c
    # with eager's numbers drawn a kernel diverges: blamed only if it diverges once more
    assert random_control_needed(Trace(drop), drop_wrong).startswith("compile 0/0: with "
                                                                      "fallback_random=True")
    assert random_control_needed(Trace(drop), drop_clean) is None
    (c,) = classify(Trace(drop), {"fallback_random": drop_wrong})
    assert c.verdict == UNCONFIRMED, c
    (c,) = classify(Trace(drop), {"fallback_random": drop_wrong, RANDOM_CONTROL: drop_wrong})
    assert c.verdict == WRONG_KERNEL and "hidden by random numbers" in c.why, c
    assert [r.flag for r in c.reruns] == ["emulate_precision_casts", "fallback_random",
                                          RANDOM_CONTROL] and c.reruns[2].outcome == "stays", c
    (c,) = classify(Trace(drop), {"fallback_random": drop_wrong, RANDOM_CONTROL: drop_clean})
    assert c.verdict == NOT_REPRODUCED and c.reruns[2].outcome == "disappears", c
    on = _trace(tmp_path / "on", ["x.py"], changed={"fallback_random": {"value": True}},
                checks={"0/0": _report([_kernel("k", True)], ["native_dropout"])})
    assert reruns_needed(Trace(on)) == {}
    (c,) = classify(Trace(on), {})
    assert c.verdict == NONE_DIVERGES, c


def test_a_kernel_is_blamed_only_when_a_control_run_reached_it_and_it_diverged_again(
        tmp_path: Path) -> None:
    """The control run (same settings) must judge the same kernel call and see it diverge
    first again; a re-run that never judged that call says "not reached", never a class."""
    def made(name: str, kernels: list[dict], graph: str = "0_0-forward") -> Trace:
        report = _report(kernels)
        report["numerics"]["graphs"][0]["graph"] = graph
        if report["numerics"]["first"]:
            report["numerics"]["first"]["graph"] = graph
        return Trace(_trace(tmp_path / name, ["x.py"], checks={"0/0": report}))

    first = made("first", [_kernel("k0", True), _kernel("cpp_fused_relu_1", False)])
    cases = {
        # the same kernel call matches this time: run-to-run noise, not a wrong kernel
        "gone": (made("gone", [_kernel("k0", True), _kernel("cpp_fused_relu_1", True)]),
                 NOT_REPRODUCED, "disappears"),
        # another kernel diverges first this time
        "moved": (made("moved", [_kernel("k0", False), _kernel("cpp_fused_relu_1", False)]),
                  NOT_REPRODUCED, "moves"),
        # it stopped before the kernel (only k0 judged): nothing to say of cpp_fused_relu_1
        "short": (made("short", [_kernel("k0", True)]), NOT_REACHED, "not reached"),
        # it took another path: another graph's kernels judged
        "other": (made("other", [_kernel("k0", True), _kernel("cpp_fused_relu_1", True)],
                       graph="1_0-forward"), NOT_REACHED, "not reached"),
        "no trace": (None, NOT_REACHED, "not reached"),
    }
    for name, (control, verdict, outcome) in cases.items():
        (c,) = classify(first, {CONTROL: control})
        assert (c.verdict, c.reruns[0].flag, c.reruns[0].outcome) == (
            verdict, CONTROL, outcome), (name, c)
    (c,) = classify(first, {})
    assert c.verdict == UNCONFIRMED, c  # no control run: never blamed
    # a flag's re-run that stopped before the kernel: "not reached", not "disappears"
    bf16 = made("bf16", [_kernel("triton_0", False, "bfloat16")])
    (c,) = classify(bf16, {CONTROL: bf16, "emulate_precision_casts": made(
        "casts_short", [_kernel("triton_0", True, "bfloat16")], graph="1_0-forward")})
    assert c.verdict == NOT_REACHED and c.reruns[1].outcome == "not reached", c
    assert "not triton_0 in 0_0-forward" in c.why, c.why
    assert len(cases) == 5


def test_outputs_that_differ_with_every_kernel_agreeing_are_not_called_a_match(
        tmp_path: Path) -> None:
    """The check's outputs differ from eager, yet every generated kernel agrees (the difference
    comes from an extern kernel or eager code): "not located", never "no kernel diverges"; and
    a mismatch the given trace recorded must come back in the numerics run."""
    from tuidebug.trace.queries.numerics_classes import NOT_LOCATED, against

    agree = _report([_kernel("k0", True), _kernel("k1", True)])
    differ = _trace(tmp_path / "differ", ["x.py"], checks={"0/0": {
        **agree, "close": False, "detail": "logits: rmse 0.5 vs eager 1e-07"}})
    (c,) = classify(Trace(differ), {})
    assert c.verdict == NOT_LOCATED and "logits: rmse 0.5" in c.why, c
    matches = _trace(tmp_path / "matches", ["x.py"], checks={"0/0": {**agree, "close": True}})
    (ok,) = classify(Trace(matches), {})
    assert ok.verdict == NONE_DIVERGES, ok
    # the given trace's check found a mismatch: agreeing now is "not reproduced"; a compile
    # the numerics run never judged is "not reached"
    given = _trace(tmp_path / "given", ["x.py"], checks={
        "0/0": {"close": False, "detail": "loss: rmse 0.3"},
        "1/0": {"close": False, "detail": "fc1.weight.grad: rmse 0.2"}})
    (same, missing) = against(Trace(given), [ok])
    assert (same.compile_id, same.verdict) == ("0/0", NOT_REPRODUCED) and "loss" in same.why
    assert (missing.compile_id, missing.verdict) == ("1/0", NOT_REACHED), missing
    assert against(Trace(matches), [ok]) == [ok]  # no mismatch recorded: nothing to add


FLAKY = """import pathlib
import torch
from torch._inductor import config

runs = pathlib.Path(__file__).with_name("runs")
n = int(runs.read_text()) if runs.exists() else 0
runs.write_text(str(n + 1))
if n == 0:  # the first run only: as a nondeterministic kernel that went wrong once
    config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"


def f(x):
    return torch.relu(x) * 2


print(torch.compile(f)(torch.linspace(-1, 1, 64)).sum().item())
"""


@pytest.mark.slow
def test_a_divergence_the_control_run_does_not_reproduce_is_not_blamed(
        tmp_path: Path) -> None:
    """The relu kernel is wrong in the first numerics run only (as a nondeterministic kernel
    may be): the control run judges the same kernel call and it matches, so the verdict is
    "not reproduced" and the exit code 3 (could not judge), not "a wrong kernel" (exit 1)."""
    script = tmp_path / "flaky.py"
    script.write_text(FLAKY)
    trace = _trace(tmp_path / "t", ["tuidebug", "trace", str(script)])
    proc = _cli("numerics", "--yes", "--json", str(trace), cwd=tmp_path)
    assert proc.returncode == 3, (proc.stdout + proc.stderr)[-3000:]
    (c,) = json.loads(proc.stdout)["classified"]
    assert c["verdict"] == NOT_REPRODUCED and "relu" in c["kernel"], c
    control = c["reruns"][0]
    assert (control["flag"], control["outcome"]) == (CONTROL, "disappears"), c
    assert control["trace"] == f"{trace}-numerics-control" and (tmp_path / "runs").read_text() \
        == "2"  # the numerics run and the control run; no flag re-run (float32, no random op)


@pytest.mark.slow
def test_numerics_names_the_planted_relu_kernel_of_a_trace_made_without_it(
        tmp_path: Path) -> None:
    """The planted relu bug traced with --no-check (no kernel judged); ``numerics --yes``
    re-runs the script and names the relu kernel as the first divergence, a wrong kernel
    (float32 throughout: no re-run could explain it away), in a new trace beside it."""
    trace = tmp_path / "acc"
    made = _cli("trace", "--no-check", "-o", str(trace),
                str(ROOT / "examples" / "failing_compile.py"), "--bug", "accuracy")
    assert (trace / "manifest.json").is_file(), made.stderr[-3000:]
    assert not Trace(trace).runtime.get("checks")  # nothing judged in the trace itself
    proc = _cli("numerics", "--yes", str(trace))
    assert proc.returncode == 1, (proc.stdout + proc.stderr)[-3000:]  # a kernel judged wrong
    out = Path(f"{trace}-numerics")
    first = proc.stdout.split("first diverging kernel: ", 1)[1].split()[0]
    assert "relu" in first, proc.stdout
    summary = json.loads(_cli("info", "--json", str(out)).stdout)
    (entry,) = summary["numerics"].values()
    assert entry["first"]["kernel"] == first and entry["kernels"][0]["kernel"] == first
    assert entry["first"]["buffers"][0]["source"]["code"] == "return x + torch.tanh(h)"
    (c,) = json.loads((out / "numerics.json").read_text())["compiles"]
    assert c["kernel"] == first and c["verdict"] == WRONG_KERNEL, c
    # the control run (same settings) saw the same kernel call diverge first again
    assert [(r["flag"], r["outcome"]) for r in c["reruns"]] == [
        (CONTROL, "stays"), ("emulate_precision_casts", "not run"),
        ("fallback_random", "not run")], c
    assert "control (same settings): stays" in proc.stdout, proc.stdout
    assert proc.stdout.splitlines()[0].startswith("TESTING-ONLY flag set: cpp.inject_relu_bug")
    assert "classified: a wrong kernel" in proc.stdout, proc.stdout
    assert f"the numerics are in the new trace {out}" in proc.stderr
    assert not (trace / "numerics.json").exists()  # the given trace is not modified


@pytest.mark.slow  # the script imports torch
def test_a_run_that_records_no_accuracy_check_is_a_clear_error(tmp_path: Path) -> None:
    """The script compiles nothing: no check to judge kernels in, said in one line with where
    the run's output is (exit 3: could not judge)."""
    script = tmp_path / "nothing.py"
    script.write_text("import torch\nprint(torch.ones(2).sum())\n")
    trace = _trace(tmp_path / "t", ["tuidebug", "trace", str(script)])
    proc = _cli("numerics", "--yes", str(trace), cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr[-3000:]
    said = proc.stderr.strip().splitlines()[-1]
    assert said.startswith(f"tuidebug: error: the run recorded no accuracy check in {trace}-"
                           "numerics: no compiled graph ran"), said
    assert f"its output is in {trace}-numerics.log" in said and "Traceback" not in proc.stderr


def test_a_hostile_numerics_json_is_read_as_data(tmp_path: Path) -> None:
    """numerics.json is trace data: escapes shown inert, wrong types reported, never a
    traceback; a file of the wrong shape is a problem and no classification."""
    from tuidebug.trace.queries.numerics import numerics_summary
    from tuidebug.viewers.numerics_report import numerics_report

    esc = "\x1b[2J\x1b]52;c;cHduZWQ=\x07"
    trace = _trace(tmp_path / "t", ["x.py"], checks={"0/0": _report([_kernel("k", True)])})
    (trace / "numerics.json").write_text(json.dumps({"compiles": [
        {"compile_id": "0/0", "kernel": f"k{esc}", "verdict": f"fine{esc}", "why": 5,
         "reruns": ["x", {"flag": f"f{esc}", "outcome": ["?"], "trace": f"/t{esc}"}]}]}))
    buf = io.StringIO()
    console = Console(file=buf, width=200, color_system=None)
    for line in numerics_report(Trace(trace)):
        console.print(line)
    text = buf.getvalue()
    assert "\x1b" not in text and "\x07" not in text and "fine\\x1b[2J" in text, text
    assert "f\\x1b[2J" in text and "classified: " in text
    t = Trace(trace)
    summary = numerics_summary(t)["0/0"]["classified"]
    assert summary["kernel"] == f"k{esc}" and summary["why"] == "", summary  # data, as it is
    assert any("numerics.json" in str(p) and "why" in str(p) for p in t.problems), t.problems
    (trace / "numerics.json").write_text(json.dumps([1, 2]))
    t = Trace(trace)
    assert numerics_summary(t)["0/0"]["classified"] is None
    assert any("numerics.json" in str(p) for p in t.problems), t.problems


def test_a_rank_of_a_job_that_cannot_run_alone_is_told(tmp_path: Path) -> None:
    """``tuidebug numerics JOB/rank_0`` re-runs the rank's script alone; a torchrun script then
    raises in init_process_group. It said only 'no compiled graph ran (exit code 11 …)': the
    script's error and that the trace is a rank of a job run alone are said."""
    from tuidebug.compiler.advise import why_not_ran
    from tuidebug.trace.format.manifest import ScriptError

    job = tmp_path / "job"
    rank = _trace(job / "rank_0", ["tuidebug", "trace", "train.py"])
    (job / "job").mkdir()
    made = TraceWriter(tmp_path / "made", command=["tuidebug", "trace", "train.py"])
    made.update(script_error=ScriptError(
        "ValueError", "Error initializing torch.distributed using env:// rendezvous: "
        "environment variable RANK expected, but not set", "").to_json())
    made.finish("ok")
    said = why_not_ran(rank, Trace(tmp_path / "made"))
    assert said == (": the script raised ValueError: Error initializing torch.distributed using "
                    "env:// rendezvous: environment variable RANK expected, but not set — "
                    f"{rank} is rank 0 of a distributed job, and tuidebug re-runs its script "
                    "alone, as one process, without torchrun"), said
    assert why_not_ran(tmp_path / "made", Trace(tmp_path / "made")).endswith("but not set")


@pytest.mark.slow
def test_advise_try_stops_when_the_script_as_traced_compiles_nothing(tmp_path: Path) -> None:
    """``advise JOB/rank_1 --try`` re-ran a torchrun script alone: every run raised in
    init_process_group, and the table read 'as traced: 0 compiles' then 'none of the 6
    suggestions tried removed a compile or a graph break' — a comparison of runs that never
    compiled. The baseline that compiled nothing stops it, with the script's error and the
    rank."""
    from tuidebug.compiler.advise import try_all
    from tuidebug.errors import RecompileError
    from tuidebug.trace.queries.advice_records import Apply, Suggestion

    script = tmp_path / "train.py"
    script.write_text("raise ValueError('environment variable RANK expected, but not set')\n")
    job = tmp_path / "job"
    rank = _trace(job / "rank_1", ["tuidebug", "trace", str(script)])
    (job / "job").mkdir()
    tries = [Suggestion("dynamic=True", "compile with dynamic=True", "why", "recompiles",
                        Apply(compile_kwargs={"dynamic": True}))]
    with pytest.raises(RecompileError) as e:
        try_all(rank, tries, tmp_path / "advise", timeout=600)
    said = str(e.value)
    assert "compiled nothing: the script raised ValueError: environment variable RANK expected" \
        in said and "is rank 1 of a distributed job" in said and "no suggestion was tried" \
        in said, said
    assert not (tmp_path / "advise" / "try-1").exists()
