"""``tuidebug trace --profile``: what the real compiler's kernels measured, joined with
provenance (``trace/profile.py``), as ``info`` shows it; a damaged profile.json."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from tests.conftest import EXAMPLES, plain_files, pythonpath
from tuidebug.trace.queries.profile import NO_LINE, profile_view
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.summary import trace_summary
from tuidebug.viewers.info import render_summary


def _profile(path: Path) -> dict:
    return json.loads((path / "profile.json").read_text())


def test_every_kernel_call_of_the_graph_is_measured(profiled_trace: Path) -> None:
    t = Trace(profiled_trace)
    assert t.problems == []
    (g,) = t.graphs
    prof = t.profile["compiles"]
    (c,) = prof.values()
    assert c["runs"] == 3 and c["graphs"] == [g.id] and c["device"] == "cpu"
    assert c["forward_grad"] is False  # an inference call: its forward measured under no_grad
    measured = {(k["kernel"], k["call"]) for k in c["kernels"]}
    expected = set()
    for k in g.kernels:  # a kernel Inductor reuses is measured per call (its handles)
        handles = k.handles or []
        units = handles if k.kind != "extern" and len(handles) > 1 else [k.name]
        expected |= {(k.name, u) for u in units}
    assert measured == expected
    for k in c["kernels"]:
        assert k["calls"] == 1 and k["time_s"] > 0 and k["cpu_s"] == k["time_s"], k
    assert 0 < c["compiled"]["wall_min_s"] <= c["compiled"]["wall_s"]
    assert 0 < c["eager"]["wall_min_s"] <= c["eager"]["wall_s"]


def test_eager_nodes_are_the_dynamo_graphs(profiled_trace: Path) -> None:
    t = Trace(profiled_trace)
    (c,) = t.profile["compiles"].values()
    g = t.graph(c["eager_graph"])
    dynamo = g.stage_graph(g.find_stage("dynamo"))
    computed = {n.name for n in dynamo if n.op in ("call_function", "call_method",
                                                    "call_module")}
    measured = {n["node"] for n in c["eager_nodes"]}
    assert computed <= measured <= {n.name for n in dynamo}
    assert all(n["time_s"] > 0 for n in c["eager_nodes"])


def test_time_is_joined_to_lines_and_modules(profiled_trace: Path) -> None:
    view = profile_view(Trace(profiled_trace))
    assert view is not None
    kernels = sum(r.compiled_s or 0 for r in view.kernels)
    # a kernel's time is shared among its FX nodes, lines and modules: none is lost
    for table in ("nodes", "lines", "modules"):
        assert abs(sum(r.compiled_s or 0 for r in view.table(table)) - kernels) < 1e-9
    src = (EXAMPLES / "mlp.py").read_text().splitlines()
    lines = {r.line: r for r in view.lines if r.key != NO_LINE}
    for text in ("x = self.norm1(self.act(self.fc1(x)))", "x = self.norm2(self.act(self.fc2(x)))",
                 "return self.fc3(x)"):
        number = next(i + 1 for i, ln in enumerate(src) if ln.strip() == text)
        row = lines[number]
        assert row.code == text and row.compiled_s > 0 and row.eager_s > 0
    modules = {r.key for r in view.modules}
    assert {"fc1", "fc2", "fc3"} <= modules
    ordered = [max(r.compiled_s or 0, r.eager_s or 0) for r in view.lines]
    assert ordered == sorted(ordered, reverse=True)
    t = view.totals
    assert t["compiled_wall_s"] > 0 and t["eager_wall_s"] > 0
    assert abs(t["generated_share"] + t["extern_share"] + t["overhead_share"] - 1) < 1e-3
    assert t["extern_s"] > 0 and t["generated_s"] > 0  # MLP: addmm extern, fused layer norm


def test_info_reports_the_profile(profiled_trace: Path, mlp_trace: Path) -> None:
    s = trace_summary(Trace(profiled_trace))
    assert s["profile"]["totals"]["runs"] == 3
    assert s["profile"]["lines"][0]["compiled_s"] > 0
    console = Console(file=io.StringIO(), width=200, record=True, color_system=None)
    render_summary(s, console)
    text = console.export_text()
    assert "where the time goes (3 runs on cpu)" in text
    assert "mlp.py:28  x = self.norm1(self.act(self.fc1(x)))" in text
    assert "profile" not in trace_summary(Trace(mlp_trace))  # not profiled: nothing said
    assert not (mlp_trace / "profile.json").exists()


def test_a_damaged_profile_is_named_and_the_rest_reads(profiled_trace: Path, copy_trace) -> None:
    path = copy_trace(profiled_trace)
    data = _profile(path)
    (cid,) = data["compiles"]
    data["compiles"][cid]["kernels"][0]["time_s"] = "\x1b[31mslow"
    data["compiles"][cid]["kernels"][1]["graph"] = 7  # a required field wrong: the row goes
    (path / "profile.json").write_text(json.dumps(data))
    t = Trace(path)
    view = profile_view(t)
    assert view is not None and len(view.kernels) == len(data["compiles"][cid]["kernels"]) - 1
    problems = [str(p) for p in t.problems]
    assert any("profile.json" in p and "time_s" in p for p in problems), problems
    assert any("profile.json" in p and "graph" in p for p in problems), problems


def test_profile_options_are_checked(tmp_path: Path) -> None:
    env = {"PYTHONPATH": pythonpath(), "PATH": "/usr/bin:/bin"}
    base = [sys.executable, "-m", "tuidebug.cli", "trace", "-o", str(tmp_path / "t")]
    bad = subprocess.run([*base, "--profile", str(EXAMPLES / "mlp.py")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "write --profile 10 before the script" in bad.stderr
    both = subprocess.run([*base, "--profile", "3", "--no-check", str(EXAMPLES / "mlp.py")],
                          env=env, capture_output=True, text=True, timeout=120)
    assert both.returncode == 2 and "drop --no-check" in both.stderr
    assert not (tmp_path / "t").exists()


def _check_trace_events(data: dict) -> list[dict]:
    """The Chrome trace-event format (JSON object form): every event named, a known phase, ids
    and times of the right types; the spans of one thread nest (Perfetto draws them as a
    stack) — returns the spans."""
    assert isinstance(data, dict) and isinstance(data["traceEvents"], list)
    assert data.get("displayTimeUnit") in (None, "ms", "ns")
    spans = []
    for e in data["traceEvents"]:
        assert isinstance(e["name"], str) and e["ph"] in ("X", "M"), e
        assert isinstance(e["pid"], int) and isinstance(e.get("tid", 0), int), e
        assert isinstance(e.get("args", {}), dict)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name") and isinstance(
                e["args"]["name"], str), e
            continue
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
        assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0, e
        spans.append(e)
    by_thread: dict = {}
    for e in spans:
        by_thread.setdefault((e["pid"], e["tid"]), []).append(e)
    nested = 0
    for events in by_thread.values():
        stack: list = []
        for e in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - 1e-3:
                stack.pop()
            if stack:  # inside the enclosing span, never across its end
                assert e["ts"] + e["dur"] <= stack[-1]["ts"] + stack[-1]["dur"] + 1e-3, (e, stack)
                nested += 1
            stack.append(e)
    assert spans and nested, "no span sat inside another: the nesting went unchecked"
    return spans


def test_perfetto_export(profiled_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    p = subprocess.run([sys.executable, "-m", "tuidebug.cli", "perfetto", str(profiled_trace),
                        "-o", str(out)], env={"PYTHONPATH": pythonpath(), "PATH": "/usr/bin:/bin"},
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    spans = _check_trace_events(json.loads(out.read_text()))
    t = Trace(profiled_trace)
    (g,) = t.graphs
    phases = {e["name"]: e for e in spans if e["cat"] == "phase"}
    assert set(phases) == set(g.meta.phase_times_s)
    assert abs(phases["codegen"]["dur"] - g.meta.phase_times_s["codegen"] * 1e6) <= 1
    passes = [e["name"] for e in spans if e["cat"] == "pass"]
    assert passes == [s.name for s in g.stages if s.kind == "pass" and s.duration_s is not None]
    (c,) = t.profile["compiles"].values()
    calls = [e for e in spans if e["pid"] == 2 and e["cat"] != "call"]
    assert sorted(e["name"] for e in calls) == sorted(k["call"] for k in c["kernels"])
    order = {h: i for i, h in enumerate(
        sorted({h for k in g.kernels for h in k.handles or []},
               key=lambda h: int(h.rsplit(":", 1)[1])))}
    handle = {k["call"]: k["call"] if ":" in k["call"] else
              (g.kernel(k["kernel"])["handles"] or [""])[0] for k in c["kernels"]}
    assert [order[handle[e["name"]]] for e in calls] == sorted(order[handle[e["name"]]]
                                                               for e in calls)
    eager = [e["name"] for e in spans if e["pid"] == 3 and e["cat"] == "fx_node"]
    assert sorted(eager) == sorted(n["node"] for n in c["eager_nodes"])


def test_diff_shows_time_deltas_per_kernel_and_line(profiled_trace: Path, mlp_trace: Path,
                                                   copy_trace) -> None:
    from tuidebug.trace.diff import diff_traces
    from tuidebug.viewers.diff_view import render_diff

    slower = copy_trace(profiled_trace, "slower")
    data = _profile(slower)
    (c,) = data["compiles"].values()
    k = next(k for k in c["kernels"] if k["kind"] != "extern")  # a fused kernel, 1 ms slower
    k["time_s"] += 1e-3
    c["compiled"]["wall_s"] += 1e-3
    assert data.pop("calls")  # no whole call measured in B: the graphs' times are compared
    (slower / "profile.json").write_text(json.dumps(data))
    d = diff_traces(profiled_trace, slower, code=False)
    p = d["profile"]
    assert abs(p["totals"]["compiled_wall_s"]["b"] - p["totals"]["compiled_wall_s"]["a"]
               - 1e-3) < 1e-9
    top = p["kernels"][0]
    assert top["key"] == "cpp_fused_gelu_native_layer_norm" and abs(top["delta"] - 1e-3) < 1e-9
    assert all(abs(r["delta"]) < 1e-9 for r in p["kernels"][1:])
    line = p["lines"][0]  # the kernel's nodes are on one or more lines: the top one changed
    assert line["delta"] > 0 and line.get("file", "").endswith("mlp.py")
    assert abs(sum(r["delta"] for r in p["lines"]) - 1e-3) < 1e-9
    assert any(ln.startswith("profiled compiled call (timed in two processes")
               for ln in d["lines"])
    assert any(ln.startswith(f"line mlp.py:{line['line']}: +") for ln in d["lines"])
    console = Console(file=io.StringIO(), width=200, record=True, color_system=None)
    render_diff(d, console, code=False)
    text = console.export_text()
    assert "time per kernel, largest changes first" in text
    assert "+1.00 ms" in text
    # the same script traced from another checkout: its lines are the same lines
    moved = plain_files(copy_trace(slower, "moved"))  # its files edited as text
    for f in (moved / "graphs").rglob("*.json"):
        f.write_text(f.read_text().replace(str(EXAMPLES), "/elsewhere/checkout/examples"))
    assert "/elsewhere/checkout/examples/mlp.py" in json.dumps(
        [r.file for r in profile_view(Trace(moved)).lines])
    p = diff_traces(profiled_trace, moved, code=False)["profile"]
    assert all(r["a"] is not None and r["b"] is not None for r in p["lines"]), p["lines"]
    assert abs(sum(r["delta"] for r in p["lines"]) - 1e-3) < 1e-9
    assert p["lines"][0]["delta"] > 0 and abs(p["lines"][0]["delta"]) <= 1e-3 + 1e-9
    one = diff_traces(profiled_trace, mlp_trace, code=False)
    assert "profile: only trace A was profiled (trace --profile)" in one["lines"]


def test_roofline_is_empty_on_the_cpu_and_judges_gpu_measurements(profiled_trace: Path,
                                                                   copy_trace) -> None:
    from tuidebug.trace.queries.roofline import roofline_rows

    view = profile_view(Trace(profiled_trace))
    assert view is not None and roofline_rows(view) == []  # CPU: no device times, no bytes
    (c,) = _profile(profiled_trace)["compiles"].values()
    assert c["device_peak"] is None and all("bytes" not in k for k in c["kernels"])
    # the same trace as a GPU would have measured it (what the capture writes on CUDA)
    gpu = copy_trace(profiled_trace, "gpu")
    data = _profile(gpu)
    (c,) = data["compiles"].values()
    c["device"] = "cuda"
    c["device_peak"] = {"name": "NVIDIA H100", "dram_gbps": 3350.0,
                        "tflops": {"float32": 67.0, "bfloat16": 989.0}}
    fast, slow, tiny, fp32 = c["kernels"][:4]
    fast.update(device_s=1e-3, time_s=1e-3, bytes=3e9, calls=1.0)  # 3000 GB/s: near the roof
    slow.update(device_s=2e-3, time_s=2e-3, bytes=1e9, calls=2.0)  # 1 GB per 1 ms call
    tiny.update(device_s=4e-6, time_s=4e-6, bytes=1e3, calls=1.0)
    # 50 TFLOP/s at 500 FLOP/byte: compute-bound, 75% of the float32 roof (its dtype is not
    # recorded: judged against bfloat16's 989 it would be flagged at 5%, a false alarm)
    fp32.update(device_s=1e-3, time_s=1e-3, bytes=1e8, flops=5e10, calls=1.0)
    (gpu / "profile.json").write_text(json.dumps(data))
    rows = {r["key"]: r for r in roofline_rows(profile_view(Trace(gpu)))}
    assert set(rows) == {fast["call"], slow["call"], tiny["call"], fp32["call"]}
    f = rows[fp32["call"]]
    assert f["bound"] == "compute" and f["tflops"] == 50 and not f["flagged"], f
    assert abs(f["flops_fraction"] - 50 / 67) < 1e-3
    fp32.update(flops=5e9)  # 5 TFLOP/s at 50 FLOP/byte: under 30% of even the lowest roof
    (gpu / "profile.json").write_text(json.dumps(data))
    f = next(r for r in roofline_rows(profile_view(Trace(gpu))) if r["key"] == fp32["call"])
    assert f["bound"] == "compute" and f["flagged"], f
    assert "7% of peak FLOP/s (5.0 of 67 TFLOP/s, the float32 peak)" in f["why"], f["why"]
    assert rows[fast["call"]]["gbps"] == 3000 and not rows[fast["call"]]["flagged"]
    s = rows[slow["call"]]
    assert s["time_s"] == 1e-3 and s["gbps"] == 1000 and s["bound"] == "memory"
    # 29.85% of the roof: flagged (under 30%), and said so — never "30% of peak"
    assert s["flagged"] and "29% of peak bandwidth (1000 of 3350 GB/s)" in s["why"], s["why"]
    assert rows[tiny["call"]]["bound"] == "launch"
    s = trace_summary(Trace(gpu))
    console = Console(file=io.StringIO(), width=200, record=True, color_system=None)
    render_summary(s, console)
    assert "roofline (Triton kernels, per call)" in console.export_text()


def test_a_recompile_of_a_profiled_trace_is_profiled_too(profiled_trace: Path) -> None:
    from tuidebug.compiler.recompile import trace_source

    assert Trace(profiled_trace).manifest.profile_runs == 3
    assert trace_source(profiled_trace)["profile"] == 3


# -- a training step: the backward profiled too ---------------------------------------------------

def _training(path: Path) -> tuple[Trace, dict, dict]:
    t = Trace(path)
    assert t.problems == []
    (c,) = t.profile["compiles"].values()
    return t, c, c["backward"]


def test_the_profile_leaves_the_users_training_alone(profiled_training_trace: Path) -> None:
    log = (profiled_training_trace.parent / "profiled_training.log").read_text()
    line = next(ln for ln in log.splitlines() if ln.startswith("TRAIN_STEP "))
    assert json.loads(line.split(" ", 1)[1]) == {"grad_untouched_by_the_first_call": True,
                                                 "grads_match_eager": True}, log[-3000:]
    assert Trace(profiled_training_trace).status == "ok"


def test_backward_kernels_are_measured(profiled_training_trace: Path) -> None:
    t, c, b = _training(profiled_training_trace)
    assert c["forward_grad"] is True  # the forward measured as it runs in training
    kinds = {g.kind: g for g in t.graphs}
    assert set(kinds) == {"forward", "backward"}
    bwd = kinds["backward"]
    assert "note" not in c and c["graphs"] == [kinds["forward"].id]
    assert b["graphs"] == [bwd.id]
    # who compiled the backward graph: the eager check runs first and, for a call under
    # autograd, judges the gradients (a compiled forward and backward: 67d5357), so the backward
    # is compiled by the check, not the profile (with --no-check: by the profile)
    checks = t.runtime["checks"]
    checks = list(checks.values()) if isinstance(checks, dict) else checks
    judged = any(isinstance(ch.get("gradients"), dict) and "outputs" in ch["gradients"]
                 for ch in checks)
    assert judged, checks  # the trace's check judged the gradients ...
    assert b["compiled_by_profile"] is False  # ... and so compiled the backward before the profile
    expected = set()
    for k in bwd.kernels:
        handles = k.handles or []
        units = handles if k.kind != "extern" and len(handles) > 1 else [k.name]
        expected |= {(k.name, u) for u in units}
    measured = {(k["kernel"], k["call"]) for k in b["kernels"]}
    assert measured == expected  # every kernel call of the backward graph, and only those
    for k in b["kernels"]:
        assert k["graph"] == bwd.id and k["calls"] == 1 and k["time_s"] > 0, k
    assert {k["kind"] for k in b["kernels"]} >= {"cpp", "extern"}
    for side in ("compiled", "eager"):
        assert 0 < b[side]["wall_min_s"] <= b[side]["wall_s"]
    # the forward's kernels are the forward graph's alone (no backward kernel uncalled there)
    assert {k["graph"] for k in c["kernels"]} == {kinds["forward"].id}


def test_eager_backward_is_attributed_to_the_forward_nodes(profiled_training_trace: Path) -> None:
    t, c, b = _training(profiled_training_trace)
    assert b["eager_nodes_from"] == "sequence_nr"
    g = t.graph(c["eager_graph"])
    dynamo = g.stage_graph(g.find_stage("dynamo"))
    names = {n["node"] for n in b["eager_nodes"]}
    assert names <= {n.name for n in dynamo}
    linears = {n.name for n in dynamo if "linear" in str(n.target)}
    assert len(linears) == 6 and linears <= names  # q, k, v, out, fc1, fc2: addmm's backward
    assert all(n["time_s"] > 0 and n["calls"] >= 1 for n in b["eager_nodes"])
    assert not any(n["node"] in {x.name for x in dynamo if x.op == "placeholder"}
                   for n in b["eager_nodes"])


def test_backward_time_joins_to_lines_and_modules(profiled_training_trace: Path) -> None:
    t, c, b = _training(profiled_training_trace)
    view = profile_view(t)
    assert view is not None and view.notes == []
    bwd_graph = b["graphs"][0]
    final = t.graph(bwd_graph).final_graph()
    kernels = [r for r in view.kernels if r.phase == "bwd"]
    assert len(kernels) == len(b["kernels"]) and all(r.graph == bwd_graph for r in kernels)
    total = sum(r.compiled_s or 0 for r in kernels)
    for table in ("nodes", "lines", "modules"):  # none of the backward's time is lost
        rows = [r for r in view.table(table) if r.phase == "bwd"]
        assert abs(sum(r.compiled_s or 0 for r in rows) - total) < 1e-9, table
    nodes = [r for r in view.nodes if r.phase == "bwd"]
    assert any(r.node for r in nodes), nodes
    assert all(r.graph == bwd_graph and final.get(r.node) is not None for r in nodes
               if r.node)
    src = (EXAMPLES / "transformer_block.py").read_text().splitlines()
    lines = {(r.phase, r.line): r for r in view.lines if r.key.endswith(
        f"transformer_block.py:{r.line}")}
    for text in ("x = x + self.attn(self.ln1(x))", "return self.fc2(self.act(self.fc1(x)))",
                 "q = self.q_proj(x).view(B, T, H, D).transpose(1, 2)"):
        number = next(i + 1 for i, ln in enumerate(src) if ln.strip() == text)
        for phase in ("fwd", "bwd"):
            row = lines[(phase, number)]
            assert row.code == text and row.compiled_s > 0 and row.eager_s > 0, (phase, row)
    modules = {(r.phase, r.key) for r in view.modules}
    assert {("bwd", "blocks.0.mlp.fc1"), ("bwd", "blocks.0.attn.q_proj")} <= modules
    back = view.totals["backward"]
    assert back["compiled_wall_s"] == b["compiled"]["wall_s"] > 0
    assert back["eager_wall_s"] == b["eager"]["wall_s"] > 0
    assert back["extern_s"] > 0 and back["generated_s"] > 0
    assert abs(back["generated_share"] + back["extern_share"] + back["overhead_share"] - 1) < 1e-3
    assert view.totals["compiled_wall_s"] == c["compiled"]["wall_s"]  # the forward's, alone


def test_info_shows_the_backward(profiled_training_trace: Path) -> None:
    s = trace_summary(Trace(profiled_training_trace))
    p = s["profile"]
    assert p["totals"]["backward"]["compiled_wall_s"] > 0
    view = profile_view(Trace(profiled_training_trace))
    assert view is not None
    for table in ("kernels", "nodes", "lines", "modules"):  # the top 20 rows, with their phase
        assert p[table] == [r.as_json() for r in view.table(table)[:20]]
        assert {r["phase"] for r in p[table]} <= {"fwd", "bwd"}, table
    console = Console(file=io.StringIO(), width=200, record=True, color_system=None)
    render_summary(s, console)
    text = console.export_text()
    assert "backward: compiled " in text and "\\n" not in text
    assert "Dynamo's guard checks and argument collection" in text  # what is not measured
    header = next(ln for ln in text.splitlines() if "source line" in ln)
    assert header.split() == ["source", "line", "phase", "compiled", "eager"]
    assert any(" bwd " in ln for ln in text.splitlines() if "transformer_block.py:" in ln)


def test_a_backward_that_could_not_be_profiled_is_a_note(profiled_training_trace: Path,
                                                         copy_trace) -> None:
    path = copy_trace(profiled_training_trace)
    data = _profile(path)
    (c,) = data["compiles"].values()
    del c["backward"]
    c["note"] = "the backward graph was not profiled: it failed: RuntimeError: boom"
    (path / "profile.json").write_text(json.dumps(data))
    view = profile_view(Trace(path))
    assert view is not None and "backward" not in view.totals
    assert all(r.phase == "fwd" for r in view.lines + view.kernels)
    assert view.notes == ["0/0: the backward graph was not profiled: it failed: RuntimeError: boom"]
    (c,) = _profile(profiled_training_trace)["compiles"].values()  # the real one says nothing
    assert "note" not in c


def test_perfetto_lays_the_backward_after_the_forward(profiled_training_trace: Path) -> None:
    from tuidebug.trace.queries.perfetto import chrome_trace

    spans = _check_trace_events(chrome_trace(Trace(profiled_training_trace)))
    calls = {e["name"]: e for e in spans if e["cat"] == "call"}
    fwd, bwd = calls["compiled call 0/0"], calls["compiled backward 0/0"]
    assert bwd["ts"] == fwd["ts"] + fwd["dur"] and bwd["pid"] == fwd["pid"]
    (c,) = _profile(profiled_training_trace)["compiles"].values()
    inside = [e for e in spans if e["pid"] == bwd["pid"] and e["cat"] != "call"
              and bwd["ts"] <= e["ts"] < bwd["ts"] + bwd["dur"]]
    assert sorted(e["name"] for e in inside) == sorted(k["call"] for k in c["backward"]["kernels"])
    eager = calls["eager backward 0/0"]
    assert eager["ts"] == calls["eager call 0/0"]["ts"] + calls["eager call 0/0"]["dur"]


def test_diff_matches_backward_rows_with_backward_rows(profiled_training_trace: Path,
                                                      copy_trace) -> None:
    from tuidebug.trace.diff import diff_traces

    slower = copy_trace(profiled_training_trace, "slower")
    data = _profile(slower)
    (c,) = data["compiles"].values()
    k = next(k for k in c["backward"]["kernels"] if k["kind"] == "cpp")
    k["time_s"] += 1e-3
    (slower / "profile.json").write_text(json.dumps(data))
    p = diff_traces(profiled_training_trace, slower, code=False)["profile"]
    top = p["kernels"][0]
    assert top["phase"] == "bwd" and top["key"].endswith(" (bwd)") and abs(
        top["delta"] - 1e-3) < 1e-9
    assert all(abs(r["delta"]) < 1e-9 for r in p["kernels"][1:])
    assert p["lines"][0]["phase"] == "bwd" and p["lines"][0]["delta"] > 0
    assert all(r["phase"] == "fwd" for r in p["lines"] if not r["key"].endswith(" (bwd)"))


def test_an_extern_call_is_credited_only_with_the_node_it_computes(profiled_trace: Path) -> None:
    from tuidebug.trace.queries.profile import computed_nodes

    t = Trace(profiled_trace)
    seen = 0
    for g in t.graphs:
        final = g.final_graph()
        assert final is not None
        for name, prov in ((g.provenance or {}).get("kernels") or {}).items():
            listed = [str(n) for n in prov.get("fx_nodes") or []]
            if prov.get("kind") != "extern" or not listed:
                continue
            seen += 1
            got = computed_nodes(final, "extern", name, listed)
            op = name.split(":", 1)[0].rsplit(".", 1)[-1]
            assert got and all(final.get(n).short_target == op for n in got), (name, listed, got)
            # provenance lists what feeds the matmul too (the weight's permute): not credited
            assert set(got) < set(listed) or len(listed) == 1, (name, listed)
    assert seen, "the MLP has no extern call"
    view = profile_view(t)
    assert view is not None
    rows = [r for r in view.nodes if r.compiled_s and r.phase == "fwd"]
    assert rows
    finals = {g.id: g.final_graph() for g in t.graphs}
    for r in rows:  # a view launches nothing: no time, unless it is all its kernel computes
        node = finals[r.graph].get(r.node) if finals.get(r.graph) else None
        if node is not None and node.is_view:
            prov = (t.graph(r.graph).provenance or {}).get("kernels", {}).get(r.kernel, {})
            others = [n for n in prov.get("fx_nodes") or []
                      if not finals[r.graph].get(n) or not finals[r.graph].get(n).is_view]
            assert not others, (r.node, r.kernel)
