"""The MCP tools' answers inside graphs: kernels for a source line and lines for a kernel
(``trace.provenance``), one graph stage paged (``trace.stages``, the graph model), and two
traces compared (``trace.diff``). The sentences are this module's own words (counts and the
caller's own arguments), never text read from a trace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuidebug.errors import TraceError
from tuidebug.mcp.bounded import Answer, next_call
from tuidebug.mcp.evidence import graph_file, ref
from tuidebug.trace.format import schema
from tuidebug.trace.format.graph import node_line
from tuidebug.trace.queries.provenance import KernelInfo, kernel_infos
from tuidebug.trace.format.reader import GraphRecord, Trace
from tuidebug.trace.queries.stages import stage_label


def _same_file(recorded: Any, asked: str) -> bool:
    """``asked`` names ``recorded``: the same path, or its last components (``model.py``,
    ``pkg/model.py``)."""
    rec = str(recorded or "")
    asked = asked.strip()
    return bool(asked) and (rec == asked or rec.endswith("/" + asked.lstrip("/")))


def _kernel_item(g: GraphRecord, k: KernelInfo) -> dict[str, Any]:
    item: dict[str, Any] = {"graph": g.id, "kernel": k.name, "kind": k.kind,
                            "fx_nodes": k.fx_nodes[:40], "original_aten": k.original_aten[:20],
                            "ref": ref(graph_file(g.id, schema.PROVENANCE), "kernels", k.name)}
    if k.file:
        item["code_ref"] = graph_file(g.id, k.file)
    if k.launch:
        item["launch"] = k.launch
    return item


def kernels_for_line(h: str, trace: Trace, file: str, line: int) -> Answer:
    """Every kernel that computes something written at ``file:line`` (a path or its last
    components), in every graph."""
    items = []
    files = set()
    for g in trace.graphs:
        for k in kernel_infos(g):
            here = [s for s in k.source if _same_file(s.get("file"), file)]
            files.update(str(s.get("file")) for s in here)
            if any(s.get("line") == line for s in here):
                code = next((s.get("code") for s in here if s.get("line") == line), None)
                items.append({**_kernel_item(g, k), "source_code": code})
    if len(files) > 1:
        return Answer("kernels_for_line", f"{len(files)} recorded files end with the name "
                      "given: name more of its path", h, {"files": sorted(files)})
    answer = (f"{len(items)} kernel(s) compute line {line}" if items else
              f"no kernel computes line {line} of that file" if files else
              "no kernel's provenance names that file (data.hint)")
    ans = Answer("kernels_for_line", answer, h, items=items, item_name="kernels")
    if not files:
        known = sorted({str(s.get("file")) for g in trace.graphs for k in kernel_infos(g)
                        for s in k.source})
        ans.data = {"hint": "the files kernels' provenance names", "files": known[:50]}
    if items:
        n = next_call("lines_for_kernel", "every line of the first kernel", trace=h,
                      kernel=items[0]["kernel"], graph=items[0]["graph"])
        ans.next = [n] if n else []
    return ans


def lines_for_kernel(h: str, trace: Trace, kernel: str, graph: str | None) -> Answer:
    """The user's source lines (and FX nodes, IR nodes) of ``kernel``, in ``graph`` or in
    every graph that has a kernel of that name."""
    items = []
    for g in trace.graphs:
        if graph and g.id != graph:
            continue
        for k in kernel_infos(g):
            if k.name == kernel:
                items.append({**_kernel_item(g, k), "ir_nodes": k.ir_nodes[:40],
                              "source": k.source[:60]})
    if not items:
        raise TraceError(f"no kernel named {kernel!r}" + (f" in graph {graph!r}" if graph
                                                           else "") + "; summary lists them")
    first = items[0]
    line = next((s for s in first["source"] if s.get("file") and s.get("line")), None)
    return Answer("lines_for_kernel", f"kernel {kernel} in {len(items)} graph(s)", h,
                  items=items, item_name="kernels", next=[n for n in (
                      next_call("expand", "the kernel's code", trace=h, ref=first["code_ref"])
                      if first.get("code_ref") else None,
                      next_call("kernels_for_line", "the other kernels of its first line",
                                trace=h, file=str(line["file"]), line=int(line["line"]))
                      if line else None) if n])


def _graph(trace: Trace, graph_id: str) -> GraphRecord:
    try:
        return trace.graph(graph_id)
    except (KeyError, TraceError):
        raise TraceError(f"no graph {graph_id!r} in this trace; summary lists its graphs") \
            from None


def stage_answer(h: str, trace: Trace, graph_id: str, stage: str | None) -> Answer:
    """Without ``stage``: the graph's stages and passes (each with what it changed). With one
    (its name, file stem or index): that snapshot's nodes, paged, and what its pass changed."""
    g = _graph(trace, graph_id)
    meta = graph_file(g.id, schema.META)
    if not stage:
        items = [{"index": s.index, "name": s.name, "label": stage_label(s), "kind": s.kind,
                  "changed": s.changed, "added": s.added, "removed": s.removed,
                  "modified": s.modified, "nodes": s.nodes, "snapshot": bool(s.file),
                  "ref": ref(meta, "stages", i)} for i, s in enumerate(g.stages)]
        snap = next((s for s in reversed(g.stages) if s.file), None)
        return Answer("stage", f"graph {g.id}: {len(items)} stage(s) and pass(es), "
                      f"{sum(1 for s in g.stages if s.file)} with a snapshot", h,
                      items=items, item_name="stages", next=[n for n in (
                          next_call("stage", "the last snapshot's nodes", trace=h,
                                    graph=g.id, stage=str(snap.index)) if snap else None,) if n])
    info = g.find_stage(stage)
    if info is None:
        raise TraceError(f"graph {g.id} has no stage {stage!r}; stage(graph) lists them")
    from tuidebug.trace.queries.stages import snapshot_at

    snap = info if info.file else snapshot_at(g, info)
    graph = g.stage_graph(snap) if snap is not None else None
    if graph is None or snap is None:
        return Answer("stage", f"stage {info.index} of graph {g.id} has no snapshot to show",
                      h, {"stage": stage_label(info)})
    changes = g.stage_changes(snap)
    rel = graph_file(g.id, str(snap.file))
    items = [{"node": n.name, "op": n.op, "text": node_line(n), "module": n.module or None,
              "source": n.source, "ref": ref(rel, "nodes", i)} for i, n in enumerate(graph)]
    return Answer("stage", f"graph {g.id} at stage {snap.index}: {len(items)} node(s)", h,
                  {"stage": stage_label(snap), "as_of": stage_label(info),
                   "changes": {k: v[:100] for k, v in changes.items()}},
                  items, "nodes", refs=[rel])


def diff_answer(h_a: str, a: Trace, h_b: str, b: Trace) -> Answer:
    """``tuidebug diff --json --no-code``: the comparison's summary and findings in ``data``,
    each graph's comparison (trimmed) as an item."""
    from tuidebug.trace.diff import diff_traces

    d = diff_traces(Path(a.root), Path(b.root), code=False)
    items = [{k: gd.get(k) for k in ("id", "in", "kind", "status", "nodes", "kernel_count",
                                     "extern_count", "passes_run", "compile_s", "error")}
             for gd in d.get("graphs") or []]
    # everything but the per-graph comparisons (the items), each side's own record and the
    # per-compile timings (the summary has their totals)
    data = {k: v for k, v in d.items()
            if k not in ("graphs", "a", "b", "format", "compiles") and v}
    if isinstance(d.get("graph_breaks"), dict):  # each break by its cause and line (the
        # graph_breaks tool on either trace has the rest)
        data["graph_breaks"] = {
            k: [{f: b.get(f) for f in ("compile_id", "cause", "user_line") if isinstance(b, dict)}
                for b in v] if isinstance(v, list) else v
            for k, v in d["graph_breaks"].items()}
    return Answer("diff", f"{h_a} (a) compared with {h_b} (b): {len(items)} graph(s) "
                  "compared; data.lines says what changed", h_a, data, items, "graphs")
