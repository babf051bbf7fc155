"""Stage and provenance queries (tuidebug.trace.queries.stages, .provenance) on real traces: the one
answer the TUI and the SVG renderer both show."""

from __future__ import annotations

from pathlib import Path

from tuidebug.trace.queries import provenance, stages
from tuidebug.trace.format.reader import Trace
from tuidebug.viewers import svg


def test_merge_removed_puts_removed_nodes_where_they_stood() -> None:
    previous = ["a", "b", "c", "d", "e"]
    current = ["a", "x", "c", "e"]
    merged = stages.merge_removed(current, previous, {"b", "d"})
    assert merged == [("a", False), ("b", True), ("x", False), ("c", False), ("d", True),
                      ("e", False)]
    # a removed first node goes first
    assert stages.merge_removed(["b"], ["a", "b"], {"a"}) == [("a", True), ("b", False)]


def test_every_stage_label_is_unique_and_names_its_stage(transformer_trace: Path) -> None:
    graphs = Trace(transformer_trace).graphs
    assert len(graphs) == 2, [g.id for g in graphs]
    shared_seen = 0
    for g in graphs:
        labels = [stages.stage_label(s) for s in g.stages]
        assert len(labels) > 3, (g.id, labels)
        assert len(set(labels)) == len(labels), labels
        unchanged = [s for s in g.stages if not s.file]
        assert unchanged, f"{g.id} has passes that changed nothing"
        shared = [s for s in g.stages if s.file and Path(s.file).stem != f"{s.index:03d}-{s.name}"]
        for s, label in zip(g.stages, labels):
            # a snapshot goes by its file's stem; a stage without one of its own (a pass that
            # changed nothing, a snapshot stored once for an earlier stage) by the stem it
            # would have
            assert label == f"{s.index:03d}-{s.name}"
            assert stages.find_stage(g, label) is s
            assert svg.resolve_stage(g, label) is s  # what `tuidebug svg --stage` takes
        for s in shared:
            # a snapshot stored once: its file is the earlier stage's that took it, and that
            # file's stem names the earlier stage, never this one
            owner = stages.find_stage(g, Path(str(s.file)).stem)
            assert owner is not None and owner is not s and owner.index < s.index, (s, owner)
            assert owner.file == s.file and stages.stage_label(owner) == Path(str(s.file)).stem
            shared_seen += 1
    # the transformer's trace stores snapshots once (pre_grad is the Dynamo graph unchanged;
    # the backward's post_grad the graph of its remove_noop_ops)
    assert shared_seen >= 2, shared_seen


def test_snapshot_at_a_pass_that_changed_nothing_is_the_one_before(transformer_trace: Path) -> None:
    g = Trace(transformer_trace).graphs[0]
    assert any(not s.file for s in g.stages) and g.snapshots(), [s.name for s in g.stages]
    for s in g.stages:
        shown = stages.snapshot_at(g, s)
        before = [x for x in g.snapshots() if x.index <= s.index]
        assert shown is (before[-1] if before else None)
        assert stages.previous_snapshot(g, s) is next(
            (x for x in reversed(g.snapshots()) if x.index < s.index), None)


def test_stage_diff_of_adjacent_snapshots_is_what_the_pass_recorded(transformer_trace: Path) -> None:
    g = Trace(transformer_trace).graphs[0]
    snaps = g.snapshots()
    checked = 0
    for a, b in zip(snaps, snaps[1:]):
        ga, gb = g.stage_graph(a), g.stage_graph(b)
        d = stages.stage_diff(g, a, b, ga, gb)
        recorded = g.stage_changes(b)
        assert set(d.added) == set(recorded["added"]) & {n.name for n in gb}
        assert set(d.removed) == {n for n in recorded["removed"] if n in ga and n not in gb}
        union = d.union()
        assert [n.name for n in union if n.name not in set(d.removed)] == [n.name for n in gb]
        assert len(union) == len(gb) + len(d.removed)
        status = d.status()
        assert {n for n, st in status.items() if st == "removed"} == set(d.removed)
        checked += bool(d.added or d.removed or d.changed)
    assert checked, "some pass of the transformer's forward graph changed it"
    # far apart: computed by name and signature, and nothing is both added and removed
    d = stages.stage_diff(g, snaps[0], snaps[-1], g.stage_graph(snaps[0]), g.stage_graph(snaps[-1]))
    assert d.added and d.removed and not set(d.added) & set(d.removed)
    assert all(u in d.after for _, u in d.removed_edges())


def test_is_joint_only_between_aot_joint_and_the_partition(transformer_trace: Path) -> None:
    g = Trace(transformer_trace).graphs[0]
    joint = next(s for s in g.stages if s.name == "aot_joint")
    assert stages.is_joint(g, joint)
    assert not stages.is_joint(g, g.snapshots()[0])
    assert not stages.is_joint(g, g.snapshots()[-1])


def test_kernels_for_node_follows_pre_to_post_names(transformer_trace: Path) -> None:
    g = Trace(transformer_trace).graphs[0]
    prov = g.provenance
    post, kernels = next(iter(prov["fx_to_kernels"].items()))
    assert provenance.kernels_for_node(g, post) == kernels
    pre, posts = next((k, v) for k, v in prov["pre_to_post"].items()
                      if k not in prov["fx_to_kernels"] and
                      any(p in prov["fx_to_kernels"] for p in v))
    got = provenance.kernels_for_node(g, pre)
    assert got and all(k in got for p in posts for k in prov["fx_to_kernels"].get(p, []))


def test_kernel_owners_put_each_node_in_a_kernel_that_lists_it(transformer_trace: Path) -> None:
    g = Trace(transformer_trace).graphs[0]
    graph = g.final_graph()
    owners = provenance.kernel_owners(g, graph)
    assert owners is not None and owners.kernel_of
    for node, kernel in owners.kernel_of.items():
        listed = owners.listed[kernel]
        n = graph.get(node)
        assert node in listed or (n is not None and n.target.endswith("getitem")
                                  and owners.kernel_of.get(n.inputs[0]) == kernel), node
    # every kernel of the graph is known, with its kind
    assert {k.name for k in provenance.kernel_infos(g)} <= set(owners.kind)
