"""Collectives per compiled graph, DDP buckets, and the divergence kinds between ranks, on real
torchrun jobs (gloo, CPU, 2 ranks) and on copies of their rank traces changed on disk."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import plain_files
from tests.distributed.test_ranks import _cli, _info, _line_of
from tuidebug.trace.queries.collectives import issued
from tuidebug.trace.jobs.ranks import analyze_job
from tuidebug.trace.format.reader import Trace


def test_collectives_of_a_graph_in_program_order(same_job) -> None:
    """The all_reduce and all_gather_into_tensor traced into the compiled graph, with their
    group, sizes, waits, kernel and the user's line; identical on both ranks (no divergence)."""
    job, proc = same_job
    assert proc.returncode == 0, proc.stderr
    for r in (0, 1):
        g = Trace(job / f"rank_{r}").graph("0_0-inference")
        data = g.collectives
        assert data["rank"] == r and not g.trace.problems
        got = issued(g)
        assert [c["op"] for c in got] == ["all_reduce_", "all_gather_into_tensor"]
        ar, ag = got
        assert ar["group_ranks"] == [0, 1] and data["groups"][ar["group"]]["size"] == 2
        assert data["groups"][ar["group"]]["backend"] == "gloo"
        assert ar["args"] == {"reduce_op": "sum"} and ag["args"] == {"group_size": 2}
        assert [i["shape"] for i in ar["inputs"]] == [[4]] and ar["bytes"] == 16
        assert ar["inputs"][0]["dtype"] == "float32"
        assert [o["shape"] for o in ag["outputs"]] == [[8]]
        assert ar["user_source"]["line"] == _line_of("dist.all_reduce(y)")
        assert ag["user_source"]["line"] == _line_of("dist.all_gather_into_tensor(w, y)")
        assert ar["source"]["file"].endswith("_functional_collectives.py")  # the innermost frame
        kernels = {k.name: k for k in g.kernels}
        assert kernels[ar["kernel"]].wrapper_line == ar["wrapper_line"]
        assert ar["wrapper_line"] < ag["wrapper_line"]
        waits = [c for c in data["collectives"] if c["op"] == "wait_tensor"]
        assert [w["waits_for"] for w in waits] == [ar["node"], ag["node"]]
        assert [c["index"] for c in data["collectives"]] == [0, 1, 2, 3]
        assert data["reordered"] is False and data["issued_by_wrapper"] is True
    assert _info(job)["divergence"] is None
    (graph,) = _info(job / "rank_0")["graphs"]
    assert [(c["op"], c["tensors"], c["line"].rsplit("/", 1)[-1]) for c in graph["collectives"]] \
        == [("all_reduce", ["float32[4]"], f"rank_job.py:{_line_of('dist.all_reduce(y)')}"),
            ("all_gather_into_tensor", ["float32[4]"],
             f"rank_job.py:{_line_of('dist.all_gather_into_tensor(w, y)')}")]
    text = " ".join(_cli("info", str(job / "rank_1")).stdout.split())
    assert "collective #0: all_reduce group 0 [0, 1] float32[4] (reduce_op=sum)" in text
    assert "collective #1: all_gather_into_tensor group 0 [0, 1] float32[4] (group_size=2)" in text


def test_collective_order_differs_between_two_groups(collectives_job) -> None:
    """Rank 1 all-reduces on the second group first: the job completes (gloo), and the first
    divergence names the first differing collective on each side and the line that issued it —
    as an order across groups (each group's own sequence is the same on both ranks), not as a
    different sequence."""
    job, proc = collectives_job
    assert proc.returncode == 0, proc.stderr
    d = _info(job)["divergence"]
    assert d["kind"] == "collectives", d
    assert d["reference_ranks"] == [0] and d["diverging_ranks"] == [1]
    assert d["position"] == 0 and d["counts"] == [2, 2]
    assert d["differs_in"] == ["order across groups"], d
    assert "each group's own sequence is the same on both ranks" in d["note"]
    ref, odd = d["reference"], d["diverging"]
    assert ref["op"] == odd["op"] == "all_reduce"
    assert ref["tensors"] == ["float32[4]"] and odd["tensors"] == ["float32[6]"]
    assert ref["group"] != odd["group"] and ref["group_ranks"] == odd["group_ranks"] == [0, 1]
    line = _line_of("dist.all_reduce(y, group=second)  # rank 1 issues this one first")
    assert d["line"].endswith(f"rank_job.py:{line}") and odd["line"] == d["line"]
    assert ref["line"].endswith(f"rank_job.py:{_line_of('dist.all_reduce(x, group=first)')}")
    text = " ".join(_cli("info", str(job)).stdout.split())  # as wrapped at any width
    assert "collective order across groups differs at collective #0" in text, text
    assert "collective sequence differs" not in text
    assert "float32[6]" in text and f"rank_job.py:{line}" in text


def test_ddp_buckets_are_graphs_of_their_own(collectives_job) -> None:
    """DDPOptimizer splits the model at its 3 buckets (1 MB cap, 1 MiB layers): 3 forward and 3
    backward graphs of one Dynamo compile, each knowing its bucket, identical on both ranks."""
    job, _ = collectives_job
    t = Trace(job / "rank_0")
    ddp = [g for g in t.graphs if g.meta.ddp_bucket]
    cid = ddp[0].compile_id
    assert {g.compile_id for g in ddp} == {cid}
    base = ddp[0].id.split("-")[0]
    for kind in ("forward", "backward"):
        ids = [f"{base}-{kind}", f"{base}-{kind}-2", f"{base}-{kind}-3"]
        buckets = [t.graph(i).meta.ddp_bucket for i in ids]
        assert [b["index"] for b in buckets] == [0, 1, 2]
        assert all(b["buckets"] == 3 for b in buckets)
        assert [b["bytes"] for b in buckets] == [(512 * 512 + 512) * 4] * 3
        assert buckets[0]["all_bytes"] == [(512 * 512 + 512) * 4] * 3
        assert buckets[0]["bucket_bytes_cap"] == 1024 * 1024
        for i, b in enumerate(buckets):  # bucket i holds layer i's weight and bias
            assert len(b["params"]) == 2 and all(f"layers_modules_{i}_" in p for p in b["params"])
    assert len([g for g in t.graphs if g.compile_id == cid]) == 6
    summary = {g["id"]: g for g in _info(job / "rank_0")["graphs"]}
    assert summary[f"{base}-forward-2"]["ddp_bucket"]["index"] == 1
    assert summary[f"{base}-forward-2"]["collectives"] == []  # DDP's all-reduces run in its reducer
    text = " ".join(_cli("info", str(job / "rank_0")).stdout.split())
    assert f"{base}-backward-3 DDP bucket 3 of 3: 1050624 bytes, 2 parameters" in text
    assert Trace(job / "rank_1").graph(f"{base}-backward-3").meta.ddp_bucket["index"] == 2


def test_a_compiled_ddp_forward_breaks_where_it_does_untraced(collectives_job) -> None:
    """The capture wraps ``Join.notify_join_context``, which DDP's forward calls. Under
    ``no_sync`` (gradient accumulation) DDP skips its logger, the first break of a compiled
    DDP forward otherwise; untraced, Dynamo then traces through the join notice and breaks at
    the reducer's ``_rebuild_buckets``. A ``torch.compiler.disable`` of the wrapper broke the
    graph at the wrapper instead, and the trace told the user to "Remove the
    `torch.compiler.disable` call" — tuidebug's own, in no code of theirs."""
    job, _ = collectives_job
    seen = 0
    for rank in (0, 1):
        compiles = _info(job / f"rank_{rank}")["compiles"]
        breaks = [b for c in compiles for b in c.get("graph_breaks") or []]
        assert breaks, compiles
        seen += len(breaks)
        text = json.dumps(breaks)
        assert "wrapped_notify" not in text and "notify_join_context" not in text, text
        codes = [(b.get("site") or {}).get("code") or "" for b in breaks]
        assert any("self.reducer._rebuild_buckets()" in c for c in codes), codes
    assert seen >= 2


def _copy(job: Path, dst: Path) -> Path:
    """A copy of ``job`` whose files the test edits as text (compressed ones made plain)."""
    shutil.copytree(job, dst, ignore=shutil.ignore_patterns("*.log"))
    return plain_files(dst)


def _edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_config_and_cache_differences(same_job, tmp_path) -> None:
    job, _ = same_job
    config = _copy(job, tmp_path / "config")
    _edit_json(config / "rank_1" / "config.json",
               lambda c: c["values"].update(max_fusion_size=7))
    d = analyze_job(config)["divergence"]
    assert d["kind"] == "config" and d["keys"] == ["max_fusion_size"], d
    assert d["values"]["max_fusion_size"][1] == 7 and d["diverging_ranks"] == [1]

    # a rank whose script failed before Inductor wrote no config: not "every key differs"
    (_copy(job, tmp_path / "unwritten") / "rank_1" / "config.json").unlink()
    assert analyze_job(tmp_path / "unwritten")["divergence"] is None
    # ... and whose script failed with no Inductor graph did not "run eagerly, not a failure"
    _edit_json(tmp_path / "unwritten" / "rank_1" / "manifest.json",
               lambda m: m.update(status="script_failed", graphs=[]))
    notes = analyze_job(tmp_path / "unwritten")["notes"]
    assert not [n for n in notes if n["kind"] == "no_graph"], notes
    _edit_json(tmp_path / "unwritten" / "rank_1" / "manifest.json", lambda m: m.update(status="ok"))
    notes = analyze_job(tmp_path / "unwritten")["notes"]
    assert [n["ranks"] for n in notes if n["kind"] == "no_graph"] == [[1]], notes

    cache = _copy(job, tmp_path / "cache")
    _edit_json(cache / "rank_1" / "compiles" / "0_0.json",
               lambda c: c.setdefault("metrics", {}).update(inductor_fx_local_cache_hit_count=1))
    # the analysis reads a compile's cache counts from the manifest's summary (written with it)

    def hit(m):
        (c,) = [c for c in m["compiles"] if c["id"] == "0/0"]
        assert c["summary"]["cache"] == {}, c  # capture writes the counts there
        c["summary"]["cache"] = {"fx_graph": {"hit": 1, "miss": 0}}
    _edit_json(cache / "rank_1" / "manifest.json", hit)
    # the same graphs and collectives, read from a cache on one rank only: no divergence
    # (ranks of one node share a cache folder: the first to compile writes what others read)
    report = analyze_job(cache)
    assert report["divergence"] is None, report["divergence"]
    (n,) = [n for n in report["notes"] if n["kind"] == "cache"]
    assert n["compile_id"] == "0/0" and n["ranks"] == [0, 1], n
    assert n["cache"] == [{}, {"fx_graph": {"hit": 1, "miss": 0}}]
    out = " ".join(_cli("info", str(cache)).stdout.split())
    assert "ranks agree" in out
    assert "cache hits differ between ranks 0 and 1 (no cache used vs fx_graph 1 hit / 0 miss)" \
        in out and "not a divergence" in out, out


def test_generated_code_differences_are_no_divergence(same_job, tmp_path) -> None:
    """Paths and the wrapper's benchmark harness differ per rank and are not compared; other
    code differences with the same graphs and collectives are a note (autotuning may choose
    another kernel per rank), never a divergence."""
    job, _ = same_job
    paths = _copy(job, tmp_path / "paths")
    for r, where in ((0, "/home/a/cache/ab"), (1, "/scratch/rank1/tmp/cd")):
        w = paths / f"rank_{r}" / "graphs" / "0_0-inference" / "code" / "wrapper.py"
        text = w.read_text()
        assert "def benchmark_compiled_module(" in text
        w.write_text(f"# loaded from {where}/kernel.so\n" + text + f"\n    # rank {r} harness\n")
    info = analyze_job(paths)
    assert info["divergence"] is None and info["notes"] == []
    assert [g["ranks"] for g in info["groups"]] == [[0, 1]]

    code = _copy(job, tmp_path / "code")
    g1 = code / "rank_1" / "graphs" / "0_0-inference"
    kernel = next(p for p in (g1 / "code").iterdir() if p.suffix == ".cpp")
    kernel.write_text(kernel.read_text() + "\n// another choice\n")
    for r, winner in ((0, "mm_a"), (1, "mm_b")):
        (code / f"rank_{r}" / "graphs" / "0_0-inference" / "autotune.jsonl").write_text(
            json.dumps({"op": "mm", "choices": [], "winner": winner}) + "\n")
    info = analyze_job(code)
    assert info["divergence"] is None, info["divergence"]
    assert [g["ranks"] for g in info["groups"]] == [[0], [1]]
    (note,) = info["notes"]
    assert note["kind"] == "code" and note["graph"] == "0_0-inference" and note["ranks"] == [0, 1]
    assert note["autotune_differs"] and note["autotune"] == [[["mm", "mm_a"], ["mm", "mm_b"]]]
    text = " ".join(_cli("info", str(code)).stdout.split())
    assert "ranks agree" in text and "autotuning chose differently: mm: mm_a vs mm_b" in text


def test_a_collective_on_one_rank_only_and_a_damaged_file(same_job, tmp_path) -> None:
    """Rank 1's graph issuing one collective fewer (its all-gather gone from collectives.json):
    the divergence names the all-gather the reference issues and nothing on rank 1. A
    collectives.json with fields of the wrong type still opens: the bad entries are dropped and
    named as problems."""
    job, _ = same_job
    fewer = _copy(job, tmp_path / "fewer")
    path = fewer / "rank_1" / "graphs" / "0_0-inference" / "collectives.json"
    _edit_json(path, lambda d: d.update(collectives=[c for c in d["collectives"]
                                                     if c["op"] == "all_reduce_"]))
    d = analyze_job(fewer)["divergence"]
    assert d["kind"] == "collectives" and d["position"] == 1 and d["counts"] == [2, 1], d
    assert d["differs_in"] == ["a collective on one side only"] and d["diverging"] is None
    assert d["reference"]["op"] == "all_gather_into_tensor"
    assert d["line"].endswith(f"rank_job.py:{_line_of('dist.all_gather_into_tensor(w, y)')}")
    text = " ".join(_cli("info", str(fewer)).stdout.split())
    assert "ranks 1: nothing (its sequence ends here)" in text

    # the same collectives, and one on a group rank 0 is not in (ranks 1 and 3, as a
    # tensor-parallel group): rank 0 never issues it, so it is no divergence between 0 and 1
    tp = _copy(job, tmp_path / "tp")
    tp_path = tp / "rank_1" / "graphs" / "0_0-inference" / "collectives.json"
    _edit_json(tp_path, lambda d: d["collectives"].append(
        {"index": 9, "op": "all_reduce_", "group": "7", "group_ranks": [1, 3],
         "inputs": [{"shape": [4], "dtype": "float32"}]}))
    assert analyze_job(tp)["divergence"] is None
    _edit_json(tp_path, lambda d: d["collectives"][-1].update(group_ranks=[0, 1, 3]))
    d = analyze_job(tp)["divergence"]  # a group holding both: rank 0 should issue it too
    assert d["kind"] == "collectives" and d["differs_in"] == ["a collective on one side only"]

    _edit_json(path, lambda d: d.update(collectives=[{"index": "zero", "op": 5}] + d["collectives"],
                                        reordered="yes"))
    t = Trace(fewer / "rank_1")
    got = t.graph("0_0-inference").collectives
    assert [c["op"] for c in got["collectives"]] == ["all_reduce_"] and "reordered" not in got
    assert any("collectives.json" in str(p) for p in t.problems)


def test_each_rank_on_its_own_device_is_no_divergence(same_job, tmp_path) -> None:
    """On GPUs rank r computes on cuda:<local rank>: its snapshots' tensor devices and its
    wrapper's device(type='cuda', index=r) / set_device(r) differ from rank 0's by the index
    only — ranks that agree (every multi-GPU job was reported as a graph divergence); a device
    type that differs still is one."""
    job, _ = same_job
    gpus = _copy(job, tmp_path / "gpus")
    for r in (0, 1):
        g = gpus / f"rank_{r}" / "graphs" / "0_0-inference"
        for snap in (g / "stages").iterdir():
            snap.write_text(snap.read_text().replace('"device":"cpu"', f'"device":"cuda:{r}"')
                            .replace('"device": "cpu"', f'"device": "cuda:{r}"'))
        assert f"cuda:{r}" in (g / "stages" / "000-dynamo.json").read_text()
        w = g / "code" / "wrapper.py"
        w.write_text(w.read_text() + f"\n# device(type='cuda', index={r}); set_device({r})\n")
    info = analyze_job(gpus)
    assert info["divergence"] is None and info["notes"] == [], info["divergence"]
    snap = gpus / "rank_1" / "graphs" / "0_0-inference" / "stages" / "000-dynamo.json"
    data = json.loads(snap.read_text())
    node = next(n for n in data["nodes"] if n["op"] == "call_function")
    node["target"] = "torch.sub"  # one node differs: the node diff names it alone
    snap.write_text(json.dumps(data))
    d = analyze_job(gpus)["divergence"]
    assert d["kind"] == "graph" and d["stage"] == "dynamo", d
    assert d["nodes"]["changed"] == [node["name"]] and not d["nodes"]["added"], d["nodes"]
    snap.write_text(snap.read_text().replace("cuda:1", "cpu"))
    d = analyze_job(gpus)["divergence"]
    assert d["kind"] == "graph" and d["stage"] == "dynamo", d


def test_ranks_of_two_tensor_parallel_groups_agree(same_job, tmp_path) -> None:
    """Rank 0 all-reduces on its group of ranks 0 and 2, rank 1 on its group of ranks 1 and 3
    (two tensor-parallel groups, named "1" and "2"): the same graph on each rank's own group,
    no divergence between 0 and 1 (it was "collective sequence differs: group", then "graph
    differs at stage dynamo": the group's name is an argument of the collective's node); a
    graph that differs besides still diverges, with only that node in its node diff."""
    job, _ = same_job
    tp = _copy(job, tmp_path / "tp")
    for r, name, members in ((0, "1", [0, 2]), (1, "2", [1, 3])):
        g = tp / f"rank_{r}" / "graphs" / "0_0-inference"

        def regroup(d, name=name, members=members):
            for c in d["collectives"]:
                if c.get("group") == "0":
                    c.update(group=name, group_ranks=members)
            d["groups"] = {name: {**d["groups"]["0"], "name": name, "ranks": members}}
        _edit_json(g / "collectives.json", regroup)
        for snap in (g / "stages").iterdir():
            data = json.loads(snap.read_text())
            for n in data["nodes"]:
                if str(n["target"]).startswith("_c10d_functional") and "0" in n["args"]:
                    n["args"] = [name if a == "0" else a for a in n["args"]]
            snap.write_text(json.dumps(data))
        assert f'"{name}"' in (g / "stages" / "000-dynamo.json").read_text()
    info = analyze_job(tp)
    assert info["divergence"] is None, info["divergence"]
    snap = tp / "rank_1" / "graphs" / "0_0-inference" / "stages" / "000-dynamo.json"
    data = json.loads(snap.read_text())
    node = next(n for n in data["nodes"] if n["op"] == "call_function"
                and not str(n["target"]).startswith("_c10d"))
    node["target"] = "torch.sub"
    snap.write_text(json.dumps(data))
    d = analyze_job(tp)["divergence"]
    assert d["kind"] == "graph" and d["nodes"]["changed"] == [node["name"]], d
