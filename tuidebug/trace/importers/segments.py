"""Which Inductor compile (graph) each record of a TORCH_TRACE log belongs to. Pure; no torch.

The Inductor compiles of one Dynamo frame (forward, then possibly much later backward) share a
compile id in the log. A compile writes its records in a fixed order (runnable graph, post-grad
graph, output code, provenance, cache result), so a record whose rank in that order is not above
the previous one's starts the next compile ("segment"). Segments are told apart by the
``# AOT ID: ['0_forward']`` line of their output code, and by order where it is missing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

from tuidebug.trace.format import layout
from tuidebug.trace.importers.tracelog import Record

AOT_ID_RE = re.compile(r"AOT ID: \['(?P<id>[^']*?)_(?P<kind>forward|backward|inference)'\]")

# Inductor-compile records, in the order one compile writes them
SEG_ORDER = {
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
SEG_START_CHROMIUM = {"inductor_compile", "AOTAutogradCache.inductor_load",
                      "compile_fx.<locals>.bw_compiler"}

# chromium (dynamo_timed) event -> compilation phase (tuidebug.trace.format.schema.PHASES)
PHASE_OF_EVENT = {
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
INDUCTOR_PHASES = {"post_grad", "lowering", "scheduling", "codegen", "kernel_compile"}

# records of a frame that mean it has a graph even without an Inductor compile
GRAPH_EVENTS = {
    "dynamo_output_graph", "artifact:before_pre_grad_graph", "artifact:after_pre_grad_graph",
    "aot_joint_graph", "artifact:before_joint_graph", "artifact:after_joint_graph",
    "aot_inference_graph", "aot_forward_graph", "aot_backward_graph",
}


@dataclass
class Segment:
    cid: str
    index: int
    last_order: int = -1
    kind: str | None = None
    aot_id: str | None = None
    has_artifacts: bool = False


@dataclass
class Segmentation:
    of_record: dict[int, Segment] = field(default_factory=dict)  # record index -> its segment
    by_compile: dict[str, list[Segment]] = field(default_factory=dict)
    frame_kind: dict[str, str] = field(default_factory=dict)  # compile id -> its first graph's
    has_graph: set[str] = field(default_factory=set)  # compile ids with a graph


def segment(records: Iterable[Record]) -> Segmentation:
    """Assign the Inductor-compile records and chromium events of a log to segments."""
    out = Segmentation()
    current: dict[str, Segment] = {}
    frame_events: dict[str, set[str]] = {}

    def new(cid: str) -> Segment:
        segs = out.by_compile.setdefault(cid, [])
        seg = Segment(cid, len(segs))
        segs.append(seg)
        current[cid] = seg
        return seg

    for i, rec in enumerate(records):
        cid = layout.compile_id_from_meta(rec.meta)
        if cid is None:
            continue
        name = rec.name
        frame_events.setdefault(cid, set()).add(name)
        seg = current.get(cid)
        if name == "chromium_event":
            ch = rec.chromium or {}
            ev = str(ch.get("name", ""))
            if ev in SEG_START_CHROMIUM and ch.get("ph") == "B":
                if seg is None or seg.has_artifacts:
                    seg = new(cid)
                out.of_record[i] = seg
            elif PHASE_OF_EVENT.get(ev) in INDUCTOR_PHASES or \
                    ev.startswith("pass.post_grad_passes."):
                if seg is None:
                    seg = new(cid)
                out.of_record[i] = seg
            continue
        order = SEG_ORDER.get(name)
        if order is None:
            continue
        if seg is None or order <= seg.last_order:
            seg = new(cid)
        seg.last_order = order
        seg.has_artifacts = True
        out.of_record[i] = seg
        if name == "inductor_output_code":
            m = AOT_ID_RE.search(rec.first_payload_line)
            if m:
                seg.kind, seg.aot_id = m["kind"], f"{m['id']}_{m['kind']}"
    for cid, events in frame_events.items():
        if cid in out.by_compile or events & GRAPH_EVENTS:
            out.has_graph.add(cid)
    for cid, segs in out.by_compile.items():
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
        segs = out.by_compile.get(cid, [])
        first = next((s.kind for s in segs if s.kind != "backward"), None)
        if first is None:
            if "aot_inference_graph" in events:
                first = "inference"
            elif events & {"aot_joint_graph", "aot_forward_graph", "aot_backward_graph"}:
                first = "forward"
            else:
                first = "inference"
        out.frame_kind[cid] = first
    return out
