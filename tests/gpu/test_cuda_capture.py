"""The Triton/CUDA path (run on the GPU machine: ``pytest -m gpu``; skipped without CUDA)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, trace_example
from tuidebug.trace.reader import Trace

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cuda_transformer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gpu") / "transformer"
    trace_example(out, "transformer_block.py", "--device", "cuda")
    return out


@pytest.fixture(scope="module")
def cuda_autotune(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gpu") / "autotune"
    trace_example(out, "mlp.py", "--device", "cuda", extra=["--set", "max_autotune=true"])
    return out


def test_triton_kernels_with_provenance_and_launch_metadata(cuda_transformer: Path) -> None:
    t = Trace(cuda_transformer)
    assert t.status == "ok", t.error
    assert {g.kind for g in t.graphs} == {"forward", "backward"}
    src = str(EXAMPLES / "transformer_block.py")
    for g in t.graphs:
        triton = [k for k in g.kernels if k["kind"] == "triton"]
        assert triton, g.id
        for k in triton:
            code = g.code(k["file"])
            assert code and "@triton.jit" in code
            prov = g.provenance["kernels"][k["name"]]
            assert prov["fx_nodes"], k["name"]
            assert any(s["file"] == src for s in prov["source"]), k["name"]
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


def test_cudagraphs_visible(tmp_path: Path) -> None:
    on, off = tmp_path / "on", tmp_path / "off"
    trace_example(on, "mlp.py", "--device", "cuda", extra=["--set", "triton.cudagraphs=true"])
    trace_example(off, "mlp.py", "--device", "cuda", extra=["--set", "triton.cudagraphs=false"])
    t_on, t_off = Trace(on), Trace(off)
    assert t_on.config["values"]["triton.cudagraphs"] is True
    assert t_off.config["values"]["triton.cudagraphs"] is False
    assert "triton.cudagraphs" in t_on.config["changed"]


def test_triton_compile_error_is_recorded(tmp_path: Path) -> None:
    out = tmp_path / "fail"
    trace_example(out, "failing_compile.py", "--device", "cuda")
    t = Trace(out)
    assert t.status == "failed"
    assert t.error["phase"] in ("kernel_compile", "codegen")
    assert any(k["kind"] == "triton" for k in t.graphs[0].kernels)
