"""Capture on real compiles of the bundled examples (no mocks): what a trace must contain."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, ROOT
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.summary import trace_summary

pytestmark = pytest.mark.slow  # every test here reads a live compile or compiles

TRANSFORMER = str(EXAMPLES / "transformer_block.py")


def test_transformer_has_forward_and_backward(transformer_trace: Path) -> None:
    t = Trace(transformer_trace)
    assert t.status == "ok", t.error
    kinds = {g.kind for g in t.graphs}
    assert kinds == {"forward", "backward"}
    assert not t.problems


def test_tracing_says_each_graph_it_compiles(transformer_trace: Path) -> None:
    """``tuidebug trace`` says which graph it compiles: the backward too (it compiles during
    the script's ``loss.backward()``, seconds in which nothing was said)."""
    log = (transformer_trace.parent / f"{transformer_trace.name}.log").read_text()
    graphs = Trace(transformer_trace).graphs
    assert {g.kind for g in graphs} == {"forward", "backward"}, [g.id for g in graphs]
    for g in graphs:
        assert f"[tuidebug] compiling graph {g.id}" in log, (g.id, log[-2000:])


def test_stages_cover_the_pipeline(transformer_trace: Path) -> None:
    fwd = next(g for g in Trace(transformer_trace).graphs if g.kind == "forward")
    names = [s.name for s in fwd.stages]
    for stage in ("dynamo", "pre_grad", "aot_joint", "joint_graph_passes", "aot_forward",
                  "post_grad"):
        assert stage in names, names
    assert names.index("dynamo") < names.index("aot_joint") < names.index("aot_forward") \
        < names.index("post_grad")
    dynamo = fwd.stage_graph(fwd.find_stage("dynamo"))
    assert dynamo is not None
    # Dynamo graph nodes point at the example's own lines and modules.
    srcs = [n.source for n in dynamo.compute_nodes() if n.source]
    assert srcs and all(s["file"] == TRANSFORMER for s in srcs)
    assert any(n.module.startswith("blocks.0") for n in dynamo.nodes)


def test_pass_snapshots_record_what_changed(transformer_trace: Path) -> None:
    t = Trace(transformer_trace)
    changed = [(g, s) for g in t.graphs for s in g.stages
               if s.kind == "pass" and s.changed and s.file]
    assert changed, "no pass changed the graph"
    g, s = changed[0]
    ch = g.stage_changes(s)
    assert ch["added"] or ch["removed"] or ch["changed"]
    before = g.stage_graph(g.snapshots()[g.snapshots().index(s) - 1])
    after = g.stage_graph(s)
    assert before is not None and after is not None
    for name in ch["removed"]:
        assert name in before and name not in after
    for name in ch["added"]:
        assert name in after and name not in before
    # Passes that changed nothing are listed with their time but have no snapshot.
    unchanged = [s for s in g.stages if s.kind == "pass" and not s.changed]
    assert unchanged and all(s.file is None and s.duration_s is not None for s in unchanged)
    assert all(s.subsystem for s in g.stages if s.kind == "pass")


def test_ir_fusion_and_kernels(transformer_trace: Path) -> None:
    t = Trace(transformer_trace)
    assert len(t.graphs) == 2, [g.id for g in t.graphs]  # forward and backward
    for g in t.graphs:
        assert g.ir_pre and g.ir_pre["nodes"], g.id
        assert g.ir_post and g.ir_post["nodes"], g.id
        assert len(g.ir_post["nodes"]) <= len(g.ir_pre["nodes"])
        text = g.ir_text("pre") or ""  # the IR text describes each of its nodes ("op5: …")
        assert all(f"{n['name']}: " in text for n in g.ir_pre["nodes"]), g.id
        fused = [f for f in g.fusion if f["action"] == "fused"]
        assert fused, f"{g.id}: no fusion recorded"
        # each fused result is a post-fusion node (or was fused further)
        generated = [k for k in g.kernels if k.kind != "extern"]
        assert generated
        for k in generated:
            assert k.kind == "cpp"
            code = g.code(k.file)
            assert code and "kernel" in code, k.name
        wrapper = g.wrapper_code()
        assert wrapper and all(k.name in wrapper for k in generated)
    rejected = [f for g in t.graphs for f in g.fusion if f["action"] == "rejected"]
    assert rejected and all(f["reason"] for f in rejected)


def test_provenance_reaches_example_lines(transformer_trace: Path) -> None:
    lines = Path(TRANSFORMER).read_text().splitlines()
    checked = 0
    for g in Trace(transformer_trace).graphs:
        prov = g.provenance["kernels"]
        final = g.final_graph()
        assert final is not None
        for k in (k for k in g.kernels if k.kind != "extern"):
            checked += 1
            p = prov[k.name]
            assert p["ir_nodes"], k.name
            assert p["fx_nodes"] and all(n in final for n in p["fx_nodes"]), k.name
            assert p["source"], f"{g.id}: {k['name']} has no source line"
            for s in p["source"]:
                assert s["file"] == TRANSFORMER
                assert s["code"] and s["code"] in lines[s["line"] - 1]
        assert g.provenance["fx_to_kernels"], g.id
        for fx, ks in g.provenance["fx_to_kernels"].items():
            assert all(k in prov for k in ks)
    assert checked >= 2, "no generated kernel in the forward and backward graphs"


def test_metrics_config_and_eager_check(transformer_trace: Path) -> None:
    t = Trace(transformer_trace)
    (cid, c), = t.compiles.items()
    assert c["metrics"]["entire_frame_compile_time_s"] > 0
    assert c["guards"]
    assert t.config["values"]["max_fusion_size"] == 64
    assert "trace.provenance_tracking_level" in t.config["set_by_tuidebug"]
    check = t.runtime["checks"][cid]
    assert check["close"] is True and check["max_abs"] < 1e-3
    fwd = next(g for g in t.graphs if g.kind == "forward")
    times = fwd.meta.phase_times_s
    assert list(times)[:1] == ["dynamo"] and "kernel_compile" in times


def test_info_json_keys(transformer_trace: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "tuidebug.cli", "info", "--json",
                          str(transformer_trace)], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["status"] == "ok" and "error" not in data
    for g in data["graphs"]:
        for key in ("id", "kind", "nodes", "passes_changed", "kernels", "kernels_with_source",
                    "source_files"):
            assert key in g
        assert g["kernels"] > 0 and g["kernels_with_source"] == g["kernels"]
        assert g["source_files"] == [TRANSFORMER]
    assert data == trace_summary(Trace(transformer_trace)) | {"trace": data["trace"]}


def test_failing_compile_is_recorded(failing_trace: Path) -> None:
    t = Trace(failing_trace)
    assert t.status == "failed"
    err = t.error
    assert err is not None and err.phase == "kernel_compile"
    assert "CppCompileError" in str(err.type)
    assert "Traceback" in str(err.traceback)
    (g,) = t.graphs
    assert g.status == "failed" and g.error == err
    # everything up to the failure is there: stages, IR, fusion, generated code
    assert g.find_stage("post_grad") is not None
    assert g.ir_post and g.kernels and g.wrapper_code()
    assert (g.dir / "repro" / "fx_graph_runnable.py").exists()
    assert "cpp.inject_relu_bug_TESTING_ONLY" in t.config["changed"]


def test_graph_break_and_recompile(graph_break_trace: Path) -> None:
    t = Trace(graph_break_trace)
    assert t.status == "ok"
    ok = [g for g in t.graphs if g.status == "ok"]
    assert len({g.compile_id.split("/")[0] for g in ok}) == 2  # two frames (graph break)
    breaks = [r for c in t.compiles.values() for r in c.get("dynamo_graph_break_reason") or []]
    assert breaks and "graph_break.py" in breaks[0]
    reasons = [r for c in t.compiles.values() for r in c.get("recompile_reasons") or []]
    assert reasons and "size mismatch" in str(reasons)


def test_in_process_capture_api(tmp_path: Path) -> None:
    """``with tuidebug.capture(dir)`` records a compile made in the calling process."""
    code = f"""
import torch, tuidebug
def f(x):
    return torch.relu(x) * 2 + x.sum()
with tuidebug.capture({str(tmp_path / 't')!r}) as s:
    torch.compile(f)(torch.randn(8))
print(s.graph_count)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"
    t = Trace(tmp_path / "t")
    assert t.status == "ok" and t.graphs[0].kind == "inference"
    assert t.graphs[0].kernels


def test_capture_refuses_a_used_directory_and_warns_when_nothing_compiled(tmp_path: Path) -> None:
    """``tuidebug.capture`` never writes over an existing trace; a block that compiled nothing
    says so in the manifest, and ``tuidebug info`` shows it."""
    old = tmp_path / "old"
    old.mkdir()
    (old / "manifest.json").write_text("precious")
    code = f"""
import torch, tuidebug
try:
    with tuidebug.capture({str(old)!r}):
        torch.compile(torch.relu)(torch.randn(4))
except FileExistsError as e:
    print("refused:", e)
with tuidebug.capture({str(tmp_path / 'empty')!r}):
    torch.relu(torch.randn(4))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert "refused: trace directory" in out.stdout and "not empty" in out.stdout
    assert [p.name for p in old.iterdir()] == ["manifest.json"]
    assert (old / "manifest.json").read_text() == "precious"
    t = Trace(tmp_path / "empty")
    warnings = t.manifest.warnings
    assert any("nothing was compiled" in w for w in warnings), warnings
    info = subprocess.run([sys.executable, "-m", "tuidebug.cli", "info", str(t.root)],
                          capture_output=True, text=True, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert "warning: nothing was compiled" in " ".join(info.stdout.split()), info.stdout


# An observer independent of capture: every pair Inductor's Scheduler.can_fuse turned down.
_FUSION_OBSERVER = """
import json, sys, torch, tuidebug
import torch._inductor.scheduler as scheduler
turned_down = []
can_fuse = scheduler.Scheduler.can_fuse
def observed(self, node1, node2, *args, **kwargs):
    ok = can_fuse(self, node1, node2, *args, **kwargs)
    if not ok:
        turned_down.append([node1.get_name(), node2.get_name()])
    return ok
scheduler.Scheduler.can_fuse = observed
def f(x, y):  # two reductions over different loops: the C++ backend says no, without a reason
    return x.sum(dim=1), (y * 2).sum(dim=0), x.t() + 1
with tuidebug.capture(sys.argv[1]):
    torch.compile(f)(torch.randn(64, 32), torch.randn(16, 8))
print(json.dumps(turned_down))
"""


def test_every_rejected_fusion_is_recorded(tmp_path: Path) -> None:
    """A pair that Scheduler.can_fuse turns down without a WhyNoFuse reason (here the C++
    backend's can_fuse_horizontal) is recorded as rejected, naming the check that said no."""
    out = subprocess.run([sys.executable, "-c", _FUSION_OBSERVER, str(tmp_path / "t")],
                         capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    turned_down = {tuple(p) for p in json.loads(out.stdout.splitlines()[-1])}
    assert turned_down
    (g,) = Trace(tmp_path / "t").graphs
    rejected = {(f["node1"], f["node2"]): f["reason"] for f in g.fusion
                if f["action"] == "rejected"}
    assert turned_down <= set(rejected), turned_down - set(rejected)
    assert any(r == "backend CppScheduling.can_fuse_horizontal returned False (no reason given)"
               for r in rejected.values()), rejected
    assert g.meta.fusion.rejected == len(g.fusion) - g.meta.fusion.fused


def test_ir_users_and_extern_provenance_name_ir_nodes(transformer_trace: Path) -> None:
    """IR nodes list their users (nodes of the same IR list), and every kernel's provenance,
    extern calls included, names IR nodes of the IR files (op5, not buffer buf5)."""
    graphs = Trace(transformer_trace).graphs
    assert len(graphs) == 2, [g.id for g in graphs]
    for g in graphs:
        for ir in (g.ir_pre, g.ir_post):
            names = {n["name"] for n in ir["nodes"]}
            with_users = [n for n in ir["nodes"] if n["users"]]
            assert len(with_users) >= len(ir["nodes"]) // 2, g.id
            assert all(set(n["users"]) <= names - {n["name"]} for n in ir["nodes"]), g.id
        members = {m for n in g.ir_post["nodes"] for m in n["members"]}
        externs = [k for k in g.kernels if k.kind == "extern"]
        assert externs, g.id
        for k in g.kernels:
            ir_nodes = g.provenance["kernels"][k.name]["ir_nodes"]
            assert ir_nodes and set(ir_nodes) <= members, (k.name, ir_nodes)


def test_graph_cache_hit_still_records_the_config(tmp_path: Path) -> None:
    """With --use-cache the second trace is an AOTAutograd/FX graph cache hit, which skips the
    pre-grad passes; the config in force (including what mode="max-autotune" patches on) is
    still recorded."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))
    traces = []
    for name in ("cold", "hit"):
        out = tmp_path / name
        p = subprocess.run([sys.executable, "-m", "tuidebug.cli", "trace", "--use-cache", "-o",
                            str(out), str(EXAMPLES / "mlp.py"), "--mode", "max-autotune"],
                           env=env, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
        traces.append(Trace(out))
    cold, hit = traces
    hits = sum(int((c.get("counters") or {}).get("aot_autograd", {}).get("autograd_cache_hit", 0))
               + int((c.get("counters") or {}).get("inductor", {}).get("fxgraph_cache_hit", 0))
               for c in hit.compiles.values())
    assert hits > 0, "the second trace should hit the graph caches"
    for t in (cold, hit):
        assert t.config["values"]["max_autotune"] is True, t.root
        assert t.config["values"]["triton.cudagraphs"] is True
    # tuidebug info shows each compile's cache use, and a graph served from the cache as such
    cold_s, hit_s = trace_summary(cold), trace_summary(hit)
    assert cold_s["compiles"][0]["cache"]["fx_graph"]["miss"] > 0
    assert hit_s["compiles"][0]["cache"]["fx_graph"]["hit"] > 0
    assert not any(g["from_cache"] for g in cold_s["graphs"])
    cached = [g for g in hit_s["graphs"] if g["from_cache"]]
    assert cached and all(g["passes_changed"] is None for g in cached)
    info = subprocess.run([sys.executable, "-m", "tuidebug.cli", "info", str(hit.root)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert "from cache" in info.stdout and "passes not observed" in info.stdout, info.stdout
    assert "fx_graph hit" in info.stdout


def test_kernel_times_in_the_transformer_trace(transformer_trace: Path) -> None:
    """Per-kernel times (code/timings.json): every generated kernel's compile, and a run time
    for the kernels of the forward graph (re-run after the eager comparison)."""
    t = Trace(transformer_trace)
    for g in t.graphs:
        names = {k.name for k in g.kernels if k.kind != "extern"}
        assert set(g.timings) == names, g.id
        for name, e in g.timings.items():
            assert e["compile"] in ("built", "cached"), (name, e)
            assert (e["compile_s"] or 0) > 0 if e["compile"] == "built" else e["compile_s"] is None
    fwd = next(g for g in t.graphs if g.kind == "forward")
    assert fwd.timings, fwd.id
    for name, e in fwd.timings.items():
        assert e["run_s"] > 0 and e["calls"] >= 1, (name, e)
    run = json.loads((fwd.dir / "code" / "timings.json").read_text())["run"]
    assert 1 <= run["runs"] <= 5 and run["elapsed_s"] < 2.0, run


def test_kernel_times_built_cached_and_no_check(tmp_path: Path) -> None:
    """A fresh kernel cache: the C++ build is timed; compiled again, the binary comes from the
    cache. The kernels are put back after timing. Without the eager check nothing is re-run."""
    code = f"""
import json, torch, torch._dynamo, tuidebug
from tuidebug.compiler.capture import CaptureSession
def f(x):
    return torch.relu(x) * 2 + x.sum()
for name, check in (("built", True), ("cached", True), ("nocheck", False)):
    torch._dynamo.reset()
    s = CaptureSession({str(tmp_path)!r} + "/" + name, check_accuracy=check).start()
    try:
        torch.compile(f)(torch.randn(64))
    finally:
        s.stop()
    (g,) = s.graphs.values()
    mod = g.module()
    print(json.dumps({{n: type(vars(mod)[n]).__name__ for n in g.timings}}))
"""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    for line in out.stdout.splitlines():  # the original kernels are back in the module
        assert set(json.loads(line).values()) == {"builtin_function_or_method"}, line
    (built,) = Trace(tmp_path / "built").graphs[0].timings.values()
    assert built["compile"] == "built" and built["compile_s"] > 0
    assert built["run_s"] > 0 and built["calls"] == 1
    (cached,) = Trace(tmp_path / "cached").graphs[0].timings.values()
    assert cached["compile"] == "cached" and cached["compile_s"] is None and cached["run_s"] > 0
    (nocheck,) = Trace(tmp_path / "nocheck").graphs[0].timings.values()
    assert nocheck["compile"] == "cached" and "run_s" not in nocheck
