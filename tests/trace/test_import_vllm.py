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
    assert passes.problems == [] and passes.manifest.warnings == []
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
    assert sample.problems == [] and sample.manifest.warnings == []
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


SPLIT_SCRIPT = r'''
import json, torch
from torch._logging import trace_structured
from torch.fx import symbolic_trace
from torch.fx.passes.split_module import split_module

class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 8)
    def forward(self, x):
        h = torch.relu(self.a(x).sin())  # relu: the splitting op
        return self.b(h).cos()

part = [0]
def at_relu(node):  # relu alone in a submodule, as vLLM splits at attention
    if node.op == "call_function" and node.target is torch.relu:
        part[0] += 2
        return part[0] - 1
    return part[0]

split = split_module(symbolic_trace(M()), M(), at_relu)
# what vLLM's backend logs (vllm/compilation/backends.py, piecewise_backend.py)
trace_structured("graph_dump", metadata_fn=lambda: {"name": "vllm_piecewise_split_graph"},
                 payload_fn=lambda: split.print_readable(print_output=False))
for i, sub in enumerate(["submod_0", "submod_2"]):
    trace_structured("artifact", metadata_fn=lambda: {"name": "vllm_piecewise_compile_start",
                                                      "encoding": "json"},
                     payload_fn=lambda: json.dumps({
                         "piecewise_index": i, "submod_name": sub, "total_piecewise_compiles": 2,
                         "compile_range_start": 1, "compile_range_end": 16384,
                         "is_single_size": False, "is_cudagraph_capture_size": False}))
'''


@pytest.mark.slow
def test_the_split_graph_gives_each_submodule_its_graph(tmp_path: Path) -> None:
    """torch's own split_module and trace_structured, called as vLLM calls them: the split
    graph's submodules each get a file, and those compiled are named with their range."""
    script = tmp_path / "split.py"
    script.write_text(SPLIT_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_LOGS", "TORCH_TRACE")}
    subprocess.run([sys.executable, str(script)], check=True, timeout=300,
                   env={**env, "TORCH_TRACE": str(tmp_path / "logs")})
    p = _cli("import", str(tmp_path / "logs"), "-o", str(tmp_path / "t"))
    assert p.returncode == 0, p.stderr
    assert "split into 3 submodules, 2 compiled in this log: submod_0, submod_2" in p.stdout
    t = Trace(tmp_path / "t")
    v = trace_summary(t)["vllm"]
    assert [(s["name"], s["compiled_for"]) for s in v["submodules"]] == [
        ("submod_0", ["range [1, 16384]"]), ("submod_1", []), ("submod_2", ["range [1, 16384]"])]
    relu = (t.root / v["submodules"][1]["file"]).read_text()
    assert relu.startswith("class submod_1(torch.nn.Module):\n    def forward(self, sin):")
    assert "torch.relu(sin)" in relu and "cos" not in relu
    assert v["split_graph"] == "vllm/vllm_piecewise_split_graph.txt"
    assert "submod_2 = self.submod_2(" in (t.root / v["split_graph"]).read_text()
