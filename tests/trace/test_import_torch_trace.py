"""Importing TORCH_TRACE logs (tuidebug.trace.importers) — on real logs of the bundled examples.

Each example runs once per session in a child process with TORCH_TRACE set (and a private
Inductor cache, so that the first compile of every graph is a real one); every test reads the
shared logs and imports into its own directory. The imports are opened with the same reader
the TUI uses.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tuidebug.trace import importers
from tuidebug.trace.importers import cache as import_cache
from tuidebug.trace.format import fxtext
from tuidebug.trace.diff import diff_traces
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.summary import trace_summary
from tests.conftest import clean_env as _env

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

def _single_log(d: Path) -> Path:
    logs = importers.trace_logs(d)
    assert len(logs) == 1, logs
    return logs[0]


def _tree_digest(p: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p.rglob("*")):
        h.update(str(f.relative_to(p)).encode())
        if f.is_file():
            st = f.stat()
            h.update(f.read_bytes())
            h.update(str(st.st_mtime_ns).encode())
    return h.hexdigest()


@pytest.fixture(scope="session")
def transformer_import(torch_trace_logs: dict[str, Path],
                       tmp_path_factory: pytest.TempPathFactory) -> Trace:
    out = tmp_path_factory.mktemp("imports") / "transformer"
    importers.import_path(torch_trace_logs["transformer"], out)
    return Trace(out)


# -- the FX text parser on its own ----------------------------------------------------------------

def test_annotations_become_tensor_meta() -> None:
    assert fxtext.parse_annotation("f32[3, 16][16, 1]cpu") == {
        "dtype": "float32", "shape": [3, 16], "stride": [16, 1], "device": "cpu"}
    assert fxtext.parse_annotation("bf16[s77, 64][64, 1]cuda:0") == {
        "dtype": "bfloat16", "shape": ["s77", 64], "stride": [64, 1], "device": "cuda:0"}
    assert fxtext.parse_annotation("f32[128, 64]") == {
        "dtype": "float32", "shape": [128, 64], "stride": None}
    assert fxtext.parse_annotation("i64[][]cpu")["shape"] == []
    assert fxtext.parse_annotation("Sym(s77)") == {"dtype": "symint", "shape": [], "value": "s77"}
    assert fxtext.parse_annotation("not an annotation") is None


def test_parse_printed_graph_nodes_args_and_sources() -> None:
    text = '''class GraphModule(torch.nn.Module):
    def forward(self, L_x_: "f32[4, 16][16, 1]cpu", L_w_: "f32[8, 16][16, 1]cpu"):
        l_x_ = L_x_
        l_w_ = L_w_

        # File: /src/model.py:12 in forward, code: y = F.linear(x, w)
        linear: "f32[4, 8][8, 1]cpu" = torch._C._nn.linear(l_x_, l_w_);  l_x_ = l_w_ = None
        view: "f32[32][1]cpu" = linear.view(-1)

        # No stacktrace found for following nodes
        var_mean = torch.ops.aten.var_mean.correction(view, [0], correction = 0, keepdim = True)
        getitem: "f32[1][1]cpu" = var_mean[0]
        getitem_1: "f32[1][1]cpu" = var_mean[1];  var_mean = None
        add: "f32[32][1]cpu" = view + getitem;  view = getitem = None
        return (add, getitem_1)
'''
    g = fxtext.parse_graph(text)
    assert g.problems == []
    by = {n["name"]: n for n in g.nodes}
    assert [n["op"] for n in g.nodes] == ["placeholder", "placeholder", "call_function",
                                         "call_method", "call_function", "call_function",
                                         "call_function", "call_function", "output"]
    assert by["l_x_"]["target"] == "L_x_" and by["l_x_"]["users"] == ["linear"]
    lin = by["linear"]
    assert lin["target"] == "torch._C._nn.linear"
    assert lin["args"] == [{"node": "l_x_"}, {"node": "l_w_"}]
    assert lin["source"] == {"file": "/src/model.py", "line": 12, "fn": "forward",
                             "code": "y = F.linear(x, w)"}
    assert by["view"]["args"] == [{"node": "linear"}, -1] and by["view"]["target"] == "view"
    vm = by["var_mean"]
    assert vm["target"] == "aten.var_mean.correction" and vm["source"] is None
    assert vm["kwargs"] == {"correction": 0, "keepdim": True}
    assert vm["tensors"] == [by["getitem"]["tensor"], by["getitem_1"]["tensor"]]
    assert by["getitem_1"]["target"] == "operator.getitem"
    assert by["add"]["target"] == "operator.add"
    assert by["output"]["args"] == [[{"node": "add"}, {"node": "getitem_1"}]]
    for n in g.nodes:  # users and inputs agree
        for i in n["inputs"]:
            assert n["name"] in by[i]["users"]


def test_truncated_graph_text_keeps_the_rest() -> None:
    text = '''class GraphModule(torch.nn.Module):
    def forward(self, x: "f32[4][1]cpu"):
        a: "f32[4][1]cpu" = torch.ops.aten.relu.default(x)
        b: "f32[4][1]cpu" = torch.ops.aten.mul.Tensor(a, 2
        c: "f32[4][1]cpu" = torch.ops.aten.add.Tensor(a, 1)
        return (c,)
'''
    g = fxtext.parse_graph(text)
    names = [n["name"] for n in g.nodes]
    assert names == ["x", "a", "c", "output"]
    assert g.bad_lines == [4]


# -- a training step: forward and backward --------------------------------------------------------

def test_transformer_forward_and_backward_graphs(transformer_import: Trace) -> None:
    tr = transformer_import
    assert tr.status == "ok" and tr.problems == []
    kinds = {g.kind: g for g in tr.graphs}
    assert set(kinds) == {"forward", "backward"}
    fwd, bwd = kinds["forward"], kinds["backward"]
    assert fwd.compile_id == bwd.compile_id == "0/0"
    assert fwd.id == "0_0-forward" and bwd.id == "0_0-backward"

    names = [s.name for s in fwd.snapshots()]
    for stage in ("dynamo", "aot_joint", "aot_forward", "post_grad"):
        assert stage in names, names
    assert [s.name for s in bwd.snapshots()][-2:] == ["aot_backward", "post_grad"]
    # the passes Inductor timed are there, without snapshots, and say so
    passes = [s for s in fwd.stages if s.kind == "pass"]
    assert any(p.subsystem == "post_grad_passes" for p in passes)
    assert all(p.file is None and p.duration_s is not None for p in passes)

    dyn = fwd.stage_graph(fwd.find_stage("dynamo"))
    assert dyn is not None
    layer_norm = next(n for n in dyn if n.target == "torch.nn.functional.layer_norm")
    assert layer_norm.source and layer_norm.source["file"].endswith("transformer_block.py")
    assert layer_norm.source["line"] > 0 and "ln1" in layer_norm.source["code"]
    assert layer_norm.tensor == {"dtype": "float32", "shape": [4, 32, 64],
                                 "stride": [2048, 64, 1], "device": "cpu"}
    qw = next(n for n in dyn if n.op == "placeholder" and "q_proj_parameters_weight" in n.name)
    assert qw.module == "blocks.0.attn.q_proj"

    post = fwd.final_graph()
    assert post is not None and len(post) > 50
    addmm = [n for n in post if n.target == "aten.addmm.default"]
    assert addmm and addmm[0].tensor["shape"] == [128, 64]
    assert all(a in post for a in addmm[0].inputs)
    sdpa = [n for n in post if "scaled_dot_product" in n.target]
    assert sdpa, "the pattern matcher's fused attention should be in the post-grad graph"
    bpost = bwd.final_graph()
    assert bpost is not None
    assert any(n.op == "placeholder" and n.name.startswith("tangents_") for n in bpost)
    # every snapshot keeps the graph consistent: inputs <-> users
    for g in (dyn, post, bpost):
        for n in g:
            for i in n.inputs:
                assert n.name in g.get(i).users


def test_transformer_kernels_and_code(transformer_import: Trace) -> None:
    assert {g.kind for g in transformer_import.graphs} == {"forward", "backward"}
    for g in transformer_import.graphs:
        kernels = [k for k in g.kernels if k.kind != "extern"]
        assert kernels, g.id
        for k in kernels:
            code = g.code(k.file)
            assert code and "kernel(" in code, k
        assert any(k.kind == "extern" for k in g.kernels)
        wrapper = g.wrapper_code()
        assert wrapper and "def call(" in wrapper
        assert (g.dir / "repro" / "fx_graph_runnable.py").is_file()
        assert g.meta.extra["aot_id"] == f"0_{g.kind}"
        # externs still map to the Dynamo nodes (and lines) they came from
        prov = g.provenance["kernels"]
        if g.kind == "forward":
            ext = [k for k in g.kernels if k.kind == "extern" and "addmm" in k.call]
            assert prov[ext[0].name]["source"], ext[0]


def test_transformer_metrics_guards_cache_and_timings(transformer_import: Trace) -> None:
    tr = transformer_import
    c = tr.compiles["0/0"]
    assert c["metrics"]["co_name"] == "forward"
    assert c["metrics"]["entire_frame_compile_time_s"] > 0
    assert "backward_metrics" in c
    assert "GuardManager" in c["guards"] or "TREE_GUARD_MANAGER" in c["guards"]
    assert {(e["cache"], e["result"]) for e in c["cache"]} >= {("aotautograd", "miss"),
                                                               ("fx_graph", "miss")}
    assert tr.config["values"]["max_autotune"] is False
    summary = trace_summary(tr)
    fwd = next(g for g in summary["graphs"] if g["kind"] == "forward")
    assert fwd["kernels"] > 0 and fwd["passes_run"] > 5
    assert set(fwd["phase_times_s"]) >= {"dynamo", "post_grad", "lowering", "kernel_compile"}
    assert tr.graph("0_0-forward").meta.cache == {"aotautograd": "miss", "fx_graph": "miss"}
    arts = {a["name"] for a in c["artifacts"]}
    assert "aot_forward_graph_fw_metadata" in arts
    assert all((tr.root / a["file"]).is_file() for a in c["artifacts"] if a.get("file"))


def test_missing_parts_are_listed_not_errors(transformer_import: Trace) -> None:
    imp = transformer_import.manifest.imported_from
    assert imp["kind"] == "torch_trace"
    for what in ("per-pass snapshots", "fusion decisions", "autotune choices"):
        assert what in imp["missing"]
    assert transformer_import.manifest.warnings == []
    g = transformer_import.graph("0_0-forward")
    assert g.fusion == [] and g.autotune == [] and g.ir_text("post") is None
    assert transformer_import.problems == []


# -- graph breaks, recompiles, failures, caches ---------------------------------------------------

def test_graph_break_and_recompiles(torch_trace_logs: dict[str, Path], tmp_path: Path) -> None:
    tr = Trace(importers.import_path(torch_trace_logs["graph_break"], tmp_path / "t"))
    assert tr.status == "ok"
    breaks = [r for c in tr.compiles.values() for r in c.get("dynamo_graph_break_reason", [])]
    assert breaks and "Graph break" in breaks[0] and "item()" in breaks[0]
    reasons = [r for c in tr.compiles.values() for r in c.get("recompile_reasons", [])]
    assert any("size mismatch" in str(r) for r in reasons)
    functions = {(c.get("metrics") or {}).get("co_name") for c in tr.compiles.values()}
    assert "forward" in functions
    assert any(str(f).startswith("torch_dynamo_resume_in_forward") for f in functions)
    compiled = [g for g in tr.graphs if g.status == "ok" and g.kernels]
    assert len(compiled) == 4, [(g.id, g.status) for g in tr.graphs]
    # the recompiled graphs carry the dynamic batch size as a symbol
    dyn = [g for g in compiled if g.compile_id.startswith("0/1")][0]
    first = dyn.stage_graph(dyn.snapshots()[0])
    assert any(n.tensor and n.tensor.get("dtype") == "symint" for n in first)
    assert any(isinstance(d, str) and d.startswith("s") for n in first if n.tensor
               for d in n.tensor.get("shape", []))
    assert any(e["event"] == "create_symbol" for c in tr.compiles.values()
               for e in c.get("dynamic_shapes", []))


def test_compile_failure(torch_trace_logs: dict[str, Path], tmp_path: Path) -> None:
    tr = Trace(importers.import_path(torch_trace_logs["failing"], tmp_path / "t"))
    assert tr.status == "failed"
    err = tr.error
    assert err is not None and err.graph is not None
    assert err.type == "CppCompileError" and err.phase == "kernel_compile"
    assert "compile error" in (err.message or "") and "Traceback" in err.traceback_text
    assert err.extra["wrapper_type"] and list(err.to_json())[:6] == [
        "phase", "type", "message", "traceback", "graph", "compile_id"]
    g = tr.graph(err.graph)
    assert g.status == "failed" and g.error == err
    assert g.kernels and g.wrapper_code()  # the code that failed to build is there
    assert trace_summary(tr)["error"]["type"] == "CppCompileError"


def test_cache_hits(torch_trace_logs: dict[str, Path], tmp_path: Path) -> None:
    miss = Trace(importers.import_path(torch_trace_logs["mlp"], tmp_path / "miss"))
    hit = Trace(importers.import_path(torch_trace_logs["mlp_cached"], tmp_path / "hit"))
    assert (miss.graphs[0].meta.cache or {}).get("fx_graph") == "miss"
    hit_events = [e for c in hit.compiles.values() for e in c.get("cache", [])]
    assert {e["result"] for e in hit_events} == {"hit"}, hit_events
    assert {e["cache"] for e in hit_events} == {"aotautograd", "fx_graph"}
    g = hit.graphs[0]
    assert g.kernels and g.final_graph() is not None  # what the hit loaded is still shown
    assert any("cache" in m for m in hit.manifest.imported_from["missing"])
    # each lookup's key components (compiles/<id>.cache.json): same keys, miss then hit
    fx = [lk for lk in miss.cache_lookups() if lk["cache"] == "fx_graph"]
    assert fx and all(lk["components"] and lk["key"] for lk in fx)
    assert {c["name"] for c in fx[0]["components"]} >= {"gm", "torch_version"}
    pairs = [p for p in diff_traces(miss, hit, code=False)["cache"] if p["cache"] == "fx_graph"]
    assert any(p["same_key"] and p["result"] == {"a": "miss", "b": "hit"} for p in pairs), pairs


# -- damaged logs ---------------------------------------------------------------------------------

def test_corrupt_log_is_reported_by_line_and_the_rest_opens(
        torch_trace_logs: dict[str, Path], tmp_path: Path) -> None:
    src = _single_log(torch_trace_logs["transformer"])
    lines = src.read_text().split("\n")
    fwd = next(i for i, ln in enumerate(lines) if '"aot_forward_graph"' in ln)
    cut = next(i for i in range(fwd + 1, len(lines)) if "aten.addmm" in lines[i])
    lines[cut] = lines[cut][: len(lines[cut]) // 2]  # a truncated payload line
    guards = next(i for i, ln in enumerate(lines) if '"dynamo_cpp_guards_str"' in ln)
    lines.insert(guards, "\x00\x01 garbage, not a log record")
    metrics = next(i for i, ln in enumerate(lines) if '"compilation_metrics"' in ln)
    lines[metrics] = lines[metrics][:120]  # a truncated record header
    bad = tmp_path / "damaged.log"
    bad.write_text("\n".join(lines))

    tr = Trace(importers.import_path(bad, tmp_path / "t"))
    warnings = "\n".join(tr.manifest.warnings)
    assert f"line {cut + 1}:" in warnings  # the cut statement, by its line in the log
    assert f"line {fwd + 1}: payload of aot_forward_graph" in warnings  # checksum mismatch
    assert f"line {guards + 1}: not a TORCH_TRACE record" in warnings
    assert f"line {metrics + 1}: record is truncated or corrupt" in warnings
    # the rest still imports
    assert {g.kind for g in tr.graphs} == {"forward", "backward"}
    fwd_g = tr.graph("0_0-forward")
    stage = fwd_g.find_stage("aot_forward")
    graph = fwd_g.stage_graph(stage)
    assert graph is not None and len(graph) > 50
    assert all(g.kernels for g in tr.graphs)
    assert "guards" in tr.compiles["0/0"] and "metrics" not in tr.compiles["0/0"]
    assert "backward_metrics" in tr.compiles["0/0"]
    assert tr.problems == []


def test_log_cut_mid_record(torch_trace_logs: dict[str, Path], tmp_path: Path) -> None:
    data = _single_log(torch_trace_logs["transformer"]).read_bytes()
    code_at = data.index(b'"inductor_output_code"')
    cut = data[: code_at + 4000]  # the process died while writing the forward output code
    bad = tmp_path / "cut.log"
    bad.write_bytes(cut)
    n_lines = cut.count(b"\n") + 1
    tr = Trace(importers.import_path(bad, tmp_path / "t"))
    header = data[:code_at].count(b"\n") + 1
    warnings = "\n".join(tr.manifest.warnings)
    assert f"line {header}: payload of inductor_output_code" in warnings, warnings
    assert n_lines > header
    g = tr.graph("0_0-forward")
    assert g.final_graph() is not None and g.find_stage("post_grad") is not None


# -- the imports in the terminal UI ---------------------------------------------------------------

async def test_tui_says_what_the_log_lacks(open_ui, transformer_import: Trace) -> None:
    """Passes, IR, fusion decisions and autotune choices of an import: "not in this log",
    not "changed nothing" / "no IR (compilation stopped)" / "no autotuning"."""
    async with open_ui(transformer_import.root) as ui:
        overview = "\n".join(ui.lines("#overview"))
        assert f"imported from torch_trace: {transformer_import.imported_from['path']}" in overview
        assert "per-pass snapshots: not in this log; trace with tuidebug to get it" in overview
        row = next(ln for ln in ui.lines("#overview") if ln.strip().startswith("0_0-forward "))
        passes = [s for s in transformer_import.graph("0_0-forward").stages if s.kind == "pass"]
        assert f"?/{len(passes)}" in row, row  # passes changed: unknown, not 0
        await ui.press("2")
        assert "changes not in this log" in ui.text()
        passes = ui.app.screen
        g = ui.app.current_graph
        first_pass = next(s.index for s in g.stages if s.kind == "pass")
        passes._select_stage(first_pass)
        await ui.settle()
        assert "changed? not in this log; trace with tuidebug to get it" in ui.text()
        assert "changed nothing" not in ui.text()
        await ui.press("3")
        assert "Inductor IR (ir_pre_fusion / ir_post_fusion): not in this log" in ui.text()
        assert "compilation stopped" not in ui.text()
        assert "fusion decisions: not in this log" in ui.text()
        await ui.press("5")
        assert "autotune choices: not in this log" in ui.text()


async def test_tui_rank_selector(open_ui, torch_trace_logs: dict[str, Path],
                                 tmp_path: Path) -> None:
    src = tmp_path / "ddp"
    shutil.copytree(torch_trace_logs["ddp"], src)
    t0 = importers.ensure_trace(src)
    async with open_ui(t0) as ui:
        assert "rank 0 (R to change)" in ui.text()
        await ui.press("R")
        assert "Open the log of rank" in ui.text()
        await ui.press("down", "enter")
        assert await ui.wait_for(
            lambda: (ui.app.trace.imported_from or {}).get("rank") == 1, timeout=60)
        await ui.settle()
        assert "rank 1" in ui.text().splitlines()[0]  # the title bar
        assert ui.app.trace.root == src.parent / "ddp.rank1.tuidebug"
        g = ui.app.current_graph
        muls = [n for n in g.stage_graph(g.find_stage("dynamo")) if n.target == "operator.mul"]
        assert muls and muls[0].args[1] == 2  # rank 1 compiled its own constant (r + 1)


# -- detection, ranks, the import cache -----------------------------------------------------------

def test_detect(torch_trace_logs: dict[str, Path], transformer_import: Trace,
                tmp_path: Path) -> None:
    d = torch_trace_logs["transformer"]
    assert importers.detect(d) == "torch_trace"
    assert importers.detect(_single_log(d)) == "torch_trace"
    assert importers.detect(transformer_import.root) == "tuidebug"
    (tmp_path / "notes.txt").write_text("hello\n")
    assert importers.detect(tmp_path / "notes.txt") is None
    assert importers.detect(tmp_path) is None
    assert importers.detect(tmp_path / "nope") is None
    with pytest.raises(importers.ImportFailed):
        importers.ensure_trace(tmp_path / "notes.txt")


def test_multi_rank_logs(torch_trace_logs: dict[str, Path], tmp_path: Path) -> None:
    d = torch_trace_logs["ddp"]
    assert len(importers.trace_logs(d)) == 2
    assert importers.list_ranks(d) == [0, 1]
    traces = {r: Trace(importers.import_path(d, tmp_path / f"r{r}", rank=r)) for r in (0, 1)}
    for r, tr in traces.items():
        assert tr.manifest.imported_from["rank"] == r
        assert tr.manifest.imported_from["ranks"] == [0, 1]
        dyn = tr.graphs[0].stage_graph(tr.graphs[0].find_stage("dynamo"))
        muls = [n for n in dyn if n.target == "operator.mul"]
        assert muls and muls[0].args[1] == r + 1  # each rank compiled its own constant
    default = Trace(importers.import_path(d, tmp_path / "default"))
    assert default.manifest.imported_from["rank"] == 0
    assert any("imported rank 0" in w for w in default.manifest.warnings)
    with pytest.raises(importers.ImportFailed, match="rank 5"):
        importers.import_path(d, tmp_path / "r5", rank=5)
    p0, p1 = importers.ensure_trace(d, rank=0), importers.ensure_trace(d, rank=1)
    assert p0 != p1 and importers.list_ranks(p1) == [0, 1]


def test_ensure_trace_caches_beside_the_source(torch_trace_logs: dict[str, Path],
                                               tmp_path: Path) -> None:
    src = tmp_path / "tt"
    shutil.copytree(torch_trace_logs["graph_break"], src)
    before = _tree_digest(src)
    t = importers.ensure_trace(src)
    assert t == tmp_path / "tt.tuidebug" and Trace(t).status == "ok"
    assert _tree_digest(src) == before  # the source is never modified
    mtime = (t / "manifest.json").stat().st_mtime_ns
    assert importers.ensure_trace(src) == t
    assert (t / "manifest.json").stat().st_mtime_ns == mtime  # reused, not imported again
    assert importers.ensure_trace(t) == t  # a tuidebug trace is itself
    # one log file of the directory: imported beside the directory, never inside it
    one = importers.ensure_trace(_single_log(src))
    assert one == tmp_path / f"tt.{_single_log(src).name}.tuidebug"
    assert _tree_digest(src) == before
    # a changed source is imported again
    log = _single_log(src)
    n = log.read_bytes().count(b"\n")
    with open(log, "a") as f:
        f.write("appended by a test\n")
    t2 = importers.ensure_trace(src)
    assert t2 == t
    assert (t / "manifest.json").stat().st_mtime_ns != mtime
    assert any(f"line {n + 1}: not a TORCH_TRACE record" in w
               for w in Trace(t2).manifest.warnings)


def test_ensure_trace_falls_back_to_the_user_cache(torch_trace_logs: dict[str, Path],
                                                   tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "user-cache"
    monkeypatch.setenv(importers.CACHE_DIR_ENV, str(cache))
    real = import_cache._writable

    def writable(d: Path) -> bool:  # the source's directory is read-only (root ignores chmod)
        if cache not in (d, *d.parents):
            raise PermissionError(13, "Permission denied", str(d))
        return real(d)

    monkeypatch.setattr(import_cache, "_writable", writable)
    src = torch_trace_logs["mlp"]
    t = importers.ensure_trace(src)
    assert cache in t.parents and Trace(t).status == "ok"
    assert not (src.parent / f"{src.name}.tuidebug").exists()
    assert importers.ensure_trace(src) == t


def test_viewers_stay_torch_free(torch_trace_logs: dict[str, Path], tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from tuidebug.trace.importers import ensure_trace\n"
        "from tuidebug.trace.format.reader import Trace\n"
        "from tuidebug.trace.queries.summary import trace_summary\n"
        f"t = ensure_trace({str(tmp_path / 'tt')!r})\n"
        "s = trace_summary(Trace(t))\n"
        "assert s['graphs'], s\n"
        "bad = [m for m in sys.modules if m == 'torch' or m.startswith('torch.')]\n"
        "assert not bad, bad\n"
        "print('ok')\n")
    shutil.copytree(torch_trace_logs["graph_break"], tmp_path / "tt")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=_env({"PYTHONPATH": str(ROOT)}), timeout=120)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr


def test_info_cli_reads_an_import(transformer_import: Trace) -> None:
    proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", "info", "--json",
                           str(transformer_import.root)], capture_output=True, text=True,
                          env=_env({"PYTHONPATH": str(ROOT)}), timeout=120)
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    assert [g["kind"] for g in s["graphs"]] == ["forward", "backward"]
    assert s["compiles"][0]["function"] == "forward"
