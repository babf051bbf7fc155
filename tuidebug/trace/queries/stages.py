"""Questions about a graph's stages, answered once for every viewer (TUI, SVG, CLI).

A graph record lists stages (Dynamo, pre-grad passes, AOT tracing, post-grad passes…); only
those that changed the graph have a snapshot file. Here: the name a stage goes by
(``stage_label``), the snapshot holding the graph as of a stage (``snapshot_at``), whether it is
AOTAutograd's joint graph (``is_joint``), and what differs between two snapshots
(``stage_diff``, with removed nodes placed where they stood: ``merge_removed``).
Pure data: no torch, no Textual.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tuidebug.trace.format import layout
from tuidebug.trace.format.graph import Graph
from tuidebug.trace.format.reader import GraphRecord, StageInfo

def stage_label(s: StageInfo) -> str:
    """The name a stage goes by in titles, file names and ``--stage``: its snapshot file's stem
    (``007-pattern_matcher``), or the stem it would have (``NNN-name``) when it has no snapshot
    of its own (a pass that changed nothing; a snapshot stored once, named by a later stage
    too). Unique within a graph, and ``find_stage`` takes it back."""
    return Path(layout.stage_file(s.index, s.name)).stem if s.file else f"{s.index:03d}-{s.name}"


def find_stage(g: GraphRecord, name: str) -> StageInfo | None:
    """A stage by name (the first of that name), snapshot file stem, index, or ``stage_label``."""
    found = g.find_stage(name)
    if found is not None:
        return found
    return next((s for s in g.stages if stage_label(s) == name), None)


def previous_snapshot(g: GraphRecord, stage: StageInfo) -> StageInfo | None:
    """The last snapshot taken before ``stage``."""
    prev = None
    for s in g.snapshots():
        if s.index >= stage.index:
            break
        prev = s
    return prev


def snapshot_at(g: GraphRecord, stage: StageInfo) -> StageInfo | None:
    """The snapshot holding the graph as of ``stage``: its own, else the latest before it
    (None when no snapshot was taken at or before it)."""
    if stage.file:
        return stage
    return previous_snapshot(g, stage)


def is_joint(g: GraphRecord, snapshot: StageInfo) -> bool | None:
    """Whether the graph after ``snapshot`` is AOTAutograd's joint forward+backward graph
    (None: not known, a forward graph whose stages do not say)."""
    joint = next((s.index for s in g.stages if s.name == "aot_joint"), None)
    if joint is None:
        return None if g.kind == "forward" else False
    split = next((s.index for s in g.stages if s.index > joint and s.name.startswith("aot_")), None)
    return snapshot.index >= joint and (split is None or snapshot.index < split)


def merge_removed(current: list[str], previous: list[str],
                  removed: set[str]) -> list[tuple[str, bool]]:
    """Interleave removed nodes (from the previous snapshot's order) into the current order.

    Each removed node goes right after the nearest node that preceded it in the previous graph
    and still exists. Returns (name, is_removed) pairs.
    """
    cur = set(current)
    after: dict[str | None, list[str]] = {}
    anchor: str | None = None
    for name in previous:
        if name in removed and name not in cur:
            after.setdefault(anchor, []).append(name)
        elif name in cur:
            anchor = name
    out: list[tuple[str, bool]] = [(n, True) for n in after.get(None, [])]
    for name in current:
        out.append((name, False))
        out.extend((n, True) for n in after.get(name, []))
    return out


@dataclass
class StageDiff:
    """What differs between the graphs of two snapshots ``a`` (before) and ``b`` (after)."""

    a: StageInfo
    b: StageInfo
    before: Graph
    after: Graph
    added: list[str]
    removed: list[str]
    changed: list[str]

    def status(self) -> dict[str, str]:
        """Every node of the union: added | removed | changed | same."""
        out = {n.name: "same" for n in self.after}
        out.update({n: "added" for n in self.added})
        out.update({n: "changed" for n in self.changed})
        out.update({n: "removed" for n in self.removed})
        return out

    def union(self) -> Graph:
        """The nodes of ``after`` with the removed ones of ``before`` where they stood."""
        order = merge_removed([n.name for n in self.after], [n.name for n in self.before],
                              set(self.removed))
        nodes = [self.before.get(name) if gone else self.after.get(name) for name, gone in order]
        return Graph([n for n in nodes if n is not None], self.after.graph_id,
                     f"{stage_label(self.a)} → {stage_label(self.b)}")

    def removed_edges(self) -> list[tuple[str, str]]:
        """Edges from removed nodes to the surviving nodes they fed."""
        gone = set(self.removed)
        return [(r, u) for r in self.removed for u in self.before.get(r).users
                if u in self.after and u not in gone]


def stage_diff(g: GraphRecord, a: StageInfo, b: StageInfo, before: Graph,
               after: Graph) -> StageDiff:
    """The difference between snapshots ``a`` and ``b`` (graphs ``before`` and ``after``): what
    the capture recorded when ``b`` is the snapshot right after ``a``, else computed by name and
    signature."""
    snaps = g.snapshots()
    adjacent = a.index < b.index and snaps.index(b) == snaps.index(a) + 1
    if adjacent:
        ch = g.stage_changes(b)
        added = [n for n in ch["added"] if n in after]
        removed = [n for n in ch["removed"] if n in before and n not in after]
        changed = [n for n in ch["changed"] if n in after and n in before]
    else:
        added = [n.name for n in after if n.name not in before]
        removed = [n.name for n in before if n.name not in after]
        changed = [n.name for n in after
                   if n.name in before and before.get(n.name).signature() != n.signature()]
    return StageDiff(a, b, before, after, added, removed, changed)
