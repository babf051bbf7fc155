"""Viewers on a real CUDA trace (made on the GPU machine: H100, torch 2.11, Triton 3.6, mlp.py with
mode="max-autotune"; kept in tests/fixtures so CI exercises Triton output without a GPU)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from tuidebug.trace.queries import provenance
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.summary import trace_summary

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CUDA_AUTOTUNE = FIXTURES / "cuda_mlp_autotune"
CUDA_FAILED = FIXTURES / "cuda_fail_runtime"
CUDA_CHOICE_ERROR = FIXTURES / "cuda_mm_choice_error"


def test_cuda_trace_reads_triton_kernels_launches_and_autotune() -> None:
    t = Trace(CUDA_AUTOTUNE)
    assert t.manifest.versions["triton"] and "cu" in t.manifest.versions["torch"]
    g = t.graphs[0]
    triton = [k for k in g.kernels if k.kind == "triton"]
    assert triton and all("@triton.jit" in g.code(k.file) for k in triton)
    assert set(g.launches) == {k.name for k in triton}
    assert all(r["launch"]["num_warps"] and r["launch"]["registers"] is not None
               for r in g.launches.values())
    gemm = [op for op in g.autotune if op.get("kind") != "triton_heuristics"]
    assert gemm and all(any(c["kind"] == "TritonTemplateCaller" for c in op["choices"]) for op in gemm)
    s = trace_summary(t)["graphs"][0]
    assert s["kernels_with_source"] == s["kernels"] > 0


async def test_code_screen_shows_a_triton_kernel(open_ui) -> None:
    g = Trace(CUDA_AUTOTUNE).graphs[0]
    kernel = next(k for k in provenance.kernel_infos(g) if k.kind == "triton")
    source = g.code(kernel.file)
    async with open_ui(CUDA_AUTOTUNE) as ui:
        await ui.press("4")
        ui.app.screen.goto_kernel(kernel.name)
        await ui.settle()
        assert ui.lines("#code-view") == source.expandtabs(4).rstrip("\n").split("\n")
        assert "@triton.jit" in "\n".join(ui.lines("#code-view"))
        assert kernel.name in ui.text()


async def test_code_screen_shows_launch_grid_and_overview_cudagraphs(open_ui) -> None:
    g = Trace(CUDA_AUTOTUNE).graphs[0]
    kernel = next(k for k in provenance.kernel_infos(g) if k.launch and "XBLOCK" in k.launch["config"])
    grid = "×".join(str(x) for x in kernel.launch["grid"])
    async with open_ui(CUDA_AUTOTUNE) as ui:
        assert "CUDA graphs" in ui.text() or any("CUDA graphs" in ln for ln in ui.lines("#overview"))
        lines = ui.lines("#overview")
        row = next(ln for ln in lines if ln.strip().startswith(g.id) and ln.rstrip().endswith("on"))
        assert row
        await ui.press("4")
        ui.app.screen.goto_kernel(kernel.name)
        await ui.settle()
        text = ui.text()
        assert f"launch  grid {grid}" in text
        assert f"XBLOCK={kernel.launch['config']['XBLOCK']}" in text
        assert f"{kernel.launch['registers']} regs" in text


async def test_autotune_screen_shows_triton_templates(open_ui) -> None:
    g = Trace(CUDA_AUTOTUNE).graphs[0]
    entry = next(op for op in g.autotune if op.get("kind") != "triton_heuristics")
    async with open_ui(CUDA_AUTOTUNE) as ui:
        await ui.press("5")
        text = ui.text()
        assert f"winner {entry['winner']}" in text
        assert "triton_mm" in text and "BLOCK_M" in text


async def test_failed_cuda_runtime_trace_opens_on_errors(open_ui) -> None:
    t = Trace(CUDA_FAILED)
    assert t.status == "failed" and t.error is not None and t.error.phase == "runtime"
    async with open_ui(CUDA_FAILED) as ui:
        await ui.press("6")
        text = ui.text()
        assert "runtime" in text and "device-side assert" in text


def test_svg_kernel_view_of_the_cuda_trace(tmp_path: Path) -> None:
    from tuidebug.viewers.svg import export_svg

    g = Trace(CUDA_AUTOTUNE).graphs[0]
    out = export_svg(Trace(CUDA_AUTOTUNE), kernels=True, out=tmp_path / "k.svg")
    svg = ET.parse(out).getroot()
    titles = " ".join(el.text or "" for el in svg.iter("{http://www.w3.org/2000/svg}text"))
    triton = [k.name for k in g.kernels if k.kind == "triton"]
    assert triton and g.launches, (triton, g.launches)
    for name in triton:
        assert name in titles, name
    # each Triton kernel's cluster carries its launch: grid, warps, registers
    for name, rec in g.launches.items():
        launch = rec["launch"]
        line = (f"grid {'×'.join(str(x) for x in launch['grid'])} · {launch['num_warps']} warps"
                f" · {launch['registers']} regs")
        assert line in titles, (name, line)


async def test_autotune_screen_shows_why_a_choice_failed(open_ui) -> None:
    """Made on the H100: a Triton mm config that needs more shared memory than the GPU has."""
    g = Trace(CUDA_CHOICE_ERROR).graphs[0]
    op = next(op for op in g.autotune if op.get("kind") != "triton_heuristics")
    failed = next(c for c in op["choices"] if c.get("error"))
    assert failed["time_ms"] is None and "out of resource" in failed["error"]
    async with open_ui(CUDA_CHOICE_ERROR) as ui:
        await ui.press("5")
        text = ui.text()
        assert "1 failed" in text and "Placeholder" not in text
        assert failed["name"] in text and "error" in text
        shown = " ".join(" ".join(ui.lines("#choices-view")).split())  # wrapped to the pane
        assert "out of resource: triton_mm Required: 524288 Hardware limit:232448" in shown
        assert f"winner {op['winner']}" in text and op["winner"] != failed["name"]
