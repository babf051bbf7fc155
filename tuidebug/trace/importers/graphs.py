"""The graphs and compiles an import builds, and which graph a record's facts go to. No torch.

A Dynamo compile id (``0/0``) may hold several graphs: its forward and backward (or inference)
Inductor compiles, told apart by segment (``segments.py``); a second Inductor compile of the same
kind gets its own graph (``0_0-forward-2``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from tuidebug.trace.format import compressed, layout
from tuidebug.trace.format.graph_meta import StageEntry
from tuidebug.trace.format.kernel_entry import KernelEntry
from tuidebug.trace.importers import records as r
from tuidebug.trace.format import fxtext
from tuidebug.trace.format.fxtext import GraphIndex, ParsedGraph
from tuidebug.trace.importers.segments import Segment, Segmentation
from tuidebug.trace.format.writer import GraphWriter
from tuidebug.trace.format import safefile


@dataclass
class ImportedGraph:
    id: str
    kind: str
    compile_id: str
    out: GraphWriter  # writes this graph's files
    aot_id: str | None = None
    stages: list[StageEntry] = field(default_factory=list)
    pending: list[StageEntry] = field(default_factory=list)  # passes before next snapshot
    last_fp: dict[str, Any] | None = None
    last_md5: str | None = None
    last_file: str | None = None
    last_nodes: int = 0
    fx_source: dict[str, Any] = field(default_factory=dict)
    kernel_index: list[KernelEntry] = field(default_factory=list)
    handles: dict[str, dict[str, Any]] = field(default_factory=dict)
    pre_to_post: dict[str, Any] = field(default_factory=dict)
    status: str = "ok"
    t0: float | None = None
    phase_times: dict[str, float] = field(default_factory=dict)
    cache: dict[str, str] = field(default_factory=dict)
    output_code_file: str | None = None
    stage_durations: dict[str, float] = field(default_factory=dict)
    extra_meta: dict[str, Any] = field(default_factory=dict)
    log_lines: list[int] = field(default_factory=list)  # first and last record line
    has_code: bool = False
    fused: int | None = None  # fusions seen in ir_post_fusion (debug folders), else unknown
    kernels: int = 0  # len(kernel_index) when meta.json was written (kernel_index then freed)
    missing: list[str] | None = None  # what meta.json said the log lacks, when written

    @property
    def dir(self) -> Path:
        return self.out.dir

    def add_stage(self, entry: StageEntry) -> None:
        """Add a stage after the passes timed since the previous one."""
        self.flush_pending()
        entry["index"] = len(self.stages)
        self.stages.append(entry)

    def flush_pending(self) -> None:
        for p in self.pending:
            p["index"] = len(self.stages)
            self.stages.append(p)
        self.pending = []

    def unchanged_stage(self, stage: str) -> StageEntry:
        """The entry of a stage whose graph is the previous snapshot's (same payload md5)."""
        return {"name": stage, "kind": "stage", "subsystem": None,
                "duration_s": self.stage_durations.get(stage), "changed": False,
                "file": self.last_file, "nodes": self.last_nodes,
                "counts": {"added": 0, "removed": 0, "changed": 0},
                "note": "same graph as the previous stage"}

    def snapshot(self, stage: str, parsed: ParsedGraph, *, md5: str, line: int
                 ) -> tuple[int, dict[str, Any], StageEntry]:
        """A parsed graph as the next stage: (its index, the snapshot file's content, the stage
        entry); what it changed is against the previous snapshot."""
        fp = layout.fingerprint_nodes(parsed.nodes)
        if self.last_fp is None and self.last_file and layout.is_fx_text(self.last_file):
            self.last_fp = self._text_fingerprint(self.last_file)
        changes = layout.diff_fingerprints(self.last_fp, fp) if self.last_fp is not None else {
            "added": list(fp), "removed": [], "changed": []}
        index = len(self.stages) + len(self.pending)
        fname = layout.stage_file(index, stage)  # the name GraphWriter.write_stage gives it
        data = parsed.to_json(self.id, stage)
        data["changes"] = changes
        data["source_line"] = line
        for n in parsed.nodes:
            if n.get("source") and n["op"] != "placeholder":
                self.fx_source[n["name"]] = n["source"]
        first = self.last_fp is None
        self.last_fp, self.last_md5, self.last_file = fp, md5 or None, fname
        self.last_nodes = len(parsed.nodes)
        return index, data, {
            "name": stage, "kind": "stage", "subsystem": None,
            "duration_s": self.stage_durations.get(stage),
            "changed": first or any(changes.values()),
            "file": fname, "nodes": len(parsed.nodes),
            "counts": {k: len(v) for k, v in changes.items()}}

    def text_snapshot(self, stage: str, index: GraphIndex, *, md5: str
                      ) -> tuple[int, dict[str, Any]]:
        """A printed graph kept as text (``index``: what it says without parsing it) as the
        next stage: (its index, the stage entry). What it changed is told when it is read."""
        n = len(self.stages) + len(self.pending)
        fname = layout.stage_file(n, stage, fx_text=True)
        self.fx_source.update(index.sources)
        self.last_fp, self.last_md5, self.last_file = None, md5 or None, fname
        self.last_nodes = index.nodes
        return n, {"name": stage, "kind": "stage", "subsystem": None,
                   "duration_s": self.stage_durations.get(stage), "changed": None,
                   "file": fname, "nodes": index.nodes}

    def _text_fingerprint(self, file: str) -> dict[str, Any]:
        """The node prints of a snapshot this import kept as text (an eager snapshot after it
        is compared with it)."""
        try:
            text = compressed.read_bytes(self.out.path(file), safefile.MAX_JSON_BYTES).decode(
                "utf-8", errors="replace")
        except (OSError, ValueError):
            return {}
        return layout.fingerprint_nodes(fxtext.parse_graph(text).nodes)

    def has_stage(self, stage: str) -> bool:
        return any(s["name"] == stage and s.get("file") for s in self.stages)

    def set_phase(self, phase: str, ts: float | None) -> None:
        """The phase's start, as an offset from the graph's first event (first time only)."""
        if phase in self.phase_times:
            return
        if ts is None or self.t0 is None:
            if ts is None:
                return
            self.t0 = ts
        self.phase_times[phase] = round(ts - self.t0, 6)

    def handle(self, h: str) -> dict[str, Any]:
        return self.handles.setdefault(h, {"ir_nodes": [], "fx_nodes": [], "stack_traces": []})


@dataclass
class ImportedCompile:
    id: str
    detail: dict[str, Any] = field(default_factory=lambda: {"graphs": []})
    graphs: list[str] = field(default_factory=list)
    last_phase: str | None = None
    last_graph: str | None = None
    open_events: dict[str, float] = field(default_factory=dict)
    dynamic_dropped: int = 0
    artifact_files: set[str] = field(default_factory=set)  # compiles/<id>/… files written
    finished: bool = False  # its files written, its detail freed
    summary: dict[str, Any] | None = None  # its entry in the manifest's compiles


class GraphBook:
    """Every graph and compile of an import, and the graph each fact's target names."""

    def __init__(self, graph_writer: Callable[[str], GraphWriter]) -> None:
        self.graph_writer = graph_writer
        self.graphs: dict[str, ImportedGraph] = {}
        self.compiles: dict[str, ImportedCompile] = {}
        self.segs = Segmentation()
        self._seg_graph: dict[tuple[str, int], str] = {}
        self._kind_graphs: dict[tuple[str, str], str] = {}

    def compile(self, cid: str) -> ImportedCompile:
        c = self.compiles.get(cid)
        if c is None:
            c = self.compiles[cid] = ImportedCompile(cid)
            c.detail["id"] = cid
        return c

    def target(self, target: str, cid: str, rec_index: int) -> ImportedGraph | None:
        """The graph a fact about ``target`` (records.FRAME, SEGMENT …) lands in."""
        if target == r.SEGMENT:
            seg = self.segs.of_record.get(rec_index)
            if seg is None:
                return self.frame_graph(cid)
            return self.graph(cid, seg.kind or self.segs.frame_kind.get(cid, "inference"), seg)
        if target == r.FRAME:
            return self.frame_graph(cid)
        if target == r.FRAME_IF_GRAPH:
            return self.frame_graph(cid) if cid in self.segs.has_graph else None
        if target == r.INFERENCE:
            return self.graph(cid, "inference")
        return self.graph_of_kind(cid, target)  # FORWARD, BACKWARD

    def graph(self, cid: str, kind: str, seg: Segment | None = None) -> ImportedGraph:
        """The graph of compile ``cid`` and ``kind``; a second Inductor compile of the same kind
        gets its own graph (``…-forward-2``)."""
        if seg is not None:
            key = (cid, seg.index)
            gid = self._seg_graph.get(key)
            if gid is not None:
                return self.graphs[gid]
            existing = self._kind_graphs.get((cid, kind))
            if existing is not None and not any(
                    k[0] == cid and v == existing for k, v in self._seg_graph.items()):
                self._seg_graph[key] = existing
                g = self.graphs[existing]
                g.aot_id = g.aot_id or seg.aot_id
                return g
            g = self._new_graph(cid, kind)
            g.aot_id = seg.aot_id
            self._seg_graph[key] = g.id
            self._kind_graphs.setdefault((cid, kind), g.id)
            return g
        gid = self._kind_graphs.get((cid, kind))
        if gid is not None:
            return self.graphs[gid]
        g = self._new_graph(cid, kind)
        self._kind_graphs[(cid, kind)] = g.id
        return g

    def _new_graph(self, cid: str, kind: str) -> ImportedGraph:
        gid = layout.graph_id(cid, kind)
        n = 2
        while gid in self.graphs:
            gid = f"{layout.graph_id(cid, kind)}-{n}"
            n += 1
        g = ImportedGraph(gid, kind, cid, self.graph_writer(gid))
        self.graphs[gid] = g
        self.compile(cid).graphs.append(gid)
        return g

    def frame_graph(self, cid: str) -> ImportedGraph:
        return self.graph(cid, self.segs.frame_kind.get(cid, "inference"))

    def graph_of_kind(self, cid: str, kind: str) -> ImportedGraph:
        for s in self.segs.by_compile.get(cid, []):
            if s.kind == kind:
                return self.graph(cid, kind, s)
        return self.graph(cid, kind)

    def touch(self, g: ImportedGraph, lineno: int) -> None:
        if not g.log_lines:
            g.log_lines = [lineno, lineno]
        else:
            g.log_lines[1] = lineno
        self.compile(g.compile_id).last_graph = g.id

    def mark_restart(self, cid: str, attempts: dict[str, int]) -> None:
        """A compile attempt that Dynamo restarted (``0/0`` when ``0/0_1`` exists: ``attempts``,
        from ``attempts_by_frame``) never got metrics of its own; its graphs are marked
        "restarted", as a live capture does."""
        c = self.compiles[cid]
        base, att = _attempt(cid)
        if att < attempts.get(base, 0) and "metrics" not in c.detail:
            c.detail["restarted"] = True
            for gid in c.graphs:
                g = self.graphs[gid]
                if g.status == "ok" and not g.has_code:
                    g.status = "restarted"


def _attempt(cid: str) -> tuple[str, int]:
    base, _, att = cid.rpartition("_")
    n = safefile.to_int(att)
    return (base, n) if base and n is not None and n >= 0 else (cid, 0)


def attempts_by_frame(cids: Iterable[str]) -> dict[str, int]:
    """The last attempt of each frame compile (``0/0`` -> 1 when ``0/0_1`` is among them)."""
    out: dict[str, int] = {}
    for cid in cids:
        base, att = _attempt(cid)
        out[base] = max(out.get(base, 0), att)
    return out
