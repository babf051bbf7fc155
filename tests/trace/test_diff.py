"""Comparing two real traces: config, passes, IR and fusion, kernels with code diffs, times."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, plain, plain_files
from tuidebug.trace.diff import diff_traces, normalize_kernel_name


@pytest.fixture(scope="module")
def mlp_changed(mlp_trace: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mlp recompiled without fusion and without size asserts (one job in the worker)."""
    from tuidebug.compiler.worker import RecompileWorker

    out = tmp_path_factory.mktemp("diff") / "mlp-changed"
    with RecompileWorker(warmup=False, timeout=900) as w:
        job = w.submit(mlp_trace, ["max_fusion_size=1", "size_asserts=false"], out)
        assert job.wait(900) and job.state == "ok", (job.error, w.log_tail())
    return out


def test_normalize_kernel_name() -> None:
    assert normalize_kernel_name("cpp_fused_add_mul_0") == "cpp_fused_add_mul"
    assert normalize_kernel_name("triton_poi_fused_relu_12") == "triton_poi_fused_relu"
    assert normalize_kernel_name("extern_kernels.addmm:3") == "extern_kernels.addmm"


def test_diff_shows_config_and_kernel_changes(mlp_trace: Path, mlp_changed: Path) -> None:
    d = diff_traces(mlp_trace, mlp_changed)
    json.dumps(d)  # JSON-able as a whole
    user = {c["name"]: (c["a"], c["b"]) for c in d["config"]["changed"] if not c["capture"]}
    # (a committed trace made in another checkout differs in install paths, listed apart)
    assert user == {"max_fusion_size": (64, 1), "size_asserts": (True, False)}
    assert {o["name"] for o in d["config"]["overrides"]} == {"max_fusion_size", "size_asserts"}

    (g,) = d["graphs"]
    assert g["in"] == "both" and g["status"] == {"a": "ok", "b": "ok"}
    changed = [k for k in g["kernels"] if k["status"] == "changed"]
    assert changed, g["kernels"]
    assert changed[0]["diff"].startswith(f"--- a/{changed[0]['a']}")
    assert changed[0]["diff_stats"]["added"] + changed[0]["diff_stats"]["removed"] > 0
    post = g["ir"]["post"]
    assert post["b"]["kernels"] > post["a"]["kernels"]
    assert g["ir"]["groups_only_a"] and not g["ir"]["groups_only_b"]
    assert g["fusion"]["fused"]["a"] > g["fusion"]["fused"]["b"] == 0
    assert any("exceeds max fusion" in r["reason"] for r in g["fusion"]["reasons"])
    asserts = g["wrapper"]["markers"]["assert_size_stride"]
    assert asserts["a"] > 0 and asserts["b"] == 0
    assert "assert_size_stride" in g["wrapper"]["diff"]
    assert d["compiles"][0]["compile_time_s"]["a"] > 0 and d["compiles"][0]["compile_time_s"]["b"] > 0
    assert d["runtime"][0]["close"] == {"a": True, "b": True}
    lines = "\n".join(d["lines"])
    assert "config max_fusion_size: 64 → 1" in lines
    assert "wrapper assert_size_stride" in lines


def test_a_trace_against_itself_has_no_difference(mlp_trace: Path) -> None:
    d = diff_traces(mlp_trace, mlp_trace)
    assert all(line.startswith("compile time") for line in d["lines"]), d["lines"]
    assert {k["status"] for g in d["graphs"] for k in g["kernels"]} == {"unchanged"}
    assert not d["config"]["changed"] and not any(g["passes"] for g in d["graphs"])


def test_renumbered_kernels_are_the_same_kernel(mlp_trace: Path, copy_trace) -> None:
    t = copy_trace(mlp_trace, "renumbered")
    gdir = next((t / "graphs").iterdir())
    index = json.loads((gdir / "code" / "kernels.json").read_text())
    for k in index["kernels"]:
        if k["kind"] != "extern":
            old = gdir / k["file"]
            k["name"] = k["name"].rsplit("_", 1)[0] + "_7"
            k["file"] = f"code/{k['name']}{old.suffix}"
            old.rename(gdir / k["file"])
    (gdir / "code" / "kernels.json").write_text(json.dumps(index))
    d = diff_traces(mlp_trace, t)
    statuses = {k["status"] for g in d["graphs"] for k in g["kernels"]}
    assert statuses == {"unchanged"}, d["graphs"][0]["kernels"]


def test_kernels_are_counted_as_info_counts_them(mlp_trace: Path, copy_trace) -> None:
    """A graph without its kernel index (``code/kernels.json``: an older or imported trace)
    has meta.json's count: the diff counted 0 kernels there, where info and the overview said
    meta.json's number (one count: ``provenance.generated_kernels``)."""
    from tuidebug.trace.format.reader import Trace
    from tuidebug.trace.queries.provenance import generated_kernels

    t = copy_trace(mlp_trace, "no-index")
    gdirs = sorted(p for p in (t / "graphs").iterdir() if (p / "code" / "kernels.json").exists())
    assert gdirs
    for gdir in gdirs:
        (gdir / "code" / "kernels.json").unlink()
    d = diff_traces(mlp_trace, t)
    counted = {g.id: generated_kernels(g) for g in Trace(t).graphs}
    assert any(counted.values()), counted  # meta.json counts them
    for g in d["graphs"]:
        assert g["kernel_count"]["b"] == counted[g["id"]], (g["id"], g["kernel_count"])
    assert d["summary"]["kernels"]["b"] == sum(n or 0 for n in counted.values()), d["summary"]


def test_a_trace_made_in_another_venv_differs_only_by_install_paths(mlp_trace: Path,
                                                                    copy_trace) -> None:
    """Two machines, or two venvs, give torch's own install paths (cutlass_dir) different
    prefixes: that is where torch lives, not a flag the user changed (CI saw it as one)."""
    t = copy_trace(mlp_trace, "other-venv")
    cfg = json.loads((t / "config.json").read_text())
    moved = {k for k, v in cfg["values"].items()
             if isinstance(v, str) and "/site-packages/" in v}
    assert moved, "torch's config has no install path (cutlass_dir) to move"
    for k in moved:
        cfg["values"][k] = "/elsewhere/venv/lib/python3.11/site-packages/" + \
            cfg["values"][k].split("/site-packages/", 1)[1]
    cfg["values"]["max_fusion_size"] = 7  # a real change beside them stays one
    (t / "config.json").write_text(json.dumps(cfg))
    d = diff_traces(mlp_trace, t)
    assert [c["name"] for c in d["config"]["changed"]] == ["max_fusion_size"]
    assert {c["name"] for c in d["config"]["install_paths"]} == moved
    assert any(line.startswith("config paths that differ only by where torch is installed")
               for line in d["lines"]), d["lines"]
    # a path the user set (--set) is the user's change, wherever it points
    name = sorted(moved)[0]
    m = json.loads((t / "manifest.json").read_text())
    m["config_overrides"] = {name: cfg["values"][name]}
    (t / "manifest.json").write_text(json.dumps(m))
    d = diff_traces(mlp_trace, t)
    assert name in [c["name"] for c in d["config"]["changed"]], d["config"]


def test_damaged_trace_still_compares(mlp_trace: Path, copy_trace) -> None:
    t = copy_trace(mlp_trace, "damaged")
    gdir = next((t / "graphs").iterdir())
    (gdir / "ir_post_fusion.json").write_text("{not json")
    (t / "config.json").unlink()
    d = diff_traces(mlp_trace, t)
    assert d["config"]["note"] and "config.json missing in B" in d["config"]["note"]
    assert d["graphs"][0]["ir"]["post"]["b"] is None
    assert any("ir_post_fusion.json" in p for p in d["problems"]["b"])


def test_cli_diff_json_and_rich(mlp_trace: Path, mlp_changed: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="120")
    p = subprocess.run([sys.executable, "-m", "tuidebug.cli", "diff", str(mlp_trace),
                        str(mlp_changed), "--json"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["format"] == "tuidebug.diff/1"
    p = subprocess.run([sys.executable, "-m", "tuidebug.cli", "diff", str(mlp_trace),
                        str(mlp_changed)], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    for text in ("what changed", "max_fusion_size", "fusion rejections by reason", "--- a/"):
        assert text in p.stdout, text
    p = subprocess.run([sys.executable, "-m", "tuidebug.cli", "diff", str(mlp_trace),
                        str(mlp_trace.parent / "nope")], env=env, capture_output=True, text=True,
                       timeout=120)
    # diff opens what it is given through the one door (a trace, an archive, a log): a missing
    # path is said as the path typed
    assert p.returncode == 2, p.stderr
    assert f"no such file or directory: {mlp_trace.parent / 'nope'}" in p.stderr, p.stderr


def test_diff_is_torch_free(mlp_trace: Path, mlp_changed: Path) -> None:
    code = (f"import sys; from tuidebug.trace.diff import diff_traces; "
            f"diff_traces({str(mlp_trace)!r}, {str(mlp_changed)!r}); "
            f"print('torch' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                       capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() == "False", p.stderr


def _rendered(d: dict, **kw) -> str:
    from rich.console import Console

    from tuidebug.viewers.diff_view import render_diff

    console = Console(record=True, width=200)
    render_diff(d, console, **kw)
    return console.export_text()


def test_diff_shows_compile_and_run_time_per_kernel(mlp_trace: Path, mlp_changed: Path) -> None:
    d = diff_traces(mlp_trace, mlp_changed)
    (g,) = d["graphs"]
    for k in g["kernels"]:
        for side in ("a", "b"):
            assert k["compiled"][side] in ("built", "cached"), k
            assert k["run_s"][side] > 0 and k["calls"][side] >= 1, k
        assert k["run_ratio"] == pytest.approx(k["run_s"]["b"] / k["run_s"]["a"], rel=1e-3)
    s = d["summary"]
    assert s["kernel_run_s"]["a"] == pytest.approx(
        sum(k["run_s"]["a"] * k["calls"]["a"] for k in g["kernels"]), rel=1e-3)
    # the kernels whose code changed, each side with its spread (two processes: no ratio)
    assert any(line.startswith("run time of the") and "fastest" in line
               for line in d["lines"]), d["lines"]
    # A was traced in a fresh process, B compiled in the warm worker: not like with like
    assert any(line.startswith("compile time not compared: A compiled in a fresh process")
               for line in d["lines"]), d["lines"]
    text = _rendered(d, code=False)
    assert "run per call A → B" in text and "compile A → B" in text
    from tuidebug.trace.diff.findings import runs_apart

    k = g["kernels"][0]
    assert k["status"] == "changed"
    # timed in two processes: a ratio only where the two sides' fastest-to-median ranges part
    assert (f"×{k['run_ratio']:.2f}" if runs_apart(k) else "inside the noise") in text


def test_unchanged_kernels_are_listed_with_their_times(mlp_trace: Path) -> None:
    d = diff_traces(mlp_trace, mlp_trace)
    (k, *_) = d["graphs"][0]["kernels"]
    assert k["status"] == "unchanged" and k["run_ratio"] == 1.0
    text = _rendered(d, code=False)
    assert "unchanged" in text and k["a"][:20] in text and "×1.00" in text


def test_a_freshly_traced_side_is_not_called_recompiled(mlp_trace: Path, mlp_changed: Path) -> None:
    d = diff_traces(mlp_trace, mlp_changed)
    assert "recompiled with max_fusion_size=1" in _rendered(d, code=False)
    d["b"]["recompile"] = {"from": None, "sets": {"size_asserts": True}}  # a flag demo's trace A
    text = _rendered(d, code=False)
    assert "recompiled with" not in text
    assert "traced in the recompile worker with size_asserts=true" in text


def test_graphs_of_one_side_only_are_named_not_counted_as_pass_changes(
        mlp_trace: Path, transformer_trace: Path) -> None:
    """Two ranks, one of which recompiled: the graph only one side has was listed as a Python
    list (``['0_1-inference']``) and each pass it ran counted as "a pass with a different
    effect" (decompose_map_to_while_loop, … : passes that changed nothing)."""
    from tuidebug.trace.format.reader import Trace

    lines = diff_traces(mlp_trace, transformer_trace)["lines"]
    only = next(ln for ln in lines if ln.startswith("graphs only in A: "))
    a = ", ".join(g.id for g in Trace(mlp_trace).graphs)
    assert only.startswith(f"graphs only in A: {a}; only in B: "), only
    assert all(g.id in only for g in Trace(transformer_trace).graphs)
    assert "[" not in only and "'" not in only, only
    assert not any(ln.startswith("passes with a different effect") for ln in lines), lines


@pytest.fixture(scope="module")
def mlp_same(mlp_trace: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mlp recompiled with a flag that changes nothing here (max_fusion_size 64 → 63)."""
    from tuidebug.compiler.worker import RecompileWorker

    out = tmp_path_factory.mktemp("diff") / "mlp-same"
    with RecompileWorker(warmup=False, timeout=900) as w:
        job = w.submit(mlp_trace, ["max_fusion_size=63"], out)
        assert job.wait(900) and job.state == "ok", (job.error, w.log_tail())
    return out


def test_identical_code_is_never_reported_as_changed(mlp_trace: Path, mlp_same: Path) -> None:
    d = diff_traces(mlp_trace, mlp_same)
    kernels = [k for g in d["graphs"] for k in g["kernels"]]
    assert kernels and all(k["status"] == "unchanged" for k in kernels), kernels
    for k in kernels:  # their run times were measured (and may differ: two processes)
        assert k["run_s"]["a"] > 0 and k["run_s"]["b"] > 0
    lines = d["lines"]
    assert not any("run time" in ln for ln in lines), lines
    assert not any(ln.startswith("kernels:") for ln in lines), lines
    assert not any(ln.startswith("compile time:") for ln in lines), lines  # cold vs warm


def test_the_same_compile_timed_twice_is_no_change(mlp_trace: Path, copy_trace) -> None:
    """Two traces of the same script: the same graphs and kernels, each compiled once in a
    fresh process. Their compile times differ by the machine's moment (5.89 s → 8.02 s on the
    busy CPU): said to be no change, not listed as what changed."""
    t = plain_files(copy_trace(mlp_trace, "slower"))  # its files edited as text
    touched = 0
    for f in sorted((t / "compiles").glob("*.json")):
        c = json.loads(f.read_text())
        m = c.get("metrics") or {}
        if isinstance(m.get("entire_frame_compile_time_s"), (int, float)):
            m["entire_frame_compile_time_s"] *= 1.4
            f.write_text(json.dumps(c))
            touched += 1
    assert touched
    d = diff_traces(mlp_trace, t)
    (line,) = [ln for ln in d["lines"] if ln.startswith("compile time")]
    assert d["summary"]["compile_time_s"]["b"] > d["summary"]["compile_time_s"]["a"]
    assert line.endswith(": no change (the same graphs and kernels, compiled once each: the "
                         "machine's moment, not a difference)"), line
    # a kernel that changed makes the compile time a finding again (test above: mlp_changed)


def _kernels_compiled(root: Path, how: str | None, unrecorded: int = 0) -> int:
    """Each kernel of ``root``'s timings said to have been ``how`` ("built", "cached"; None:
    not recorded, as an imported trace has it), the first ``unrecorded`` not recorded; how
    many."""
    n = 0
    for f in sorted(root.glob("graphs/*/code/timings.json")):
        t = json.loads(f.read_text())
        for k in t["kernels"].values():
            if how is None or n < unrecorded:
                k.pop("compile", None)
                k["compile_s"] = None
            else:
                k["compile"], k["compile_s"] = how, (2.5 if how == "built" else None)
            n += 1
        f.write_text(json.dumps(t))
    return n


def _max_autotune_compile_line(a: Path, b: Path, n: int) -> str:
    """B given max_autotune and ``n`` builds' more compile time; diff's compile time line."""
    conf = json.loads((b / "config.json").read_text())
    conf.setdefault("values", {})["max_autotune"] = True
    conf.setdefault("changed", {})["max_autotune"] = {"value": True, "default": False}
    (b / "config.json").write_text(json.dumps(conf))
    for f in sorted((b / "compiles").glob("*.json")):
        c = json.loads(f.read_text())
        m = c.get("metrics") or {}
        if isinstance(m.get("entire_frame_compile_time_s"), (int, float)):
            m["entire_frame_compile_time_s"] += 2.5 * n
            f.write_text(json.dumps(c))
    d = diff_traces(a, b)
    assert any(ln.startswith("config max_autotune") for ln in d["lines"]), d["lines"]
    (line,) = [ln for ln in d["lines"] if ln.startswith("compile time")]
    return line


def test_a_compile_time_paid_in_kernel_builds_says_so(mlp_trace: Path, copy_trace) -> None:
    """ViT traced with mode="max-autotune-no-cudagraphs", then without: the same kernels (CPU:
    nothing to autotune), the second trace's taken from Inductor's kernel cache the first had
    filled. ``diff`` listed "compile time: 8.23s → 18.45s" beside the config change, read as
    max-autotune's cost: B had built 7 C++ kernels (3 s each) that A took from the cache."""
    a = plain_files(copy_trace(mlp_trace, "a"))
    b = plain_files(copy_trace(mlp_trace, "b"))
    n = _kernels_compiled(a, "cached")
    assert n and _kernels_compiled(b, "built") == n
    line = _max_autotune_compile_line(a, b, n)
    assert line.endswith(f", not like for like (kernels built, the others taken from Inductor's "
                         f"kernel cache: A 0 of {n}, B {n} of {n}; a build costs seconds)"), line


@pytest.mark.parametrize("how_a,how_b,unrecorded", [
    ("cached", "cached", 1), ("built", "built", 0), (None, "built", 0), ("cached", None, 0)])
def test_kernel_builds_alike_or_unrecorded_say_nothing(mlp_trace: Path, copy_trace, how_a: str | None,
                                                        how_b: str | None, unrecorded: int) -> None:
    """Review: the line compared how many kernels each side took FROM the cache, over the
    kernels each side recorded: A 10 of 10 cached and B 12 of 12 cached (both built nothing)
    read "not like for like", and an imported A (no ``compile`` recorded) against a traced B
    read "A 0 of 0, B 5 of 10". Both sides building alike (A taking one kernel fewer from the
    cache only because it did not record it), or one not recording how, says nothing about
    builds."""
    a = plain_files(copy_trace(mlp_trace, "a"))
    b = plain_files(copy_trace(mlp_trace, "b"))
    n = _kernels_compiled(a, how_a, unrecorded)
    assert n and _kernels_compiled(b, how_b) == n
    line = _max_autotune_compile_line(a, b, n)
    assert line.startswith("compile time: ") and "like for like" not in line, line


def test_op_counts_without_building_the_graph(transformer4_trace: Path, mlp_trace: Path,
                                              copy_trace) -> None:
    """``diff`` counts the last snapshot's ops from its nodes, not from a built graph (issue
    30): the same counts as the graph's compute nodes on every graph of two real traces; a
    snapshot whose nodes are not of the snapshot shape is counted from the graph its reading
    builds (what is wrong reported there), as before."""
    from tuidebug.trace.format.reader import Trace

    counted = 0
    for root in (transformer4_trace, mlp_trace):
        for g in Trace(root).graphs:
            fresh = g.final_op_counts()  # before the graph is read
            graph = g.final_graph()
            assert graph is not None
            assert fresh == collections.Counter(n.target for n in graph.compute_nodes())
            assert g.final_op_counts() == fresh  # from the graph now read
            counted += sum(fresh.values())
    assert counted > 50
    t = copy_trace(mlp_trace, "odd-op")
    g = Trace(t).graphs[0]
    path = plain(g.dir / g.snapshots()[-1].file)
    snap = json.loads(path.read_text())
    node = next(n for n in snap["nodes"] if n["op"] == "call_function")
    node["target"] = 7  # not a string: the fast count steps aside
    path.write_text(json.dumps(snap))
    g = Trace(t).graphs[0]
    graph_counts = collections.Counter(n.target for n in g.final_graph().compute_nodes())
    assert graph_counts[""] == 1  # the reading drops a target of the wrong type
    assert Trace(t).graphs[0].final_op_counts() == graph_counts


def test_files_held_alike_are_read_once_and_what_is_kept_never_leaks(mlp_trace: Path,
                                                                     copy_trace) -> None:
    """A comparison reads a file both traces hold in the same bytes once, and keeps what it
    works out from one graph (its IR and fusion decisions counted, its wrapper folded, its
    kernels' code) for the next comparison of that open trace (issue 30: the TUI compares its
    trace with one trace after another). A copy with one kernel's code (one digit: the same
    size), the wrapper, the fusion decisions and the post-fusion IR edited is compared exactly
    as a fresh reading of both compares it, after and before comparing the open trace with an
    unedited copy; each edit is found."""
    from tuidebug.trace.format.reader import Trace

    same = copy_trace(mlp_trace, "same")
    edited = plain_files(copy_trace(mlp_trace, "edited"))
    gdir = next((edited / "graphs").iterdir())
    index = json.loads((gdir / "code" / "kernels.json").read_text())
    kernel = next(k for k in index["kernels"] if k["kind"] != "extern")
    code = gdir / kernel["file"]
    source = code.read_text()
    assert "static_cast<float>(0.5)" in source
    code.write_text(source.replace("static_cast<float>(0.5)", "static_cast<float>(0.6)", 1))
    assert code.stat().st_size == len(source.encode())  # the same size: its bytes compared
    wrapper = gdir / "code" / "wrapper.py"
    text = wrapper.read_text()
    call = next(ln for ln in text.splitlines() if "assert_size_stride(arg" in ln)
    wrapper.write_text(text.replace(call, call + "\n" + call, 1))
    fusion = gdir / "fusion.jsonl"
    records = [json.loads(ln) for ln in fusion.read_text().splitlines()]
    assert records[0]["action"] == "rejected"
    records[0]["action"] = "fused"
    fusion.write_text("".join(json.dumps(r) + "\n" for r in records))
    ir = gdir / "ir_post_fusion.json"
    post = json.loads(ir.read_text())
    post["nodes"] = post["nodes"][1:]
    ir.write_text(json.dumps(post))

    def canon(d: dict) -> str:
        return json.dumps({k: v for k, v in d.items() if k != "b"}, sort_keys=True)

    opened = Trace(mlp_trace)
    unedited = diff_traces(opened, same)
    assert not [ln for ln in unedited["lines"] if not ln.startswith("compile time")]
    compared = diff_traces(opened, edited)
    assert canon(compared) == canon(diff_traces(Trace(mlp_trace), edited))
    (g,) = compared["graphs"]
    (changed,) = [k for k in g["kernels"] if k["status"] == "changed"]
    assert changed["a"] == kernel["name"]
    assert changed["diff_stats"] == {"added": 1, "removed": 1}
    asserts = g["wrapper"]["markers"]["assert_size_stride"]
    assert asserts["b"] == asserts["a"] + 1 and "assert_size_stride" in g["wrapper"]["diff"]
    assert g["fusion"]["fused"]["b"] == g["fusion"]["fused"]["a"] + 1
    assert g["fusion"]["rejected"]["b"] == g["fusion"]["rejected"]["a"] - 1
    assert g["ir"]["post"]["b"]["nodes"] == g["ir"]["post"]["a"]["nodes"] - 1
    assert canon(diff_traces(opened, same)) == canon(unedited)  # nothing of the edited kept


def _attempts_trace(root: Path, final: str, restarted: list[str]) -> Path:
    """A trace of one compile whose graph was made by attempt ``final`` (``0/0_2``), after the
    ``restarted`` attempts (a graph break, then a float tensorified), plus its resume."""
    from tuidebug.trace.format.writer import TraceWriter

    w = TraceWriter(root, command=["tuidebug", "trace", "step.py"])
    for cid in [*restarted, final, "1/0"]:
        gid = f"{cid.replace('/', '_')}-inference"
        w.add_graph(gid, kind="inference", compile_id=cid)
        status = "restarted" if cid in restarted else "ok"
        w.graph(gid).write_meta(kind="inference", compile_id=cid, status=status, stages=[],
                                phase_starts={}, kernels=0, fusion={})
        w.set_graph_status(gid, status)
        w.write_compile(cid, {"graphs": [gid], "metrics": {"co_name": "step"}})
        w.add_compile(cid, {"graphs": [gid]})
    w.finish("ok")
    return root


def test_the_graphs_of_one_compile_pair_up_whichever_attempt_made_them(tmp_path: Path) -> None:
    """A tiny Mistral step traced, then re-run with capture_scalar_outputs: Dynamo made compile
    0/0's graph in attempt 0/0_2 in A, in 0/0_1 in B. Paired by graph id, A's abandoned
    0_0_1 met B's graph ("kernels: 0 → 10 added, 10 removed", passes "with a different effect"
    that never ran in A's) and each final graph was "only in" one trace."""
    a = _attempts_trace(tmp_path / "a", "0/0_2", ["0/0", "0/0_1"])
    b = _attempts_trace(tmp_path / "b", "0/0_1", ["0/0"])
    d = diff_traces(a, b)
    both = {(g["id"], g.get("id_b")) for g in d["graphs"] if g["in"] == "both"}
    assert ("0_0_2-inference", "0_0_1-inference") in both, d["graphs"]
    assert ("1_0-inference", None) in both
    assert not d["summary"]["graphs_only_b"], d["summary"]
    assert not any(ln.startswith("graphs only in") for ln in d["lines"]), d["lines"]


def test_graphs_of_no_known_compile_are_not_paired_as_attempts(tmp_path: Path) -> None:
    """Graphs whose compile is not known ("?", an imported log that names none) are not one
    compile's attempts: A's ``x-inference`` and B's ``y-inference`` stay apart (each only in its
    trace), where pairing by "compile without its attempt" made them another attempt."""
    from tuidebug.trace.format.writer import TraceWriter

    for side, gid in (("a", "x-inference"), ("b", "y-inference")):
        w = TraceWriter(tmp_path / side, command=["tuidebug", "trace", "step.py"])
        w.add_graph(gid, kind="inference", compile_id="?")
        w.graph(gid).write_meta(kind="inference", compile_id="?", status="ok", stages=[],
                                phase_starts={}, kernels=0, fusion={})
        w.set_graph_status(gid, "ok")
        w.finish("ok")
    d = diff_traces(tmp_path / "a", tmp_path / "b")
    where = {g["id"]: g["in"] for g in d["graphs"]}
    assert where == {"x-inference": "a", "y-inference": "b"}, d["graphs"]


def test_kernels_timed_once_are_not_compared() -> None:
    """Two traces of a tiny Mixtral made on a loaded machine (load 15 on 2 cores): each kernel
    was run once (the timing budget spent), one run preempted (247 ms for a kernel of a few
    µs), and diff said 'run time of the 39 generated kernel(s) whose code changed: 368 ms
    (fastest 368 ms) → 42.0 µs (fastest 31.3 µs)' and would give the kernel a ratio: one
    timing has no spread, so nothing is compared."""
    from tuidebug.trace.diff.findings import _kernel_time_lines, runs_apart

    def kernel(a: float, b: float, spread: float = 0.0) -> dict:
        return {"status": "changed", "b": "cpp_fused_mul_silu_0",
                "run_s": {"a": a + spread, "b": b + spread},
                "run_min_s": {"a": a, "b": b}, "calls": {"a": 1, "b": 1},
                "run_ratio": (b + spread) / (a + spread)}

    once = kernel(0.247, 3.1e-5)
    assert not runs_apart(once)
    d = {"graphs": [{"kernels": [once]}], "a": {}, "b": {}}
    (line,) = _kernel_time_lines(d, {})
    assert line.endswith("not compared (a kernel timed once has no spread)"), line
    # timed several times, the ranges apart: compared as before
    many = kernel(0.247, 3.1e-5, 1e-6)
    assert runs_apart(many)
    (line,) = [ln for ln in _kernel_time_lines({"graphs": [{"kernels": [many]}], "a": {},
                                                "b": {}}, {}) if ln.startswith("run time")]
    assert line.endswith("(timed in two processes, not side by side)"), line


def test_timed_once_is_the_count_the_trace_records() -> None:
    """diff decided 'timed once' from fastest == median: a kernel timed five times on a coarse
    clock (each run the same) had no spread, and one timed once whose median was written apart
    from its fastest was compared. The trace's counts decide (``timed``: calls × runs)."""
    from tuidebug.trace.diff.findings import _kernel_time_lines, runs_apart, timed_once

    def kernel(a: float, b: float, timed: dict, spread: float = 0.0) -> dict:
        return {"status": "changed", "b": "cpp_fused_mul_silu_0",
                "run_s": {"a": a + spread, "b": b + spread},
                "run_min_s": {"a": a, "b": b}, "calls": {"a": 1, "b": 1}, "timed": timed,
                "run_ratio": (b + spread) / (a + spread)}

    steady = kernel(2e-5, 4e-5, {"a": 5, "b": 5})  # five runs each, each the same time
    assert not timed_once(steady, "a") and runs_apart(steady)
    (line,) = [ln for ln in _kernel_time_lines({"graphs": [{"kernels": [steady]}]}, {})
               if ln.startswith("run time")]
    assert line.endswith("(timed in two processes, not side by side)"), line
    single = kernel(2e-5, 4e-5, {"a": 1, "b": 5}, spread=1e-7)
    assert timed_once(single, "a") and not runs_apart(single)
    (line,) = _kernel_time_lines({"graphs": [{"kernels": [single]}]}, {})
    assert line.endswith("not compared (a kernel timed once has no spread)"), line
    older = kernel(2e-5, 4e-5, {"a": None, "b": None})  # no count recorded: as before
    assert timed_once(older, "a") and not runs_apart(older)


def test_the_diff_entry_counts_the_timed_calls(mlp_trace: Path, copy_trace) -> None:
    from tuidebug.trace.diff.kernels import _kernel_times

    t = plain_files(copy_trace(mlp_trace, "timed"))
    runs = {f.parent.parent.name: json.loads(f.read_text())
            for f in t.glob("graphs/*/code/timings.json")}
    d = diff_traces(mlp_trace, t)
    seen = 0
    for g in d["graphs"]:
        recorded = runs.get(g["id"])
        for k in g["kernels"]:
            own = (recorded or {}).get("kernels", {}).get(k["a"])
            if own is not None and isinstance(own.get("calls"), int):
                assert k["timed"]["a"] == k["timed"]["b"] == own["calls"] * recorded["run"]["runs"]
                seen += 1
    assert seen, runs
    told = _kernel_times({"run_s": 1e-5, "run_min_s": 1e-5, "calls": 3},
                         {"run_s": 1e-5, "run_min_s": 1e-5, "calls": 2}, (5, None))
    assert told["timed"] == {"a": 15, "b": None}, told
