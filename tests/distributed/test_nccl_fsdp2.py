"""A real NCCL job: FSDP2 (``fully_shard``) bf16 training steps of a 4-layer transformer
(dim 1024) compiled on 2 H200s, torch 2.11, traced by ``bench/fsdp_gpu.sh`` (bench/fsdp_job.py);
once as is and once with a planted rank-dependent recompile (``--odd``: rank 1 alone feeds a
longer sequence on its second step). The fixtures are those jobs as written (1.8 MB packed).

What it proves on traces nobody here wrote by hand: FSDP's shard offsets (a constant on rank 0,
a constant or a symbolic input on rank 1) are no divergence, and the planted one is found,
named, and explained."""

from __future__ import annotations

import json
import tarfile
from collections import Counter
from pathlib import Path

import pytest

from tests.distributed.test_ranks import _cli
from tuidebug.trace.jobs.ranks import analyze_job
from tuidebug.trace.format.reader import Trace

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture(scope="module")
def nccl_jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("nccl")
    out = {}
    for name, folder in (("nccl_fsdp2_job", "fsdp-job"), ("nccl_fsdp2_odd", "fsdp-odd")):
        with tarfile.open(FIXTURES / f"{name}.tgz") as tar:
            tar.extractall(root, filter="data")
        out[folder] = root / folder
    return out


def test_fsdp2_ranks_agree_and_their_shard_offsets_are_a_note(nccl_jobs) -> None:
    job = nccl_jobs["fsdp-job"]
    report = analyze_job(job)
    assert report["divergence"] is None, report["divergence"]
    constants = [n for n in report["notes"] if n["kind"] == "constants"]
    # the all-gather's copy-out: as_strided at the rank's shard offset (0 and 1024), then, once
    # recompiled, an offset symbolic on rank 1 and still 0 (never made dynamic) on rank 0
    assert {n["graph"] for n in constants} == {"4_0-inference", "4_1-inference"}
    first = next(n for n in constants if n["graph"] == "4_0-inference")
    assert any(ln.startswith("- as_strided") and ln.endswith(", 0)") for ln in first["lines"])
    assert any(ln.startswith("+ as_strided") and ln.endswith(", 1024)") for ln in first["lines"])
    # each rank on its own GPU, NCCL collectives in the compiled all-gather graphs
    for r in (0, 1):
        t = Trace(job / f"rank_{r}")
        assert t.problems == []
        g = t.graph("4_0-inference")
        ops = [c["op"] for c in g.collectives["collectives"]]
        assert ops == ["all_gather_into_tensor", "wait_tensor"]
        assert g.collectives["collectives"][0]["group_ranks"] == [0, 1]
        snap = g.stage_graph(g.snapshots()[0])
        assert any((n.tensor or {}).get("device") == f"cuda:{r}" for n in snap)
    # every rank entered the same collectives: FSDP's all-gathers and the gradients'
    # reduce-scatters (run by its hooks, outside the compiled graphs on this torch)
    counts = []
    for r in (0, 1):
        lines = (job / "job" / f"rank_{r}.progress.jsonl").read_text().splitlines()
        counts.append(Counter(e["op"] for e in map(json.loads, lines)
                              if e.get("event") == "collective"))
    assert counts[0] == counts[1] and counts[0]["reduce_scatter_tensor"] > 0
    assert counts[0]["all_gather_into_tensor"] > 0
    out = " ".join(_cli("info", str(job)).stdout.split())
    assert "ranks agree" in out and "differ only in the offsets of views" in out
    assert "\\n" not in out


def test_the_planted_recompile_is_found_and_named(nccl_jobs) -> None:
    report = analyze_job(nccl_jobs["fsdp-odd"])
    d = report["divergence"]
    assert d is not None and d["kind"] == "compile_only_on_some_ranks", d
    assert d["compile_id"] == "7/2" and d["diverging_ranks"] == [1] and not d["on_reference"]
    assert d["reason"]["function"] == "forward"
    assert d["reason"]["file"].endswith("transformer_block.py")
    # the reason as torch 2.11 stored it (one JSON text of a list), read as its lines
    assert any("size mismatch at index 1. expected 512, actual 1024" in r
               for r in d["reason"]["recompile_reasons"]), d["reason"]
    out = " ".join(_cli("info", str(nccl_jobs["fsdp-odd"])).stdout.split())
    assert "first divergence: compile 7/2 on rank(s) 1 only, not on 0" in out
    assert "recompiled: 7/0: tensor 'x' size mismatch at index 1. expected 512, actual 1024" in out


def test_a_shape_that_differs_with_the_offsets_is_still_a_divergence(nccl_jobs,
                                                                     tmp_path: Path) -> None:
    """Only integers of arguments are forgiven: the same offsets with rank 1's view of another
    size is a graph divergence, at that stage, naming the node."""
    import shutil

    job = tmp_path / "job"
    shutil.copytree(nccl_jobs["fsdp-job"], job)
    stage = next((job / "rank_1" / "graphs" / "4_0-inference" / "stages").glob("*aot_joint.json"))
    data = json.loads(stage.read_text())
    node = next(n for n in data["nodes"] if n["name"] == "as_strided_1")
    node["tensor"]["shape"] = [2048]
    stage.write_text(json.dumps(data))
    d = analyze_job(job)["divergence"]
    assert d is not None and d["kind"] == "graph" and d["graph"] == "4_0-inference", d
    assert d["stage"] == "aot_joint" and d["nodes"]["changed"] == ["as_strided_1"], d
