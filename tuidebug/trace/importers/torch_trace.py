"""Import a TORCH_TRACE structured log into a tuidebug trace directory. Pure text; no torch.

The log is read twice: ``tracelog.scan`` indexes its records (headers, payload byte ranges,
checksums), then the records are replayed in order and turned into the same layout a live
capture writes: ``graphs/<compile id>-<kind>/`` with a snapshot per graph the log printed
(Dynamo, pre-grad, AOT joint / forward / backward / inference, post-grad), the passes Inductor
timed (``pass.*`` chromium events, without snapshots), the output code split into kernels,
provenance when the log has it, and ``compiles/<id>.json`` with metrics, guards, graph breaks,
recompile reasons, cache hits and misses, dynamic-shape events and every other artifact.

The Inductor compiles of one Dynamo frame (forward, then possibly much later backward) share a
compile id in the log; they are told apart by the ``# AOT ID: ['0_forward']`` line of their
output code, and by order where the output code is missing.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable

from tuidebug.trace import atomic, schema
from tuidebug.trace import layout
from tuidebug.trace.importers import fxtext, log_rank, tracelog
from tuidebug.trace.importers.tracelog import Record
from tuidebug.trace.writer import TraceWriter

# What a TORCH_TRACE log never holds (shown as "not in this log; trace with tuidebug to get it")
MISSING_ALWAYS = [
    "per-pass snapshots",
    "fusion decisions",
    "autotune choices",
    "Inductor IR (ir_pre_fusion / ir_post_fusion)",
    "eager-vs-compiled accuracy check",
    "kernel run times",
]
MISSING_PROVENANCE = "kernel provenance (the log has it with TORCH_COMPILE_DEBUG=1 or " \
                     "torch._inductor.config.trace.provenance_tracking_level=1)"

_AOT_ID_RE = re.compile(r"AOT ID: \['(?P<id>[^']*?)_(?P<kind>forward|backward|inference)'\]")

# Inductor-compile records, in the order one compile writes them (a record whose rank is not
# above the previous one's starts the next compile)
_SEG_ORDER = {
    "artifact:fx_graph_runnable": 0,
    "artifact:before_post_grad_graph": 1,
    "artifact:inductor_post_grad_graph": 2,
    "inductor_post_grad_graph": 2,
    "inductor_output_code": 3,
    "artifact:inductor_provenance_tracking_node_mappings": 4,
    "artifact:inductor_provenance_tracking_kernel_stack_traces": 5,
    "artifact:fx_graph_cache_miss": 6,
    "artifact:fx_graph_cache_hit": 6,
    "artifact:fx_graph_cache_bypass": 6,
}
_SEG_START_CHROMIUM = {"inductor_compile", "AOTAutogradCache.inductor_load",
                       "compile_fx.<locals>.bw_compiler"}

# chromium (dynamo_timed) event -> compilation phase (tuidebug.trace.schema.PHASES)
_PHASE_OF_EVENT = {
    "dynamo": "dynamo", "entire_frame_compile": "dynamo", "bytecode_tracing": "dynamo",
    "_recursive_pre_grad_passes": "pre_grad",
    "create_aot_dispatcher_function": "aot", "aot_trace_joint_graph": "aot",
    "_recursive_joint_graph_passes": "joint_graph",
    "min_cut_rematerialization_partition": "partition", "default_partition": "partition",
    "_recursive_post_grad_passes": "post_grad",
    "GraphLowering.run": "lowering",
    "Scheduler.__init__": "scheduling",
    "Scheduler.codegen": "codegen",
    "PythonWrapperCodegen.generate": "codegen",
    "PyCodeCache.load_by_key_path": "kernel_compile", "async_compile.wait": "kernel_compile",
    "compile_file": "kernel_compile",
}
_INDUCTOR_PHASES = {"post_grad", "lowering", "scheduling", "codegen", "kernel_compile"}
_STAGE_DURATION_EVENT = {"_recursive_pre_grad_passes": "pre_grad",
                         "_recursive_joint_graph_passes": "joint_graph_passes",
                         "_recursive_post_grad_passes": "post_grad"}

_DYNAMIC_SHAPE_EVENTS = {
    "create_symbol", "create_unbacked_symbol", "guard_added", "guard_added_fast",
    "symbolic_shape_specialization", "propagate_real_tensors_provenance", "expression_created",
    "unbacked_symbol", "missing_fake_kernel", "mismatched_fake_kernel", "create_symbolic_sizes",
}
_SKIP_ARTIFACTS = {"torch_version"}
_GRAPH_EVENTS = {
    "dynamo_output_graph", "artifact:before_pre_grad_graph", "artifact:after_pre_grad_graph",
    "aot_joint_graph", "artifact:before_joint_graph", "artifact:after_joint_graph",
    "aot_inference_graph", "aot_forward_graph", "aot_backward_graph",
}
_MAX_DYNAMIC_EVENTS = 2000


@dataclass
class _Segment:
    cid: str
    index: int
    last_order: int = -1
    kind: str | None = None
    aot_id: str | None = None
    has_artifacts: bool = False


@dataclass
class ImportedGraph:
    id: str
    kind: str
    compile_id: str
    dir: Path
    aot_id: str | None = None
    stages: list[dict[str, Any]] = field(default_factory=list)
    pending: list[dict[str, Any]] = field(default_factory=list)  # passes before next snapshot
    last_fp: dict[str, Any] | None = None
    last_md5: str | None = None
    last_file: str | None = None
    last_nodes: int = 0
    fx_source: dict[str, Any] = field(default_factory=dict)
    kernel_index: list[dict[str, Any]] = field(default_factory=list)
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


@dataclass
class _Compile:
    id: str
    detail: dict[str, Any] = field(default_factory=lambda: {"graphs": []})
    graphs: list[str] = field(default_factory=list)
    last_phase: str | None = None
    last_graph: str | None = None
    open_events: dict[str, float] = field(default_factory=dict)
    dynamic_dropped: int = 0


class TorchTraceImporter:
    """One log -> one trace directory. ``run()`` returns the writer's manifest."""

    def __init__(self, log: str | os.PathLike[str] | None, out_dir: str | os.PathLike[str], *,
                 source: str | os.PathLike[str] | None = None, kind: str = "torch_trace",
                 ranks: list[int] | None = None,
                 on_progress: Callable[[str], None] | None = None) -> None:
        self.log = Path(log) if log is not None else None
        self.out = Path(out_dir)
        src = source if source is not None else log
        assert src is not None, "a log or a source is needed"
        self.source = Path(src)
        self.kind = kind
        self.ranks = ranks or []
        self.on_progress = on_progress
        self.warnings: list[str] = []
        self.graphs: dict[str, ImportedGraph] = {}
        self.compiles: dict[str, _Compile] = {}
        self.errors: list[dict[str, Any]] = []
        self.versions: dict[str, Any] = {}
        self.config_written = False
        self.has_provenance = False
        self.cache_hits = 0
        self.stack_cache: dict[str, Any] = {}
        self.strings: dict[int, str] = {}
        self.scan: tracelog.LogScan | None = None
        self.writer: TraceWriter | None = None
        self._seg_of: dict[int, _Segment] = {}
        self._segments: dict[str, list[_Segment]] = {}
        self._frame_kind: dict[str, str] = {}
        self._has_graph: set[str] = set()
        self._seg_graph: dict[tuple[str, int], str] = {}
        self._kind_graphs: dict[tuple[str, str], str] = {}
        self._pass_open: dict[tuple[str, str], float] = {}
        self._times: list[float] = []
        self._last_flush = 0.0

    # -- driver ---------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        if self.log is not None:
            self._progress(f"reading {self.log}")
            self.scan = tracelog.scan(self.log)
        else:
            self.scan = tracelog.LogScan(self.source)
        self.strings = self.scan.strings
        self.warnings += self.scan.warnings
        self._index()
        self.writer = TraceWriter(self.out, command=[], versions={})
        self.writer.manifest["pid"] = None
        self.writer.manifest["host"] = None
        self.writer.manifest["cwd"] = None
        if self.log is not None:
            with open(self.log, "rb") as f:
                for n, rec in enumerate(self.scan.records):
                    try:
                        self._record(f, rec)
                    except Exception as e:  # one odd record never loses the rest of the log
                        self.warn(f"{self.log_name}: line {rec.lineno}: {rec.name} could not be "
                                  f"imported ({type(e).__name__}: {e})")
                    if n % 2000 == 0 and time.perf_counter() - self._last_flush > 2:
                        self._progress(f"{n}/{len(self.scan.records)} records")
                        self._last_flush = time.perf_counter()
        self.before_finish()
        self._finish(time.perf_counter() - t0)
        return self.writer.manifest

    @property
    def log_name(self) -> str:
        return (self.log or self.source).name

    def before_finish(self) -> None:
        """Hook for importers that add files the log does not have (debug folders)."""

    def _progress(self, msg: str) -> None:
        if self.on_progress:
            try:
                self.on_progress(msg)
            except Exception:
                pass

    def warn(self, msg: str) -> None:
        if msg not in self.warnings and len(self.warnings) < 500:
            self.warnings.append(msg)

    # -- pass 1: which Inductor compile (graph) each record belongs to --------------------------
    def _index(self) -> None:
        assert self.scan is not None
        current: dict[str, _Segment] = {}
        frame_events: dict[str, set[str]] = {}
        for i, rec in enumerate(self.scan.records):
            cid = layout.compile_id_from_meta(rec.meta)
            if cid is None:
                continue
            name = rec.name
            frame_events.setdefault(cid, set()).add(name)
            seg = current.get(cid)
            if name == "chromium_event":
                ch = rec.chromium or {}
                ev = str(ch.get("name", ""))
                if ev in _SEG_START_CHROMIUM and ch.get("ph") == "B":
                    if seg is None or seg.has_artifacts:
                        seg = self._new_segment(cid, current)
                    self._seg_of[i] = seg
                elif _PHASE_OF_EVENT.get(ev) in _INDUCTOR_PHASES or \
                        ev.startswith("pass.post_grad_passes."):
                    if seg is None:
                        seg = self._new_segment(cid, current)
                    self._seg_of[i] = seg
                continue
            order = _SEG_ORDER.get(name)
            if order is None:
                continue
            if seg is None or order <= seg.last_order:
                seg = self._new_segment(cid, current)
            seg.last_order = order
            seg.has_artifacts = True
            self._seg_of[i] = seg
            if name == "inductor_output_code":
                m = _AOT_ID_RE.search(rec.first_payload_line)
                if m:
                    seg.kind, seg.aot_id = m["kind"], f"{m['id']}_{m['kind']}"
        for cid, events in frame_events.items():
            if cid in self._segments or events & _GRAPH_EVENTS:
                self._has_graph.add(cid)
        for cid, segs in self._segments.items():
            events = frame_events.get(cid, set())
            for s in segs:
                if s.kind is None:
                    if "aot_inference_graph" in events:
                        s.kind = "inference"
                    elif s.index == 0:
                        s.kind = "forward" if ("aot_joint_graph" in events
                                               or "aot_forward_graph" in events) else "inference"
                    else:
                        s.kind = "backward"
        for cid, events in frame_events.items():
            segs = self._segments.get(cid, [])
            first = next((s.kind for s in segs if s.kind != "backward"), None)
            if first is None:
                if "aot_inference_graph" in events:
                    first = "inference"
                elif events & {"aot_joint_graph", "aot_forward_graph", "aot_backward_graph"}:
                    first = "forward"
                else:
                    first = "inference"
            self._frame_kind[cid] = first

    def _new_segment(self, cid: str, current: dict[str, _Segment]) -> _Segment:
        segs = self._segments.setdefault(cid, [])
        seg = _Segment(cid, len(segs))
        segs.append(seg)
        current[cid] = seg
        return seg

    # -- graphs ---------------------------------------------------------------------------------
    def _compile(self, cid: str) -> _Compile:
        c = self.compiles.get(cid)
        if c is None:
            c = self.compiles[cid] = _Compile(cid)
            c.detail["id"] = cid
        return c

    def _graph(self, cid: str, kind: str, seg: _Segment | None = None) -> ImportedGraph:
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
            g = self._new_graph(cid, kind, unique=existing is not None)
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

    def _new_graph(self, cid: str, kind: str, unique: bool = False) -> ImportedGraph:
        gid = layout.graph_id(cid, kind)
        n = 2
        while gid in self.graphs:
            gid = f"{layout.graph_id(cid, kind)}-{n}"
            n += 1
        assert self.writer is not None
        g = ImportedGraph(gid, kind, cid, self.writer.graph_path(gid))
        self.graphs[gid] = g
        c = self._compile(cid)
        c.graphs.append(gid)
        return g

    def _frame_graph(self, cid: str) -> ImportedGraph:
        return self._graph(cid, self._frame_kind.get(cid, "inference"))

    def _touch(self, g: ImportedGraph, rec: Record) -> None:
        if not g.log_lines:
            g.log_lines = [rec.lineno, rec.lineno]
        else:
            g.log_lines[1] = rec.lineno
        c = self._compile(g.compile_id)
        c.last_graph = g.id

    # -- pass 2: records ------------------------------------------------------------------------
    def _record(self, f: IO[bytes], rec: Record) -> None:
        name = rec.name
        cid = layout.compile_id_from_meta(rec.meta)
        if name == "chromium_event":
            if cid is not None:
                self._chromium(rec, cid)
            return
        if cid is None:
            self._global(f, rec)
            return
        c = self._compile(cid)
        lines = c.detail.setdefault("log_lines", [rec.lineno, rec.lineno])
        lines[1] = rec.lineno
        handler = _HANDLERS.get(name)
        if handler is not None:
            handler(self, f, rec, cid)
        elif rec.event == "artifact":
            self._artifact(f, rec, cid)
        elif rec.event in _DYNAMIC_SHAPE_EVENTS:
            self._dynamic(rec, cid)
        elif rec.event in ("describe_storage", "describe_tensor", "describe_source"):
            return
        else:
            other = c.detail.setdefault("other_events", {})
            other[rec.event] = other.get(rec.event, 0) + 1

    def _segment_graph(self, rec: Record, cid: str) -> ImportedGraph:
        seg = self._seg_of.get(rec.index)
        if seg is None:
            return self._frame_graph(cid)
        return self._graph(cid, seg.kind or self._frame_kind.get(cid, "inference"), seg)

    def _payload(self, f: IO[bytes], rec: Record) -> str:
        return tracelog.read_payload(f, rec)

    def _json_payload(self, f: IO[bytes], rec: Record) -> Any:
        text = self._payload(f, rec)
        if not text.strip():
            return None
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            if rec.payload_ok:
                return text  # some "json" artifacts are plain text (recompile_reasons)
            self.warn(f"{self.log_name}: line {rec.lineno}: {rec.name} payload is not valid "
                      "JSON (truncated?); kept as text")
            return text

    def _global(self, f: IO[bytes], rec: Record) -> None:
        if rec.name == "artifact:torch_version":
            data = self._json_payload(f, rec)
            if isinstance(data, dict):
                self.versions["torch"] = data.get("pytorch_version") or data.get("version")
                if data.get("commit"):
                    self.versions["torch_commit"] = data["commit"]

    # -- graphs in the log ----------------------------------------------------------------------
    def _snapshot(self, f: IO[bytes], rec: Record, g: ImportedGraph, stage: str) -> None:
        self._touch(g, rec)
        md5 = str(rec.meta.get("has_payload") or "")
        if md5 and md5 == g.last_md5 and g.last_file and rec.payload_ok:
            self._add_stage(g, {"name": stage, "kind": "stage", "subsystem": None,
                                "duration_s": g.stage_durations.get(stage), "changed": False,
                                "file": g.last_file, "nodes": g.last_nodes,
                                "counts": {"added": 0, "removed": 0, "changed": 0},
                                "note": "same graph as the previous stage"})
            return
        if not rec.payload_ok:
            self.warn(f"{self.log_name}: line {rec.lineno}: graph {g.id} stage {stage} comes from "
                      "a damaged payload; it may be incomplete")
        self.snapshot_text(g, stage, self._payload(f, rec), md5=md5, where=self.log_name,
                           line=rec.lineno, what=rec.name)

    def snapshot_text(self, g: ImportedGraph, stage: str, text: str, *, md5: str = "",
                      where: str = "", line: int = 0, what: str = "graph") -> bool:
        """Parse a printed FX graph and add it as a stage of ``g``. ``line`` is the line of the
        source file just above the text (payload lines are counted from it)."""
        parsed = fxtext.parse_graph(text)
        if parsed.bad_lines:
            at = ", ".join(str(line + x) for x in parsed.bad_lines[:5])
            more = f" and {len(parsed.bad_lines) - 5} more" if len(parsed.bad_lines) > 5 else ""
            self.warn(f"{where}: line {at}{more}: a statement of {what} ({g.id}, stage {stage}) "
                      "is truncated or corrupt; skipped, the rest of the graph was kept")
        for p in parsed.problems:
            if not parsed.bad_lines or "truncated or corrupt" not in p:
                self.warn(f"{where}: line {line}: {what} ({g.id}, stage {stage}): {p}")
        if not parsed.nodes:
            return False
        fp = layout.fingerprint_nodes(parsed.nodes)
        changes = layout.diff_fingerprints(g.last_fp, fp) if g.last_fp is not None else {
            "added": list(fp), "removed": [], "changed": []}
        index = len(g.stages) + len(g.pending)
        fname = layout.stage_file(index, stage)
        data = parsed.to_json(g.id, stage)
        data["changes"] = changes
        data["source_line"] = line
        layout.write_json_compact(g.dir / fname, data)
        for n in parsed.nodes:
            if n.get("source") and n["op"] != "placeholder":
                g.fx_source[n["name"]] = n["source"]
        first = g.last_fp is None
        g.last_fp, g.last_md5, g.last_file, g.last_nodes = fp, md5 or None, fname, len(parsed.nodes)
        self._add_stage(g, {
            "name": stage, "kind": "stage", "subsystem": None,
            "duration_s": g.stage_durations.get(stage),
            "changed": first or any(changes.values()),
            "file": fname, "nodes": len(parsed.nodes),
            "counts": {k: len(v) for k, v in changes.items()}})
        return True

    def _add_stage(self, g: ImportedGraph, entry: dict[str, Any]) -> None:
        for p in g.pending:
            p["index"] = len(g.stages)
            g.stages.append(p)
        g.pending = []
        entry["index"] = len(g.stages)
        g.stages.append(entry)

    def _has_stage(self, g: ImportedGraph, stage: str) -> bool:
        return any(s["name"] == stage and s.get("file") for s in g.stages)

    def _h_dynamo_graph(self, f: IO[bytes], rec: Record, cid: str) -> None:
        self._snapshot(f, rec, self._frame_graph(cid), "dynamo")

    def _h_before_pre_grad(self, f: IO[bytes], rec: Record, cid: str) -> None:
        g = self._frame_graph(cid)
        if not self._has_stage(g, "dynamo"):
            self._snapshot(f, rec, g, "dynamo")

    def _h_after_pre_grad(self, f: IO[bytes], rec: Record, cid: str) -> None:
        self._snapshot(f, rec, self._frame_graph(cid), "pre_grad")

    def _h_aot_joint(self, f: IO[bytes], rec: Record, cid: str) -> None:
        self._snapshot(f, rec, self._frame_graph(cid), "aot_joint")

    def _h_before_joint(self, f: IO[bytes], rec: Record, cid: str) -> None:
        g = self._frame_graph(cid)
        if not self._has_stage(g, "aot_joint"):
            self._snapshot(f, rec, g, "aot_joint")

    def _h_after_joint(self, f: IO[bytes], rec: Record, cid: str) -> None:
        self._snapshot(f, rec, self._frame_graph(cid), "joint_graph_passes")

    def _h_aot_inference(self, f: IO[bytes], rec: Record, cid: str) -> None:
        # logged before the joint-graph passes: the graph AOTAutograd traced
        g = self._graph(cid, "inference")
        if not self._has_stage(g, "aot_joint"):
            self._snapshot(f, rec, g, "aot_joint")

    def _h_aot_forward(self, f: IO[bytes], rec: Record, cid: str) -> None:
        self._snapshot(f, rec, self._graph_of_kind(cid, "forward"), "aot_forward")

    def _h_aot_backward(self, f: IO[bytes], rec: Record, cid: str) -> None:
        self._snapshot(f, rec, self._graph_of_kind(cid, "backward"), "aot_backward")

    def _graph_of_kind(self, cid: str, kind: str) -> ImportedGraph:
        for s in self._segments.get(cid, []):
            if s.kind == kind:
                return self._graph(cid, kind, s)
        return self._graph(cid, kind)

    def _h_before_post_grad(self, f: IO[bytes], rec: Record, cid: str) -> None:
        g = self._segment_graph(rec, cid)
        stage = f"aot_{g.kind}"
        if not self._has_stage(g, stage):
            self._snapshot(f, rec, g, stage)

    def _h_post_grad(self, f: IO[bytes], rec: Record, cid: str) -> None:
        g = self._segment_graph(rec, cid)
        self._snapshot(f, rec, g, "post_grad")

    def _h_runnable(self, f: IO[bytes], rec: Record, cid: str) -> None:
        g = self._segment_graph(rec, cid)
        self._touch(g, rec)
        text = self._payload(f, rec)
        if text:
            atomic.write_text(g.dir / schema.REPRO_DIR / "fx_graph_runnable.py", text)

    def _h_output_code(self, f: IO[bytes], rec: Record, cid: str) -> None:
        g = self._segment_graph(rec, cid)
        self._touch(g, rec)
        code = self._payload(f, rec)
        if not code.strip():
            self.warn(f"{self.log_name}: line {rec.lineno}: output code of {g.id} is empty")
            return
        if not rec.payload_ok:
            self.warn(f"{self.log_name}: line {rec.lineno}: output code of {g.id} comes from a "
                      "damaged payload; it may be incomplete")
        g.kernel_index = layout.write_output_code(g.dir, code)
        g.has_code = True
        info = rec.meta.get("inductor_output_code") or {}
        if isinstance(info, dict) and info.get("filename"):
            g.output_code_file = str(info["filename"])
        self._phase(g, "kernel_compile", None)

    def _h_provenance(self, f: IO[bytes], rec: Record, cid: str) -> None:
        g = self._segment_graph(rec, cid)
        self._touch(g, rec)
        if not rec.has_payload:
            return  # a cache hit logs the artifact without its content
        data = self._json_payload(f, rec)
        if not isinstance(data, dict):
            return
        self.has_provenance = True
        if rec.name.endswith("node_mappings"):
            g.pre_to_post = data.get("preToPost") or {}
            for h, info in layout.provenance_handles(data, None).items():
                g.handles.setdefault(h, {"ir_nodes": [], "fx_nodes": [], "stack_traces": []})[
                    "fx_nodes"] = info["fx_nodes"]
            g.extra_meta["provenance_mappings"] = {
                k: v for k, v in data.items() if k in ("postToPre", "postToCppCode", "version")}
        else:
            for h, info in layout.provenance_handles(None, data).items():
                g.handles.setdefault(h, {"ir_nodes": [], "fx_nodes": [], "stack_traces": []})[
                    "stack_traces"] = info["stack_traces"]

    def _h_fx_cache(self, f: IO[bytes], rec: Record, cid: str) -> None:
        g = self._segment_graph(rec, cid)
        self._touch(g, rec)
        result = rec.name.rsplit("_", 1)[-1]  # hit | miss | bypass
        g.cache["fx_graph"] = result
        self._cache_event(f, rec, cid, "fx_graph", result, g.id)

    def _h_aot_cache(self, f: IO[bytes], rec: Record, cid: str) -> None:
        result = rec.name.rsplit("_", 1)[-1]
        gid = None
        if cid in self._has_graph:
            g = self._frame_graph(cid)
            g.cache["aotautograd"] = result
            gid = g.id
        self._cache_event(f, rec, cid, "aotautograd", result, gid)

    def _cache_event(self, f: IO[bytes], rec: Record, cid: str, cache: str, result: str,
                     gid: str | None) -> None:
        if result == "hit":
            self.cache_hits += 1
        data = self._json_payload(f, rec) if rec.has_payload else None
        entry: dict[str, Any] = {"cache": cache, "result": result, "graph": gid,
                                 "line": rec.lineno}
        if isinstance(data, dict):
            entry.update({k: v for k, v in data.items() if k not in ("components",)})
        self._compile(cid).detail.setdefault("cache", []).append(entry)

    # -- compile-level records ------------------------------------------------------------------
    def _h_dynamo_start(self, f: IO[bytes], rec: Record, cid: str) -> None:
        stack = (rec.meta.get("dynamo_start") or {}).get("stack") or []
        frames = []
        for fr in stack if isinstance(stack, list) else []:
            if not isinstance(fr, dict):
                continue
            fn = fr.get("filename")
            file = self.strings.get(fn, str(fn)) if isinstance(fn, int) else str(fn)
            frames.append({"file": file, "line": fr.get("line"), "fn": fr.get("name"),
                           "code": fr.get("loc")})
        c = self._compile(cid)
        c.detail["stack"] = frames
        user = [fr for fr in frames if "/torch/" not in fr["file"].replace("\\", "/")]
        if user:
            c.detail["origin"] = user[-1]

    def _h_metrics(self, f: IO[bytes], rec: Record, cid: str) -> None:
        backward = rec.event == "bwd_compilation_metrics"
        m = rec.meta.get(rec.event) or {}
        if not isinstance(m, dict):
            return
        c = self._compile(cid)
        c.detail["backward_metrics" if backward else "metrics"] = m
        if not backward and not self.config_written and isinstance(m.get("inductor_config"), str):
            self._write_config(m)
        if m.get("python_version") and "python" not in self.versions:
            self.versions["python"] = str(m["python_version"]).split()[0]
        for k in ("start_time",):
            if isinstance(m.get(k), (int, float)):
                self._times.append(float(m[k]))
        if isinstance(m.get("end_time_us"), (int, float)):
            self._times.append(m["end_time_us"] / 1e6)
        if m.get("fail_type"):
            self._failure(cid, m, rec, backward)

    def _h_guards(self, f: IO[bytes], rec: Record, cid: str) -> None:
        payload = self._json_payload(f, rec) if rec.event == "dynamo_guards" \
            else self._payload(f, rec)
        self._compile(cid).detail["guards"] = payload

    def _h_append(self, f: IO[bytes], rec: Record, cid: str) -> None:
        key = rec.name.split(":", 1)[1]
        data = self._json_payload(f, rec) if (rec.meta.get("artifact") or {}).get(
            "encoding") == "json" else self._payload(f, rec)
        self._compile(cid).detail.setdefault(key, []).append(data)

    def _h_dynamo_error(self, f: IO[bytes], rec: Record, cid: str) -> None:
        c = self._compile(cid)
        c.detail["dynamo_error"] = self._payload(f, rec)
        c.detail["dynamo_error_line"] = rec.lineno

    def _artifact(self, f: IO[bytes], rec: Record, cid: str) -> None:
        name = rec.name.split(":", 1)[1]
        if name in _SKIP_ARTIFACTS:
            return
        c = self._compile(cid)
        entry: dict[str, Any] = {"name": name, "line": rec.lineno,
                                 "encoding": (rec.meta.get("artifact") or {}).get("encoding")}
        if rec.has_payload:
            safe = layout.safe_id(name)[:80]
            rel = f"{schema.COMPILES_DIR}/{layout.safe_id(cid)}/{safe}"
            n = 1
            arts = c.detail.setdefault("artifacts", [])
            while any(a.get("file") == rel + ".txt" for a in arts):
                n += 1
                rel = f"{schema.COMPILES_DIR}/{layout.safe_id(cid)}/{safe}-{n}"
            rel += ".txt"
            assert self.writer is not None
            atomic.write_text(self.writer.path(rel), self._payload(f, rec))
            entry["file"] = rel
        c.detail.setdefault("artifacts", []).append(entry)

    def _dynamic(self, rec: Record, cid: str) -> None:
        c = self._compile(cid)
        events = c.detail.setdefault("dynamic_shapes", [])
        if len(events) >= _MAX_DYNAMIC_EVENTS:
            c.dynamic_dropped += 1
            return
        value = rec.meta.get(rec.event)
        entry = {"event": rec.event, "line": rec.lineno}
        if isinstance(value, dict):
            for k, v in value.items():
                if k in ("stack", "user_stack", "frame_locals"):
                    continue
                entry[k] = v
        events.append(entry)

    # -- chromium events: phases, timings, passes -----------------------------------------------
    def _chromium(self, rec: Record, cid: str) -> None:
        ch = rec.chromium
        if not isinstance(ch, dict):
            return
        name = str(ch.get("name", ""))
        ph = ch.get("ph")
        ts = ch.get("ts")
        if not isinstance(ts, (int, float)):
            return
        ts = ts / 1e6
        c = self._compile(cid)
        if cid not in self._has_graph:
            phase = _PHASE_OF_EVENT.get(name)
            if ph == "B" and phase is not None:
                c.last_phase = phase
            return
        seg = self._seg_of.get(rec.index)
        if name.startswith("pass."):
            parts = name.split(".", 2)
            if len(parts) != 3:
                return
            _, subsystem, passname = parts
            g = self._graph(cid, seg.kind or "inference", seg) if seg is not None \
                else self._frame_graph(cid)
            key = (g.id, name)
            if ph == "B":
                self._pass_open[key] = ts
            elif ph == "E" and key in self._pass_open:
                start = self._pass_open.pop(key)
                g.pending.append({"name": passname, "kind": "pass", "subsystem": subsystem,
                                  "duration_s": round(ts - start, 6), "changed": None,
                                  "note": "not in this log: whether this pass changed the graph "
                                          "(trace with tuidebug to get per-pass snapshots)"})
            return
        phase = _PHASE_OF_EVENT.get(name)
        if phase in _INDUCTOR_PHASES and seg is not None:
            g = self._graph(cid, seg.kind or "inference", seg)
        elif phase is not None or name in _SEG_START_CHROMIUM:
            g = self._segment_or_frame(cid, seg)
        else:
            return
        if g.t0 is None:
            g.t0 = ts
        if ph == "B":
            if phase is not None:
                self._phase(g, phase, ts)
                c.last_phase = phase
                c.last_graph = g.id
            if name in _STAGE_DURATION_EVENT:
                c.open_events[f"{g.id}:{name}"] = ts
        elif ph == "E" and name in _STAGE_DURATION_EVENT:
            start = c.open_events.pop(f"{g.id}:{name}", None)
            if start is not None:
                g.stage_durations[_STAGE_DURATION_EVENT[name]] = round(ts - start, 6)
                stage = _STAGE_DURATION_EVENT[name]
                for s in g.stages:
                    if s["name"] == stage and s.get("duration_s") is None:
                        s["duration_s"] = g.stage_durations[stage]

    def _segment_or_frame(self, cid: str, seg: _Segment | None) -> ImportedGraph:
        if seg is not None:
            return self._graph(cid, seg.kind or "inference", seg)
        return self._frame_graph(cid)

    def _phase(self, g: ImportedGraph, phase: str, ts: float | None) -> None:
        if phase in g.phase_times:
            return
        if ts is None or g.t0 is None:
            if ts is None:
                return
            g.t0 = ts
        g.phase_times[phase] = round(ts - g.t0, 6)

    # -- failures -------------------------------------------------------------------------------
    def _failure(self, cid: str, m: dict[str, Any], rec: Record, backward: bool) -> None:
        c = self._compile(cid)
        fail_type = str(m.get("fail_type"))
        reason = str(m.get("fail_reason") or "")
        typ, message = fail_type, reason
        mm = re.match(r"^(?P<t>[A-Za-z_][\w.]*(?:Error|Exception|Failed|Unsupported|Exit|"
                      r"Interrupt)): (?P<m>.*)$", reason, re.S)
        if mm:
            typ, message = mm["t"], mm["m"]
        gid = c.last_graph
        if backward:
            gid = next((g for g in c.graphs if self.graphs[g].kind == "backward"), gid)
        phase = c.last_phase or "dynamo"
        g = self.graphs.get(gid) if gid else None
        if g is not None and g.has_code and phase not in ("kernel_compile", "runtime"):
            phase = "kernel_compile"
        tb = c.detail.get("dynamo_error")
        if not tb:
            stack = m.get("exception_stack_trace")
            tb = "".join(stack) if isinstance(stack, list) else ""
        err = {"phase": phase, "type": typ, "message": _clip(message, 20000),
               "traceback": _clip(str(tb), 60000), "graph": gid, "compile_id": cid,
               "wrapper_type": fail_type, "log_line": rec.lineno,
               "user_frame": {"file": m.get("fail_user_frame_filename"),
                              "line": m.get("fail_user_frame_lineno")}}
        c.detail["error"] = err
        if fail_type == "SkipFrame":
            return  # Dynamo chose to run the frame eagerly: not a failure of the compile
        self.errors.append(err)
        if g is not None:
            g.status = "failed"
            atomic.write_json(g.dir / schema.ERROR, err)

    # -- config and finish ----------------------------------------------------------------------
    def _write_config(self, m: dict[str, Any]) -> None:
        def load(key: str) -> Any:
            try:
                v = json.loads(m.get(key) or "null")
            except (TypeError, json.JSONDecodeError):
                return None
            return v if isinstance(v, dict) else None

        values = load("inductor_config")
        if values is None:
            return
        assert self.writer is not None
        atomic.write_json(self.writer.path(schema.CONFIG), {
            "values": values, "changed": {}, "set_by_tuidebug": [],
            "defaults": "not in this log: which flags differ from their defaults "
                        "(trace with tuidebug to get it)",
            "dynamo": load("dynamo_config"), "functorch": load("functorch_config"),
            "compiler": load("compiler_config"),
        })
        self.config_written = True

    def _finish(self, elapsed: float) -> None:
        w = self.writer
        assert w is not None and self.scan is not None
        self._mark_restarts()
        for g in self.graphs.values():
            if g.pending:
                for p in g.pending:
                    p["index"] = len(g.stages)
                    g.stages.append(p)
                g.pending = []
            if g.kernel_index:
                atomic.write_json(g.dir / schema.PROVENANCE, layout.provenance_json(
                    g.kernel_index, g.handles, g.fx_source, g.pre_to_post, self.stack_cache))
            extra = dict(g.extra_meta)
            extra.update({"imported": True, "cache": g.cache, "aot_id": g.aot_id,
                          "log_lines": g.log_lines, "output_code_file": g.output_code_file,
                          "missing": self.missing()})
            atomic.write_json(g.dir / schema.META, layout.graph_meta(
                g.id, g.kind, g.compile_id, g.status, g.stages, g.phase_times,
                len(g.kernel_index),
                {"fused": g.fused or 0, "rejected": 0, "recorded": False}, **extra))
        compiles = []
        for cid, c in self.compiles.items():
            if c.dynamic_dropped:
                c.detail["dynamic_shapes_dropped"] = c.dynamic_dropped
            c.detail["graphs"] = c.graphs
            detail = {"id": cid, **c.detail}
            if not c.graphs and set(detail) <= {"id", "graphs", "log_lines"}:
                continue  # a compile id with only timing events
            atomic.write_json(w.path(schema.COMPILES_DIR, f"{layout.safe_id(cid)}.json"), detail)
            metrics = c.detail.get("metrics") or {}
            compiles.append({"id": cid, "graphs": c.graphs, "summary": {
                k: metrics.get(k) for k in ("co_name", "co_filename", "co_firstlineno",
                                            "entire_frame_compile_time_s",
                                            "inductor_compile_time_s", "fail_type")}})
        m = w.manifest
        m["graphs"] = [{"id": g.id, "kind": g.kind, "compile_id": g.compile_id,
                        "status": g.status} for g in self.graphs.values()]
        m["compiles"] = compiles
        m["versions"] = {k: v for k, v in {**m["versions"], **self.versions}.items()
                         if k != "python" or v}
        if "python" not in self.versions:
            m["versions"].pop("python", None)
        if self._times:  # the compiles' own times, not the import's
            m["started_at"] = min(self._times)
        m["phase"] = self.errors[0]["phase"] if self.errors else (
            "kernel_compile" if any(g.has_code for g in self.graphs.values()) else None)
        m["current_graph"] = self.errors[0]["graph"] if self.errors else None
        m["warnings"] = list(self.warnings)
        rank = self.scan.rank  # from the records; else from the file's name (…_rank_1_…)
        if rank is None and self.log is not None:
            rank = log_rank(self.log)
        m["imported_from"] = {
            "kind": self.kind, "path": str(self.source.resolve()),
            "log": str(self.log.resolve()) if self.log is not None else None,
            "rank": rank, "ranks": self.ranks, "missing": self.missing(),
            "lines": self.scan.lines, "records": len(self.scan.records),
            "bad_lines": self.scan.bad_lines, "import_seconds": round(elapsed, 3),
            "source_pid": next((r.pid for r in self.scan.records if r.pid), None),
            **self.extra_imported_from(),
        }
        end = max(self._times) if self._times else None
        if self.errors:
            w.finish(schema.STATUS_FAILED, self.errors[0], finished_at=end)
        else:
            w.finish(schema.STATUS_OK, finished_at=end)

    def _mark_restarts(self) -> None:
        """A compile attempt that Dynamo restarted (``0/0`` when ``0/0_1`` exists) never got
        metrics of its own; its graphs are marked "restarted", as a live capture does."""
        def split(cid: str) -> tuple[str, int]:
            base, _, att = cid.rpartition("_")
            return (base, int(att)) if base and att.isdigit() else (cid, 0)

        attempts: dict[str, int] = {}
        for cid in self.compiles:
            base, att = split(cid)
            attempts[base] = max(attempts.get(base, 0), att)
        for cid, c in self.compiles.items():
            base, att = split(cid)
            if att < attempts.get(base, 0) and "metrics" not in c.detail:
                c.detail["restarted"] = True
                for gid in c.graphs:
                    g = self.graphs[gid]
                    if g.status == "ok" and not g.has_code:
                        g.status = "restarted"

    def extra_imported_from(self) -> dict[str, Any]:
        return {}

    def missing(self) -> list[str]:
        out = list(MISSING_ALWAYS)
        if not self.has_provenance:
            out.append(MISSING_PROVENANCE)
        if self.cache_hits:
            out.append("graphs of compiles served from a cache (a cache hit logs only what it "
                       "loaded)")
        return out


def _clip(text: str, limit: int) -> str:
    """Keep the start (what failed) and the end (where) of a long message."""
    if len(text) <= limit:
        return text
    head = limit // 3
    tail = limit - head
    return f"{text[:head]}\n… {len(text) - limit} characters omitted …\n{text[-tail:]}"


_HANDLERS: dict[str, Callable[[TorchTraceImporter, IO[bytes], Record, str], None]] = {
    "dynamo_start": TorchTraceImporter._h_dynamo_start,
    "dynamo_output_graph": TorchTraceImporter._h_dynamo_graph,
    "artifact:before_pre_grad_graph": TorchTraceImporter._h_before_pre_grad,
    "artifact:after_pre_grad_graph": TorchTraceImporter._h_after_pre_grad,
    "aot_joint_graph": TorchTraceImporter._h_aot_joint,
    "artifact:before_joint_graph": TorchTraceImporter._h_before_joint,
    "artifact:after_joint_graph": TorchTraceImporter._h_after_joint,
    "aot_inference_graph": TorchTraceImporter._h_aot_inference,
    "aot_forward_graph": TorchTraceImporter._h_aot_forward,
    "aot_backward_graph": TorchTraceImporter._h_aot_backward,
    "artifact:before_post_grad_graph": TorchTraceImporter._h_before_post_grad,
    "artifact:inductor_post_grad_graph": TorchTraceImporter._h_post_grad,
    "inductor_post_grad_graph": TorchTraceImporter._h_post_grad,
    "artifact:fx_graph_runnable": TorchTraceImporter._h_runnable,
    "inductor_output_code": TorchTraceImporter._h_output_code,
    "artifact:inductor_provenance_tracking_node_mappings": TorchTraceImporter._h_provenance,
    "artifact:inductor_provenance_tracking_kernel_stack_traces": TorchTraceImporter._h_provenance,
    "artifact:fx_graph_cache_miss": TorchTraceImporter._h_fx_cache,
    "artifact:fx_graph_cache_hit": TorchTraceImporter._h_fx_cache,
    "artifact:fx_graph_cache_bypass": TorchTraceImporter._h_fx_cache,
    "artifact:aotautograd_cache_miss": TorchTraceImporter._h_aot_cache,
    "artifact:aotautograd_cache_hit": TorchTraceImporter._h_aot_cache,
    "artifact:aotautograd_cache_bypass": TorchTraceImporter._h_aot_cache,
    "compilation_metrics": TorchTraceImporter._h_metrics,
    "bwd_compilation_metrics": TorchTraceImporter._h_metrics,
    "dynamo_cpp_guards_str": TorchTraceImporter._h_guards,
    "dynamo_guards": TorchTraceImporter._h_guards,
    "artifact:recompile_reasons": TorchTraceImporter._h_append,
    "artifact:dynamo_graph_break_reason": TorchTraceImporter._h_append,
    "artifact:dynamo_error": TorchTraceImporter._h_dynamo_error,
}
