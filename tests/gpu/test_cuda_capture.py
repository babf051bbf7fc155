"""The Triton/CUDA path (run on the GPU machine: ``pytest -m gpu``; skipped without CUDA)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, pythonpath, trace_example
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.summary import cudagraphs_state
from tuidebug.viewers.summary_text import launch_text

SCRIPTS = Path(__file__).resolve().parent / "scripts"

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cuda_transformer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gpu") / "transformer"
    trace_example(out, "transformer_block.py", "--device", "cuda")
    return out


@pytest.fixture(scope="module")
def cuda_autotune(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mlp.py under torch.compile(mode="max-autotune"); a copy goes to $TUIDEBUG_GPU_KEEP (the
    fixture tests/fixtures/cuda_mlp_autotune is made this way)."""
    out = tmp_path_factory.mktemp("gpu") / "autotune"
    trace_example(out, "mlp.py", "--device", "cuda", "--mode", "max-autotune")
    _keep(out, "cuda_mlp_autotune")
    return out


def _keep(trace: Path, name: str) -> None:
    """Copy a trace to $TUIDEBUG_GPU_KEEP/<name> (how the CUDA fixtures in tests/fixtures are made)."""
    keep = os.environ.get("TUIDEBUG_GPU_KEEP")
    if keep:
        shutil.copytree(trace, Path(keep) / name, dirs_exist_ok=True)


def _trace_script(out: Path, script: str, *args: str, extra: list[str] | None = None) -> Trace:
    env = dict(os.environ, PYTHONPATH=pythonpath())
    subprocess.run([sys.executable, "-m", "tuidebug.cli", "trace", "-o", str(out), *(extra or []),
                    str(SCRIPTS / script), *args], env=env, capture_output=True, text=True,
                   timeout=900)
    return Trace(out)


def test_triton_kernels_with_provenance_and_launch_metadata(cuda_transformer: Path) -> None:
    t = Trace(cuda_transformer)
    assert t.status == "ok", t.error
    assert {g.kind for g in t.graphs} == {"forward", "backward"}
    src = str(EXAMPLES / "transformer_block.py")
    for g in t.graphs:
        triton = [k for k in g.kernels if k.kind == "triton"]
        assert triton, g.id
        for k in triton:
            code = g.code(k.file)
            assert code and "@triton.jit" in code
            prov = g.provenance["kernels"][k.name]
            assert prov["fx_nodes"], k.name
            assert any(s["file"] == src for s in prov["source"]), k.name
        launches = g.launches
        assert launches, f"{g.id}: no Triton launch metadata"
        for name, rec in launches.items():
            launch = rec["launch"]
            assert launch and launch["num_warps"] and launch["config"], name
            assert launch["registers"] is not None and launch["shared_mem"] is not None
        print(g.id, {n: r["launch"] for n, r in list(launches.items())[:2]})


def test_max_autotune_choices(cuda_autotune: Path) -> None:
    t = Trace(cuda_autotune)
    assert t.status == "ok", t.error
    ops = [r for g in t.graphs for r in g.autotune if r.get("kind") != "triton_heuristics"]
    assert ops, "no autotuned GEMM"
    for op in ops:
        kinds = {c["kind"] for c in op["choices"]}
        assert "ExternKernelCaller" in kinds and "TritonTemplateCaller" in kinds
        assert op["winner"] in {c["name"] for c in op["choices"]}
        tmpl = [c for c in op["choices"] if c["kind"] == "TritonTemplateCaller"]
        assert all("BLOCK_M" in c["config"] and "num_stages" in c["config"] for c in tmpl)
        print(op["op"], "winner", op["winner"], "of", len(op["choices"]))


def test_launch_grid_is_recorded(cuda_autotune: Path) -> None:
    g = Trace(cuda_autotune).graphs[0]
    launches = {n: r["launch"] for n, r in g.launches.items()}
    assert launches
    for name, launch in launches.items():
        grid = launch.get("grid")
        assert isinstance(grid, list) and len(grid) == 3 and all(x >= 1 for x in grid), name
        assert len(launch["grid_expr"]) == 3
        print(name, launch_text(launch))
    pointwise = [ln for n, ln in launches.items() if "XBLOCK" in ln["config"]]
    # the grid's x is xnumel / XBLOCK, rounded up (just "xnumel" when XBLOCK is 1)
    assert pointwise and all("xnumel" in ln["grid_expr"][0] or ln["grid_expr"][0].isdigit()
                             for ln in pointwise)


def test_modes_show_cudagraphs_on_and_off(cuda_autotune: Path, tmp_path: Path) -> None:
    off = tmp_path / "no-cudagraphs"
    trace_example(off, "mlp.py", "--device", "cuda", "--mode", "max-autotune-no-cudagraphs")
    t_on, t_off = Trace(cuda_autotune), Trace(off)
    assert t_on.status == t_off.status == "ok", (t_on.error, t_off.error)
    assert t_on.config["values"]["max_autotune"] is t_off.config["values"]["max_autotune"] is True
    assert t_on.config["values"]["triton.cudagraphs"] is True
    assert t_off.config["values"]["triton.cudagraphs"] is False
    assert [cudagraphs_state(g) for g in t_on.graphs] == ["on"]
    assert [cudagraphs_state(g) for g in t_off.graphs] == ["off"]
    for t in (t_on, t_off):  # both modes autotune the GEMMs
        assert any(op.get("kind") != "triton_heuristics" for g in t.graphs for op in g.autotune)


def test_triton_kernel_times(cuda_transformer: Path, cuda_autotune: Path) -> None:
    """code/timings.json on CUDA: each Triton kernel's compile (Inductor's own timing, from its
    compile workers too) and, for the forward graph, its run time (synchronized around .run);
    under CUDA graphs nothing is re-run and the note says why."""
    t = Trace(cuda_transformer)
    for g in t.graphs:
        triton = [k.name for k in g.kernels if k.kind == "triton"]
        assert set(triton) <= set(g.timings), g.id
        for name in triton:
            e = g.timings[name]
            assert e["compile"] in ("built", "cached"), (name, e)
            assert e["compile"] == "cached" or e["compile_s"] > 0, (name, e)
    fwd = next(g for g in t.graphs if g.kind == "forward")
    timed = {n: e for n, e in fwd.timings.items() if n.startswith("triton_")}
    assert timed and all(e["run_s"] > 0 and e["calls"] >= 1 for e in timed.values()), timed
    for g in Trace(cuda_autotune).graphs:  # mode="max-autotune": CUDA graphs on
        run = json.loads((g.dir / "code" / "timings.json").read_text())["run"]
        assert run and run["runs"] == 0 and "CUDA graphs" in run["note"], run


def test_cudagraph_skip_reasons(tmp_path: Path) -> None:
    t = _trace_script(tmp_path / "skips", "cudagraph_skips.py")
    assert t.status == "ok", t.error
    states = {g.id: cudagraphs_state(g) for g in t.graphs}
    print(states)
    skipped = [s for s in states.values() if s and s.startswith("skipped:")]
    assert skipped and "mutated inputs" in skipped[0] and "cudagraph_skips.py" in skipped[0]


def test_autotune_choice_errors_are_recorded(tmp_path: Path) -> None:
    """Three choices for one fp32 1024² matmul: the extern mm, a Triton config that fits, and one
    that needs more shared memory than any GPU has (128×256 + 256×128 fp32 tiles, 3 stages: ~786
    KB). ``--keep-oversized`` stops Inductor from pruning that config before benchmarking (it
    did on a fresh H100: two choices, none failing), so the failure is deterministic."""
    regex = ("^$|BLOCK_K=32, BLOCK_M=64, BLOCK_N=64, .*num_stages=3, num_warps=4"
             "|BLOCK_K=256, BLOCK_M=128, BLOCK_N=128, .*num_stages=3, num_warps=8")
    t = _trace_script(tmp_path / "mm", "mm_autotune.py", "float32", "1024", "--keep-oversized",
                      extra=[
        "--set", "max_autotune_gemm_search_space=EXHAUSTIVE",
        "--set", f"test_configs.autotune_choice_desc_regex={regex}"])
    assert t.status == "ok", t.error
    _keep(t.root, "cuda_mm_choice_error")
    ops = [op for g in t.graphs for op in g.autotune if op.get("kind") != "triton_heuristics"]
    assert ops
    for op in ops:
        for c in op["choices"]:
            print(op["op"], c["name"], c.get("description", "")[-60:], c.get("time_ms"),
                  (c.get("error") or "")[:200])
    failed = [c for op in ops for c in op["choices"] if c.get("error")]
    assert len(ops[0]["choices"]) == 3, ops[0]["choices"]
    assert failed and all(c["time_ms"] is None for c in failed)
    assert any("shared memory" in c["error"].lower() or "resource" in c["error"].lower()
               for c in failed), [c["error"] for c in failed]
    assert all(op["winner"] not in {c["name"] for c in failed} for op in ops)


def test_triton_compile_error_is_recorded(tmp_path: Path) -> None:
    out = tmp_path / "fail"
    trace_example(out, "failing_compile.py", "--device", "cuda")
    t = Trace(out)
    assert t.status == "failed"
    assert t.error is not None and t.error.phase in ("kernel_compile", "codegen")
    assert any(k.kind == "triton" for k in t.graphs[0].kernels)


def test_no_tuidebug_warning_in_the_users_output_on_this_torch(tmp_path: Path) -> None:
    """On the GPU machine's torch (2.11): a hook point this torch lacks (torch 2.11 printed
    'CatchErrorsWrapper._handle_skip … not available' on every trace) is kept once in the
    manifest's ``not_available``, never a warning in the script's output or in ``info``."""
    import re

    out = tmp_path / "mlp"
    proc = trace_example(out, "mlp.py", "--device", "cuda")
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = proc.stdout + proc.stderr
    assert not re.search(r"tuidebug/[\w/]+\.py:\d+: \w*Warning:", said), said[-3000:]
    assert "not available in torch" not in said, said[-3000:]
    m = Trace(out).manifest
    assert not [w for w in m.warnings if "not available in torch" in w], m.warnings
    env = dict(os.environ, PYTHONPATH=pythonpath(), COLUMNS="200")
    info = subprocess.run([sys.executable, "-m", "tuidebug.cli", "info", str(out)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert info.returncode == 0 and "not available" not in info.stdout, info.stdout[-3000:]
    as_json = json.loads(subprocess.run(
        [sys.executable, "-m", "tuidebug.cli", "info", "--json", str(out)], env=env,
        capture_output=True, text=True, timeout=300).stdout)
    assert as_json["not_available"] == m.not_available  # each once, where this torch lacks one
    assert len(set(m.not_available)) == len(m.not_available)
    print("not available on this torch:", m.not_available)
