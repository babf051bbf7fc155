"""Importing TORCH_COMPILE_DEBUG folders (tuidebug.trace.importers) — on real folders.

``TORCH_COMPILE_DEBUG=1 python examples/X.py`` writes ``./torch_compile_debug/`` (the run's
fx graphs, IR before and after fusion, output code, provenance, and a structured log under
``tlparse/``). The folders of two examples, each run in its own working directory, are
committed (``debug_dirs`` in tests/conftest.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tuidebug.trace import importers
from tuidebug.trace.queries import provenance
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.summary import trace_summary

ROOT = Path(__file__).resolve().parents[2]


def _run_dir(cwd: Path) -> Path:
    runs = sorted((cwd / "torch_compile_debug").glob("run_*"))
    assert len(runs) == 1, runs
    return runs[0]


@pytest.fixture(scope="session")
def mlp_import(debug_dirs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Trace:
    out = tmp_path_factory.mktemp("debug_imports") / "mlp"
    return Trace(importers.import_path(debug_dirs["mlp"] / "torch_compile_debug", out))


def test_detect_every_entry_point(debug_dirs: dict[str, Path]) -> None:
    cwd = debug_dirs["mlp"]
    for p in (cwd, cwd / "torch_compile_debug", _run_dir(cwd)):
        assert importers.detect(p) == "torch_compile_debug", p
    # the folder's own structured log is a TORCH_TRACE log
    (log,) = (cwd / "torch_compile_debug" / "tlparse").iterdir()
    assert importers.detect(log) == "torch_trace"


def test_graph_ir_and_fusion(mlp_import: Trace) -> None:
    tr = mlp_import
    assert tr.status == "ok" and tr.problems == [] and tr.manifest.warnings == []
    assert tr.manifest.imported_from["kind"] == "torch_compile_debug"
    (g,) = tr.graphs
    assert g.kind == "inference" and g.compile_id == "0/0"
    assert [s.name for s in g.snapshots()][:1] == ["dynamo"]
    assert {"aot_inference", "post_grad"} <= {s.name for s in g.snapshots()}
    post = g.ir_text("post")
    assert post and "FusedSchedulerNode" in post and g.ir_text("pre")
    fused = [n for n in g.ir_post["nodes"] if len(n["members"]) > 1]
    assert fused and all(n["writes"] for n in fused)
    assert any(n["is_extern"] for n in g.ir_post["nodes"])
    assert len(g.ir_pre["nodes"]) > len(g.ir_post["nodes"])
    assert g.meta.fusion.fused == sum(len(n["members"]) - 1 for n in fused)
    assert g.meta.extra["debug_folder"].endswith("model__0_inference_0.0")
    missing = tr.manifest.imported_from["missing"]
    assert "per-pass snapshots" in missing
    assert not any(m.startswith("Inductor IR") for m in missing)


def test_kernels_with_provenance(mlp_import: Trace) -> None:
    (g,) = mlp_import.graphs
    cpp = [k for k in g.kernels if k.kind == "cpp"]
    assert cpp and all(g.code(k.file) for k in cpp)
    prov = g.provenance
    for k in cpp:
        p = prov["kernels"][k.name]
        assert p["fx_nodes"], k.name
        assert any(s["file"].endswith("mlp.py") and s["line"] > 0 for s in p["source"])
    node = prov["kernels"][cpp[0].name]["fx_nodes"][0]
    assert cpp[0].name in provenance.kernels_for_node(g, node)
    assert prov["pre_to_post"]  # Dynamo node -> post-grad nodes
    # a Dynamo (pre-grad) name reaches the kernels of the post-grad nodes it became
    pre, posts = next((pre, posts) for pre, posts in prov["pre_to_post"].items()
                      if pre not in prov["fx_to_kernels"]
                      and any(p in prov["fx_to_kernels"] for p in posts))
    assert set(provenance.kernels_for_node(g, pre)) == {
        k for p in posts for k in prov["fx_to_kernels"].get(p, [])}
    summary = trace_summary(mlp_import)
    assert summary["graphs"][0]["kernels_with_source"] == len(cpp)


def test_failure(debug_dirs: dict[str, Path], tmp_path: Path) -> None:
    tr = Trace(importers.import_path(debug_dirs["failing"], tmp_path / "t"))
    assert tr.status == "failed"
    assert tr.error is not None and tr.error.type == "CppCompileError"
    (g,) = tr.graphs
    assert g.status == "failed" and g.error is not None and g.error.phase == "kernel_compile"
    assert g.ir_text("post") and g.kernels


def test_folder_without_its_log(debug_dirs: dict[str, Path], tmp_path: Path) -> None:
    """Only the run folder (no tlparse/ log): the graphs come from the fx_graph_*.py files."""
    src = tmp_path / "torch_compile_debug"
    run = _run_dir(debug_dirs["mlp"])
    shutil.copytree(run, src / run.name)
    readable = next((src / run.name).rglob("fx_graph_transformed.py"))
    lines = readable.read_text().split("\n")
    bad = next(i for i, ln in enumerate(lines) if "aten.addmm" in ln)
    lines[bad] = lines[bad][: len(lines[bad]) // 2]
    readable.write_text("\n".join(lines))

    tr = Trace(importers.import_path(src, tmp_path / "t"))
    assert tr.status == "ok"
    (g,) = tr.graphs
    assert g.id == "aot0-inference" and g.kind == "inference"
    assert [s.name for s in g.snapshots()] == ["aot_inference", "post_grad"]
    first = g.stage_graph(g.snapshots()[0])
    addmm = next(n for n in first if n.target == "aten.addmm.default")
    assert addmm.tensor["shape"] == [32, 128] and addmm.source["file"].endswith("mlp.py")
    assert g.kernels and g.ir_text("pre") and g.provenance["kernels"]
    warnings = "\n".join(tr.manifest.warnings)
    assert f"fx_graph_transformed.py: line {bad + 1}:" in warnings, warnings
    post = g.final_graph()
    assert post is not None and len(post) == len(first) - 1  # only the cut statement is lost
    assert any("no structured log" in m for m in tr.manifest.imported_from["missing"])


def test_ensure_trace_and_source_untouched(debug_dirs: dict[str, Path], tmp_path: Path) -> None:
    src = tmp_path / "work"
    shutil.copytree(debug_dirs["mlp"] / "torch_compile_debug", src / "torch_compile_debug")
    root = src / "torch_compile_debug"
    listing = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    t = importers.ensure_trace(src)
    assert t == tmp_path / "work.tuidebug"
    assert importers.ensure_trace(src) == t
    # a run folder, or the structured log inside the folder: imported beside, never inside it
    run = next(root.glob("run_*"))
    assert importers.ensure_trace(run) == src / f"torch_compile_debug.{run.name}.tuidebug"
    for log in (root / "tlparse").glob("*.log"):
        assert importers.ensure_trace(log) == src / f"torch_compile_debug.{log.name}.tuidebug"
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == listing
    assert Trace(t).graphs[0].kernels
