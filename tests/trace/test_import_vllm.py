"""vLLM's TORCH_TRACE records imported: its compilation config, compile ranges and CUDA-graph
capture sizes with the piecewise submodules compiled for each, its graph dumps, and its
post-grad passes as stages with what each changed — in the trace, ``info``, ``info --json``
and the TUI.

The logs are real: tlparse's test inputs ``vllm_post_grad_diff.log`` (whole) and records of
``vllm_sample.log`` (a Llama-3.1-8B run), BSD-3-Clause; tests/fixtures/vllm/README.md says what
was kept.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, pythonpath
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.importers import import_path
from tuidebug.trace.queries.stages import stage_label
from tuidebug.trace.queries.summary import trace_summary

LOGS = ROOT / "tests" / "fixtures" / "vllm"


@pytest.fixture
def passes(tmp_path: Path) -> Trace:
    return Trace(import_path(LOGS / "vllm_post_grad_diff.log", tmp_path / "passes"))


@pytest.fixture
def sample(tmp_path: Path) -> Trace:
    return Trace(import_path(LOGS / "vllm_sample_records.log", tmp_path / "sample"))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuidebug.cli", *args], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, PYTHONPATH=pythonpath(),
                                                           COLUMNS="120"))


def test_post_grad_passes_are_stages_with_their_diffs(passes: Trace) -> None:
    assert passes.problems == [] and passes.manifest["warnings"] == []
    g = passes.graph("0_0-inference")
    assert [(s.name, s.kind, s.subsystem) for s in g.stages] == [
        ("aot_inference", "stage", None), ("FusionPass", "pass", "vllm_post_grad"),
        ("ReshapePass", "pass", "vllm_post_grad")]
    fusion, reshape = g.stages[1], g.stages[2]
    # FusionPass: sin and cos replaced by one fused op; ReshapePass adds a reshape after it
    assert g.stage_changes(fusion)["added"] == ["fused_sincos"]
    assert sorted(g.stage_changes(fusion)["removed"]) == ["a", "b"]
    assert g.stage_changes(reshape)["added"] == ["y"]
    assert [(n.name, n.op) for n in g.stage_graph(reshape)] == [
        ("x", "placeholder"), ("fused_sincos", "call_function"), ("y", "call_method"),
        ("output", "output")]
    v = trace_summary(passes)["vllm"]
    assert [(p["name"], p["added"], p["removed"]) for p in v["post_grad_passes"]] == [
        ("FusionPass", 1, 2), ("ReshapePass", 1, 0)]
    # the patterns dump is kept as text, named in vllm.json
    assert v["dumps"] == [{"name": "vllm_patterns.FusionPass",
                           "file": "vllm/vllm_patterns_FusionPass.txt"}]
    text = (passes.root / "vllm" / "vllm_patterns_FusionPass.txt").read_text()
    assert "def pattern_0():" in text and "CallFunction(torch.sin, x)" in text
    assert stage_label(fusion) == "001-FusionPass"


def test_config_compile_ranges_and_submodules(sample: Trace) -> None:
    assert sample.problems == [] and sample.manifest["warnings"] == []
    v = trace_summary(sample)["vllm"]
    assert v["config"]["model"] == "meta-llama/Llama-3.1-8B"
    assert v["config"]["cudagraph_mode"] == "FULL_AND_PIECEWISE"
    assert v["config"]["compile_sizes"] == "8, 4"
    assert v["config"]["compile_ranges_split_points"] == "16384"
    assert v["compile_ranges"] == [{"range": "size 8", "cudagraph_capture_size": True,
                                    "submodules": ["submod_0", "submod_2"], "graphs": []}]
    assert v["piecewise_compiles"] == {"logged": 2, "announced": 33}


def test_info_and_json_show_vllm(tmp_path: Path) -> None:
    p = _cli("import", str(LOGS / "vllm_sample_records.log"), "-o", str(tmp_path / "s"))
    assert p.returncode == 0, p.stderr
    for line in ("vLLM compilation", "model: meta-llama/Llama-3.1-8B",
                 "cudagraph mode: FULL_AND_PIECEWISE", "compile sizes: 8, 4",
                 "size 8 (CUDA graph capture size)  2 submodule(s): submod_0, submod_2",
                 "piecewise compiles logged: 2 of 33"):
        assert line in p.stdout, (line, p.stdout)
    j = _cli("info", "--json", str(tmp_path / "s"))
    assert json.loads(j.stdout)["vllm"]["compile_ranges"][0]["submodules"] == [
        "submod_0", "submod_2"]
    log = tmp_path / "logs" / "vllm_post_grad_diff.log"  # (imported beside itself: a copy)
    log.parent.mkdir()
    shutil.copy(LOGS / log.name, log)
    p = _cli("info", str(log))  # the log itself, imported once
    assert "post-grad pass FusionPass (0_0-inference, stage 1): +1 -2 ~1" in p.stdout, p.stdout
    assert not list(LOGS.parent.glob("*.tuidebug")) and not list(LOGS.glob("*.tuidebug"))


async def test_the_tui_shows_vllm_and_steps_its_passes(open_ui, passes: Trace,
                                                       sample: Trace) -> None:
    async with open_ui(sample.root) as ui:
        overview = "\n".join(ui.lines("#overview"))
        assert "vLLM compilation" in overview
        assert "size 8 (CUDA graph capture size)  2 submodule(s): submod_0, submod_2" in overview
    async with open_ui(passes.root) as ui:
        assert "post-grad pass FusionPass" in "\n".join(ui.lines("#overview"))
        await ui.press("2")  # the pass stepper
        ui.app.screen._select_stage(1)
        await ui.settle()
        text = ui.text()
        assert "FusionPass" in text and "fused_sincos" in text, text


def test_hostile_vllm_records_are_inert(tmp_path: Path) -> None:
    """A log's config values, submodule and dump names reach the screen inert, and a dump's
    name never names a file outside the trace's vllm/ folder."""
    head = ('V0127 17:17:45.180000 1 x.py:1] {"artifact": {"name": "%s", "encoding": "json"}, '
            '"rank": 0}\n')
    evil = "\x1b]52;c;ZWNobyBoaQ==\x07[bold]x[/]"
    log = tmp_path / "evil.log"
    log.write_text(
        head % "vllm_compilation_config" + "\t" + json.dumps({"model": evil}) + "\n"
        + head % "vllm_piecewise_compile_start" + "\t" + json.dumps(
            {"piecewise_index": 0, "submod_name": evil, "compile_range_start": 1,
             "compile_range_end": 16384, "is_single_size": False}) + "\n"
        + 'V0127 17:17:46.000000 1 x.py:2] {"graph_dump": {"name": "vllm_submod_../../../x"}, '
        '"rank": 0}\n\tdef forward(self): pass\n')
    p = _cli("import", str(log), "-o", str(tmp_path / "t"))
    assert p.returncode == 0, p.stderr
    assert "\x1b" not in p.stdout and "\\x1b]52" in p.stdout
    assert "range [1, 16384]  1 submodule(s): \\x1b]52" in p.stdout
    v = Trace(tmp_path / "t").vllm
    assert [d["file"] for d in v["dumps"]] == ["vllm/vllm_submod_x.txt"]
    assert v["compiles"][0]["graphs"] == ["vllm/vllm_submod_x.txt"]
    assert (tmp_path / "t" / "vllm" / "vllm_submod_x.txt").read_text() == "def forward(self): pass"
    assert not (tmp_path / "x").exists()
