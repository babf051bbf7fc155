"""The accuracy judge (tuidebug/compiler/judge.py): its rule on tensors, and on real compiles
that used to be false "FAILED" verdicts (dropout, bf16 rounding) and a real planted bug."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from tests.conftest import ROOT, pythonpath
from tuidebug.compiler import judge
from tuidebug.trace.format.reader import Trace

MODELS = Path(__file__).with_name("verdict_models.py")


def test_rmse_rule_lets_compiled_be_better_than_eager_not_worse() -> None:
    x = torch.randn(4096).bfloat16()
    eager = (x * 100 + 1) - x * 100  # bf16 rounding of x * 100: errors up to 0.5
    fp32 = ((x.float() * 100 + 1) - x.float() * 100).bfloat16()
    ref = (x.double() * 100 + 1) - x.double() * 100
    good = judge.judge(fp32, eager, ref)
    assert good["close"] and good["rule"] == "rmse-fp64", good
    (o,) = good["outputs"]
    assert o["dtype"] == "bfloat16" and o["shape"] == [4096] and o["multiplier"] == 3.0
    assert o["err_compiled"] < 1e-3 < o["err_eager"] and o["max_abs"] > 0.1
    bad = judge.judge(eager, fp32, ref)  # roles swapped: the compiled side is the worse one
    assert not bad["close"] and bad["rule"] == "rmse-fp64" and "compiled" in bad["detail"]


def test_fallbacks_and_hard_failures_say_their_rule() -> None:
    a = torch.randn(2000)
    assert judge.judge(a + 1e-6, a, None)["rule"] == "allclose"
    cos = judge.judge(a.half() * 1.05, a.half(), None, why_no_fp64="no float64")
    assert cos["close"] and cos["rule"] == "cosine-eager" and "no float64" in cos["detail"]
    far = judge.judge(a + 0.01, a, None, why_no_fp64="test")
    assert not far["close"] and far["rule"] == "allclose-eager"
    nan = a.clone()
    nan[3] = float("nan")
    assert judge.judge(nan, a, a.double())["rule"] == "non-finite"
    assert judge.judge(a[:10], a, a.double())["rule"] == "shape"
    ints = torch.arange(5)
    assert judge.judge(ints, ints.clone(), None)["close"]
    assert judge.judge(ints + 1, ints, None)["rule"] == "exact"
    assert judge.tolerance(torch.float32) == 1e-4 and judge.tolerance(torch.bfloat16) == 1e-2
    assert judge.tolerance(torch.bfloat16, 0.5) == 0.5


def _trace(out: Path, mode: str, *opts: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=pythonpath())
    return subprocess.run([sys.executable, "-m", "tuidebug.cli", "trace", "-o", str(out), *opts,
                           str(MODELS), mode], env=env, capture_output=True, text=True,
                          cwd=ROOT, timeout=900)


@pytest.fixture(scope="module")
def verdict_traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, int, str]]:
    """name -> (trace, exit code, what ``tuidebug trace`` printed), traced in parallel."""
    root = tmp_path_factory.mktemp("verdicts")
    runs = {"dropout": ("dropout",), "dropout_same_rng": ("dropout", "--set", "fallback_random=True"),
            "bf16": ("bf16",)}

    def make(name: str) -> tuple[str, tuple[Path, int, str]]:
        mode, *opts = runs[name]
        proc = _trace(root / name, mode, *opts)
        return name, (root / name, proc.returncode, proc.stdout + proc.stderr)

    with ThreadPoolExecutor(len(runs)) as ex:
        return dict(ex.map(make, runs))


def _check(trace: Path) -> dict:
    (check,) = Trace(trace).runtime["checks"].values()
    return check


def test_dropout_in_training_is_not_compared(verdict_traces) -> None:
    """Was a false FAILED: Inductor's random numbers are not eager's."""
    trace, rc, err = verdict_traces["dropout"]
    assert rc == 0, err[-3000:]
    assert json.loads((trace / "manifest.json").read_text())["status"] == "ok"
    check = _check(trace)
    assert "close" not in check and "dropout" in check["random_ops"]
    assert check["skipped"].startswith("not compared: the graph draws random numbers"), check
    assert "MISMATCH" not in err and "not compared" in err


def test_dropout_is_compared_when_both_sides_draw_the_same_numbers(verdict_traces) -> None:
    trace, rc, err = verdict_traces["dropout_same_rng"]
    assert rc == 0, err[-3000:]
    check = _check(trace)
    assert check["close"] is True and check["random_ops"] == ["dropout"], check
    assert check["reference"].startswith("eager only: the graph draws random numbers")


def test_bf16_rounding_is_not_a_mismatch(verdict_traces) -> None:
    """Was a false FAILED (max abs err ~0.5 on the first output): eager's bf16 rounding."""
    trace, rc, err = verdict_traces["bf16"]
    assert rc == 0, err[-3000:]
    check = _check(trace)
    assert check["close"] is True and check["reference"] == "float64", check
    first = check["outputs"][0]
    assert first["dtype"] == "bfloat16" and first["shape"] == [64, 64]
    assert first["rule"] == "rmse-fp64" and first["max_abs"] > 0.05, first
    assert first["err_compiled"] < first["err_eager"], first
    assert "match" in err and "rmse-fp64" in err


def test_planted_accuracy_bug_is_still_a_mismatch_with_its_reason(accuracy_trace: Path) -> None:
    check = _check(accuracy_trace)
    assert check["close"] is False and check["rule"] == "rmse-fp64", check
    (bad,) = [o for o in check["outputs"] if not o["ok"]]
    assert bad["err_compiled"] > 100 * bad["err_eager"]
    error = json.loads((accuracy_trace / "manifest.json").read_text())["error"]
    assert "RMSE vs float64" in error["message"] and "rule rmse-fp64" in error["message"]
    out = subprocess.run([sys.executable, "-m", "tuidebug.cli", "info", str(accuracy_trace)],
                         capture_output=True, text=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=pythonpath(), COLUMNS="80"))
    assert "MISMATCH" in out.stdout and "compiled↔fp64" in out.stdout, out.stdout
    assert "rmse-fp64  FAIL" in out.stdout, out.stdout


def test_info_names_restarted_frames_and_prints_recompile_reasons_whole(
        graph_break_trace: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "tuidebug.cli", "info", str(graph_break_trace)],
                         capture_output=True, text=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=pythonpath(), COLUMNS="80"))
    assert out.returncode == 0, out.stderr
    rows: dict[str, list[str]] = {}
    for ln in out.stdout.splitlines():
        if ln.split():
            rows.setdefault(ln.split()[0], ln.split())
    assert rows["0/0"][1:4] == ["forward", "graph_break.py:34", "restart"], rows["0/0"]
    assert rows["0/0_1"][1:3] == ["forward", "graph_break.py:34"], rows["0/0_1"]
    assert max(len(ln) for ln in out.stdout.splitlines()) <= 80
    reasons = " ".join(ln.strip() for ln in out.stdout.splitlines())
    # the reason whole, with the compile it follows and the value that failed the guard
    assert ("0/1 recompiled after 0/0: tensor 'x' size mismatch at index 0. expected 4, actual 16"
            " (failing value 16)") in reasons, out.stdout


def test_values_left_out_of_the_rmse_are_said_and_a_lost_infinity_fails() -> None:
    """``torch.linalg.cond(torch.arctan(torch.ones(2, 2)))`` (pytorch/pytorch#150114): compiled
    gives inf, as float64 does (the matrix is singular), eager 3.7e7. Judged a match, it read
    'RMSE vs float64: compiled 0 <= 3 x eager 0', as if eager were exact: the value left out of
    the RMSE is said. Compiled finite where eager and float64 are both infinite passed (the
    RMSE sees only values finite everywhere); ``same()`` fails it, and so does the judge."""
    inf = float("inf")
    cond = judge.judge(torch.tensor(inf), torch.tensor(3.7e7), torch.tensor(inf).double())
    assert cond["close"] and cond["rule"] == "rmse-fp64", cond
    assert cond["detail"].endswith("1 value(s) not finite in float64 or compiled left out, where "
                                   "compiled equals float64 at 1 and eager at 0"), cond
    lost = judge.judge(torch.tensor([5.0, 1.0]), torch.tensor([inf, 1.0]),
                       torch.tensor([inf, 1.0]).double())
    assert not lost["close"] and lost["rule"] == "non-finite", lost
    assert "eager and float64 are both infinite and compiled is not" in lost["detail"]
    # a NaN eager and float64 share that compiled drops fails (a NaN-propagation bug hidden
    # otherwise), with float64 or without, in float32 and bfloat16 (the cosine's path)
    nan = float("nan")
    for dtype in (torch.float32, torch.bfloat16):
        a, e = torch.tensor([5.0, 1.0], dtype=dtype), torch.tensor([nan, 1.0], dtype=dtype)
        for fp64, said in ((torch.tensor([nan, 1.0]).double(), "eager and float64 are both"),
                           (None, "eager is")):
            both = judge.judge(a, e, fp64, why_no_fp64="" if fp64 is not None else "skipped")
            assert not both["close"] and both["rule"] == "non-finite", (dtype, both)
            assert f"1 value(s) where {said} NaN and compiled is not" in both["detail"], both
        # a NaN the three share still matches
        kept = judge.judge(e, e, torch.tensor([nan, 1.0]).double())
        assert kept["close"], (dtype, kept)


def test_an_output_the_float64_run_gives_in_another_dtype_says_why_it_has_no_reference(
        ) -> None:
    """transformers' loss (ForCausalLMLoss: ``logits.float()`` before cross_entropy, a GPT-2
    training step): the float64 re-run gives the loss as float32, so it has no float64
    reference — info read "(rule allclose; reference float64)" with "—" for both errors and no
    reason, and a loss beyond allclose fell to allclose-eager without saying why."""
    from tuidebug.viewers.summary_text import accuracy_verdict

    logits = torch.randn(64, 100)
    labels = torch.randint(0, 100, (64,))

    def loss(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(x.float(), labels)

    eager = loss(logits)
    fp64 = loss(logits.double())  # the graph's cast: float32 again
    assert fp64.dtype == torch.float32
    ok = judge.judge(eager + 1e-7, eager, fp64)
    (o,) = ok["outputs"]
    assert ok["close"] and o["err_compiled"] is None
    assert o["no_fp64"] == ("the float64 run gave it as float32: a cast in the graph, or a "
                            "tensor made in the default dtype"), o
    bad = judge.judge(eager + 3e-3, eager, fp64)  # beyond allclose: 10 x tol of eager decides
    assert bad["rule"] == "allclose-eager" and "a cast in the graph" in bad["detail"], bad
    said = accuracy_verdict({**ok, "reference": "float64",
                             "outputs": [{**o, "name": "loss"}]})[1]
    assert said.endswith("; no float64 reference for loss: the float64 run gave it as "
                         "float32: a cast in the graph, or a tensor made in the default dtype"
                         ), said
    # no cast at all: an output made in the default dtype (torch.zeros) stays float32 in the
    # float64 run; the note does not say the graph casts it
    def made(x: torch.Tensor) -> torch.Tensor:
        return torch.zeros(x.shape) + x.sum().item()

    (z,) = judge.judge(made(logits) + 1e-7, made(logits), made(logits.double()))["outputs"]
    assert made(logits.double()).dtype == torch.float32
    assert z["no_fp64"].endswith("or a tensor made in the default dtype"), z
    assert "no float64 reference" not in accuracy_verdict(
        judge.judge(logits + 1e-7, logits, logits.double()))[1]
