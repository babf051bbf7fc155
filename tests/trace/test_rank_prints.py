"""What the cross-rank comparison sees of each rank (``trace/jobs/rank_digest.py``) and how it
pairs two ranks' graphs (``trace/jobs/ranks.py``), on jobs written with the torch-free writer:
two ranks that differ only in a snapshot an import kept as printed text (``stages/NNN-x.txt``),
or only in the first of two graphs of one kind, are not one group; a file the safe reader refuses
is not compared (neither the same nor different)."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from tests.conftest import plain
from tuidebug.trace.format import compressed, safefile, schema
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.jobs.rank_digest import Hashes, read_rank
from tuidebug.trace.jobs.rank_groups import Covered, rank_keys
from tuidebug.trace.jobs.ranks import analyze_job
from tuidebug.viewers.ranks_view import divergence_lines, render_job

NODES = [{"name": "x", "op": "placeholder", "target": "x", "args": [], "kwargs": {}},
         {"name": "relu", "op": "call_function", "target": "aten.relu.default",
          "args": [{"node": "x"}], "kwargs": {}, "inputs": ["x"]},
         {"name": "output", "op": "output", "target": "output", "args": [[{"node": "relu"}]],
          "kwargs": {}, "inputs": ["relu"]}]
FX_TEXT = '''def forward(self, L_x_: "f32[4][1]cpu"):
    l_x_ = L_x_
    {op}: "f32[4][1]cpu" = torch.{op}(l_x_);  l_x_ = None
    return ({op},)
'''


def _rank(job: Path, rank: int, graphs: dict[str, str], text_op: str | None = None,
          text_tail: str = "") -> None:
    """Rank ``rank`` of ``job``: compile 0/0 with one graph per ``{graph id: kind}`` (each one
    JSON snapshot, ``aten.neg`` instead of relu in a graph whose id ends in ``-bad``); with
    ``text_op`` the first graph also has a printed snapshot calling ``torch.<text_op>``."""
    w = TraceWriter(job / f"rank_{rank}", command=["test"])
    for i, (gid, kind) in enumerate(graphs.items()):
        real = gid.removesuffix("-bad")
        w.add_graph(real, kind=kind, compile_id="0/0")
        g = w.graph(real)
        nodes = [dict(n, target="aten.neg.default") if gid.endswith("-bad") and n["name"] == "relu"
                 else n for n in NODES]
        files = [g.write_stage(0, "dynamo", {"graph": real, "stage": "dynamo", "nodes": nodes})]
        if text_op is not None and i == 0:
            files.append(g.write_stage_text(1, "post_grad", FX_TEXT.format(op=text_op) + text_tail))
        stages = [{"index": j, "name": f.split("-", 1)[1].rsplit(".", 1)[0], "kind": "stage",
                   "changed": True, "file": f} for j, f in enumerate(files)]
        g.write_meta(kind=kind, compile_id="0/0", status="ok", stages=stages, phase_starts={},
                     kernels=0, fusion={})
    w.add_compile("0/0", {"graphs": [g.removesuffix("-bad") for g in graphs]})
    finish_rank(w, job, rank)


def finish_rank(w: TraceWriter, job: Path, rank: int) -> None:
    """Rank ``rank``'s trace finished ok, and its record in ``job`` (a world of 2)."""
    w.finish(schema.STATUS_OK)
    (job / "job").mkdir(parents=True, exist_ok=True)
    (job / "job" / f"rank_{rank}.json").write_text(json.dumps(
        {"rank": rank, "world_size": 2, "status": "ok", "trace": f"rank_{rank}"}))


def test_a_printed_snapshot_is_part_of_the_fingerprint(tmp_path: Path) -> None:
    job = tmp_path / "job"
    _rank(job, 0, {"0_0-inference": "inference"}, text_op="relu")
    _rank(job, 1, {"0_0-inference": "inference"}, text_op="sigmoid")
    hashes = Hashes()
    prints = [read_rank(r, job / f"rank_{r}", hashes).print for r in (0, 1)]
    stages = [p["compiles"][0]["graphs"][0]["stages"] for p in prints]
    assert [[f for f, _ in s] for s in stages] == [["000-dynamo.json", "001-post_grad.txt"]] * 2
    assert stages[0][0] == stages[1][0] and stages[0][1] != stages[1][1]
    nothing = Covered(frozenset())
    assert rank_keys(prints[0], nothing)[0] != rank_keys(prints[1], nothing)[0]
    got = analyze_job(job)
    assert [g["ranks"] for g in got["groups"]] == [[0], [1]]
    div = got["divergence"]
    assert div["kind"] == "graph" and div["graph"] == "0_0-inference", div
    assert div["stage"] == "post_grad", div


def test_printed_graphs_that_differ_only_in_their_object_id_agree(tmp_path: Path) -> None:
    """torch prints a graph with ``# graph id: <id()>``, an address of the rank's own process:
    two ranks of a job that agree (an imported TORCH_TRACE job, CI) were noted as differing in
    rank-dependent constants."""
    job = tmp_path / "job"
    _rank(job, 0, {"0_0-inference": "inference"}, text_op="relu",
          text_tail="\n # graph id: 140273059097680")
    _rank(job, 1, {"0_0-inference": "inference"}, text_op="relu",
          text_tail="\n # graph id: 140373524609232")
    got = analyze_job(job)
    assert [g["ranks"] for g in got["groups"]] == [[0, 1]], got["groups"]
    assert got["divergence"] is None and got["notes"] == [], got["notes"]


def test_two_graphs_of_one_kind_are_compared_each(tmp_path: Path) -> None:
    """A compile split in pieces: ``0_0-inference`` and ``0_0-inference-2``. Keyed by kind, the
    second hid the first, and ranks that differ only there agreed."""
    job = tmp_path / "job"
    _rank(job, 0, {"0_0-inference": "inference", "0_0-inference-2": "inference"})
    _rank(job, 1, {"0_0-inference-bad": "inference", "0_0-inference-2": "inference"})
    got = analyze_job(job)
    assert len(got["groups"]) == 2
    div = got["divergence"]
    assert div is not None and div["kind"] == "graph" and div["graph"] == "0_0-inference", div
    assert any("neg" in line for line in div["nodes"]["lines"]), div


def test_a_graph_on_one_rank_only_is_named_by_its_id(tmp_path: Path) -> None:
    job = tmp_path / "job"
    _rank(job, 0, {"0_0-inference": "inference", "0_0-inference-2": "inference"})
    _rank(job, 1, {"0_0-inference": "inference"})
    div = analyze_job(job)["divergence"]
    assert div["kind"] == "graph" and div["graph"] == "0_0-inference-2", div
    assert div["graph_kind"] == "inference" and "0_0-inference-2" in div["detail"], div


def _refused_stage(job: Path, rank: int, how: str) -> str:
    """Rank ``rank``'s first snapshot made one safefile refuses: ``big`` (a sparse file over the
    64 MiB cap) or ``link`` (a symbolic link to a copy inside the rank's own trace). Its path
    in the trace."""
    rel = "graphs/0_0-inference/stages/000-dynamo.json"
    path = plain(job / f"rank_{rank}" / rel)  # written compressed: made plain, then refused
    if how == "big":
        with open(path, "r+b") as f:
            f.truncate(safefile.MAX_JSON_BYTES + 1)
    else:
        copy = path.with_name("copy.data")
        path.rename(copy)
        path.symlink_to(copy.name)
    return rel


def test_a_file_refused_on_every_rank_is_not_compared(tmp_path: Path) -> None:
    """Over the cap on both ranks: hashed with its path in it, the two ranks were two groups and
    "first differ at stage dynamo" (0 nodes changed). It is neither the same nor different."""
    job = tmp_path / "job"
    for r in (0, 1):
        _rank(job, r, {"0_0-inference": "inference"})
        rel = _refused_stage(job, r, "big")
    got = analyze_job(job)
    assert got["divergence"] is None, got["divergence"]
    assert [g["ranks"] for g in got["groups"]] == [[0, 1]], got["groups"]
    (note,) = [n for n in got["notes"] if n["kind"] == "not_compared"]
    (f,) = note["files"]
    assert f["file"] == rel and f["ranks"] == [0, 1], f
    (why,) = f["reasons"]
    assert "over the 67,108,864-byte limit" in why["why"] and why["ranks"] == [0, 1], f
    lines = divergence_lines(got["divergence"], got["ranks"], got["notes"])
    assert lines[0] == "ranks agree in what was compared; 1 file not compared", lines
    assert lines[1] == f"  not compared: {rel} on rank(s) 0-1: {why['why']}", lines
    console = Console(record=True, width=300)
    render_job(got, console)
    said = console.export_text()
    assert "ranks agree" in said and said.count("not compared: ") == 1, said
    assert "differs" not in said, said


def test_a_file_refused_on_one_rank_is_not_compared(tmp_path: Path) -> None:
    """A snapshot that is a symbolic link on rank 0 only: no divergence is made of it (rank 0's
    content is not read), and the note names rank 0 and why."""
    job = tmp_path / "job"
    for r in (0, 1):
        _rank(job, r, {"0_0-inference": "inference"})
    rel = _refused_stage(job, 0, "link")
    got = analyze_job(job)
    assert got["divergence"] is None, got["divergence"]
    (note,) = [n for n in got["notes"] if n["kind"] == "not_compared"]
    assert note["files"] == [{"file": rel, "ranks": [0], "reasons": [
        {"why": "a symbolic link; not read", "ranks": [0]}]}]
    assert "compile_skew" not in got  # judged once: compile_time
    # one group: rank 0 was shown in group A and rank 1 in group B right above "ranks agree in
    # what was compared" (the refused file stood as UNREAD on rank 0 and its hash on rank 1)
    assert [g["ranks"] for g in got["groups"]] == [[0, 1]], got["groups"]
    assert got["ranks"][0]["compile_hashes"] == got["ranks"][1]["compile_hashes"], got["ranks"]
    console = Console(record=True, width=300)
    render_job(got, console)
    rows = [ln.split() for ln in console.export_text().splitlines() if ln.split()[:1] in (["0"], ["1"])]
    assert [r[-1] for r in rows] == ["A", "A"], rows


def test_a_refused_compressed_snapshot_is_named_as_the_plain_one(tmp_path: Path) -> None:
    """Rank 0 stored its snapshot compressed (``000-dynamo.json.gz``) and it is a link; rank 1
    stored it plain: the refused file is the one the print names (``…json``), so the ranks are
    one group and the note names the snapshot once."""
    job = tmp_path / "job"
    for r in (0, 1):
        _rank(job, r, {"0_0-inference": "inference"})
    rel = "graphs/0_0-inference/stages/000-dynamo.json"
    plain(job / "rank_1" / rel)  # the writer stores it compressed: rank 1's made plain
    packed = job / "rank_0" / compressed.packed_name(rel)
    assert packed.is_file(), packed
    packed.rename(packed.with_name("copy.data"))
    packed.symlink_to("copy.data")
    got = analyze_job(job)
    assert got["divergence"] is None, got["divergence"]
    assert [g["ranks"] for g in got["groups"]] == [[0, 1]], got["groups"]
    (note,) = [n for n in got["notes"] if n["kind"] == "not_compared"]
    assert [(f["file"], f["ranks"]) for f in note["files"]] == [(rel, [0])], note


def test_ranks_that_read_a_file_another_refused_are_still_compared(tmp_path: Path) -> None:
    """Rank 0's snapshot is a link (not read); ranks 1 and 2 read theirs and differ in it
    (rank 2 negates where rank 1 applies relu): rank 0 compared with either finds nothing, yet
    1 and 2 diverge at that snapshot, and they are not one group."""
    job = tmp_path / "job"
    for r, gid in ((0, "0_0-inference"), (1, "0_0-inference"), (2, "0_0-inference-bad")):
        _rank(job, r, {gid: "inference"})
    rel = _refused_stage(job, 0, "link")
    got = analyze_job(job)
    d = got["divergence"]
    assert d is not None and d["kind"] == "graph" and d["stage"] == "dynamo", d
    assert (d["reference_ranks"], d["diverging_ranks"]) == ([1], [2]), d
    assert d["nodes"]["changed"] == ["relu"], d
    grouped = sorted(g["ranks"] for g in got["groups"])
    assert grouped == [[0], [1], [2]], got["groups"]
    (note,) = [n for n in got["notes"] if n["kind"] == "not_compared"]
    assert [f["file"] for f in note["files"]] == [rel], note


def test_a_file_refused_alike_on_two_ranks_is_one_file_not_compared(tmp_path: Path) -> None:
    """Over the cap on both ranks with two sizes: one file with a reason per rank ("2 files not
    compared" was said of the one file, its reasons naming the sizes)."""
    job = tmp_path / "job"
    rel = "graphs/0_0-inference/stages/000-dynamo.json"
    for r in (0, 1):
        _rank(job, r, {"0_0-inference": "inference"})
        with open(plain(job / f"rank_{r}" / rel), "r+b") as f:
            f.truncate(safefile.MAX_JSON_BYTES + 1 + r)
    got = analyze_job(job)
    assert got["divergence"] is None and [g["ranks"] for g in got["groups"]] == [[0, 1]], got
    (note,) = [n for n in got["notes"] if n["kind"] == "not_compared"]
    (f,) = note["files"]
    assert f["file"] == rel and f["ranks"] == [0, 1], f
    assert [r["ranks"] for r in f["reasons"]] == [[0], [1]], f
    assert [r["why"].split(" bytes")[0] for r in f["reasons"]] == ["67,108,865", "67,108,866"], f
    lines = divergence_lines(got["divergence"], got["ranks"], got["notes"])
    assert lines == ["ranks agree in what was compared; 1 file not compared",
                     f"  not compared: {rel} on rank(s) 0-1:",
                     f"    rank(s) 0: {f['reasons'][0]['why']}",
                     f"    rank(s) 1: {f['reasons'][1]['why']}"], lines


def test_a_graph_whose_id_is_no_folder_name_is_said_not_compared(tmp_path: Path) -> None:
    """A manifest naming a graph ``../x`` on rank 1: never looked up (it was skipped with no
    word), and a not_compared note names it, quoted."""
    job = tmp_path / "job"
    for r in (0, 1):
        _rank(job, r, {"0_0-inference": "inference"})
    path = job / "rank_1" / schema.MANIFEST
    manifest = json.loads(path.read_text())
    assert manifest["graphs"], manifest  # the writer lists its graphs
    manifest["graphs"].append({**manifest["graphs"][0], "id": "../x"})
    path.write_text(json.dumps(manifest))
    got = analyze_job(job)
    assert got["divergence"] is None, got["divergence"]
    (note,) = [n for n in got["notes"] if n["kind"] == "not_compared"]
    assert note["files"] == [{"file": "graphs/'../x'", "ranks": [1], "reasons": [
        {"why": "its graph id is not a plain folder name; not read", "ranks": [1]}]}], note
    lines = divergence_lines(got["divergence"], got["ranks"], got["notes"])
    assert lines[0] == "ranks agree in what was compared; 1 file not compared", lines


def test_a_damaged_compressed_snapshot_is_not_compared_and_a_plain_copy_beside_it_is_one(
        tmp_path: Path) -> None:
    """Rank 0's compressed snapshot is cut short (a half-copied job): not compared, with its
    why — hashed, it made a divergence at that stage. Rank 1 holds the snapshot both plain and
    compressed (stopped between writing one and removing the other): one snapshot, the plain
    one, as the reader reads it — listed twice, it made 'different numbers of snapshots'."""
    job = tmp_path / "job"
    for r in (0, 1):
        _rank(job, r, {"0_0-inference": "inference"})
    rel = "graphs/0_0-inference/stages/000-dynamo.json"
    packed = job / "rank_0" / compressed.packed_name(rel)
    data = packed.read_bytes()
    packed.write_bytes(data[: len(data) // 2])
    both = job / "rank_1" / compressed.packed_name(rel)
    kept = both.read_bytes()
    plain(job / "rank_1" / rel)
    both.write_bytes(kept)  # the .gz again, beside the plain file
    got = analyze_job(job)
    assert got["divergence"] is None, got["divergence"]
    (note,) = [n for n in got["notes"] if n["kind"] == "not_compared"]
    assert [(f["file"], f["ranks"]) for f in note["files"]] == [(rel, [0])], note
    assert "damaged" in str(note), note


def test_ranks_split_three_ways_in_a_file_another_refused_name_only_compared_ranks(
        tmp_path: Path) -> None:
    """Rank 0 could not read its snapshot; ranks 1, 2 and 3 read theirs and hold three
    contents (relu, neg, sigmoid). Each is compared with rank 1 apart: the divergence names
    the one rank it compared, never a rank whose difference was not looked at (rank 3 was
    listed beside rank 2 though only 1 and 2 had been compared)."""
    job = tmp_path / "job"
    for r, gid in ((0, "0_0-inference"), (1, "0_0-inference"), (2, "0_0-inference-bad"),
                   (3, "0_0-inference")):
        _rank(job, r, {gid: "inference"})
    rel = _refused_stage(job, 0, "link")
    third = plain(job / "rank_3" / rel)
    third.write_text(third.read_text().replace("aten.relu.default", "aten.sigmoid.default"))
    got = analyze_job(job)
    d = got["divergence"]
    assert d is not None and d["kind"] == "graph" and d["stage"] == "dynamo", d
    assert d["reference_ranks"] == [1] and len(d["diverging_ranks"]) == 1, d
    assert d["diverging_ranks"][0] in (2, 3), d


def test_a_refused_file_covers_its_folder_and_what_it_holds_and_nothing_beside() -> None:
    """What the ranks are grouped by masks a path when it is a file refused on some rank, lies
    in a refused folder, or holds one; a sibling whose name only starts the same is not (the
    lookup is by folders, each path once, no longer every refused file tried on every path)."""
    covered = Covered(frozenset({"graphs/0_0-forward/stages/003-x.json", "graphs/1_0-bwd"}))
    said = {p: covered(p) for p in (
        "graphs/0_0-forward/stages/003-x.json",  # the file
        "graphs/0_0-forward/stages", "graphs/0_0-forward",  # folders that hold it
        "graphs/1_0-bwd/code", "graphs/1_0-bwd/stages/000-dynamo.json",  # in a refused folder
        "graphs/0_0-forward/stages/003-x.json.gz", "graphs/0_0-forward/stages/003-x",
        "graphs/1_0-bwd-2/code", "graphs/0_0", "config.json")}
    assert said == {**{p: True for p in list(said)[:5]}, **{p: False for p in list(said)[5:]}}, said
    assert not Covered(frozenset())("graphs/0_0-forward")
