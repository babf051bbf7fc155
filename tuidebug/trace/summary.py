"""The summary of a trace that ``tuidebug info`` prints (and ``--json`` emits for scripts)."""

from __future__ import annotations

from typing import Any

from tuidebug.trace.reader import GraphRecord, StageInfo, Trace


def cudagraphs_state(g: GraphRecord) -> str | None:
    """Whether a graph runs under CUDA graphs: ``on``, ``off``, ``skipped: <Inductor's reason>``,
    ``requested, but no CUDA kernels``; None for a trace that does not record it (imports)."""
    cg = g.meta.get("cudagraphs")
    if not isinstance(cg, dict):
        return None
    skipped = [str(r).strip() for r in cg.get("skipped") or [] if str(r).strip()]
    if skipped:
        return "skipped: " + "; ".join(dict.fromkeys(skipped))
    if not cg.get("enabled"):
        return "off"
    kinds = {k.get("kind") for k in g.kernels}
    if kinds and "triton" not in kinds and kinds <= {"cpp", "extern"}:
        return "requested, but no CUDA kernels"
    return "on"


def kernel_launches(g: GraphRecord) -> dict[str, dict[str, Any]]:
    """Each Triton kernel's launch (``code/launches.jsonl``: grid, block sizes, warps…) by
    kernel name; empty for a graph without Triton kernels (the file is not read)."""
    if not any(k.get("kind") == "triton" for k in g.kernels):
        return {}
    out = {}
    for name, rec in g.launches.items():
        launch = rec.get("launch") if isinstance(rec, dict) else None
        if isinstance(launch, dict):
            out[name] = launch
    return out


def launch_text(launch: dict[str, Any], *, brief: bool = False) -> str:
    """``grid 16×1×1  (-((xnumel) // -(128)), 1, 1)  XBLOCK=128  4 warps  1 stage  28 regs
    0 spills  0 B shared``; ``brief``: grid, warps and registers (and spills, if any)."""
    parts = []
    grid = launch.get("grid") if isinstance(launch.get("grid"), list) else None
    expr = launch.get("grid_expr") if isinstance(launch.get("grid_expr"), list) else None
    if grid:
        parts.append("grid " + "×".join(str(x) for x in grid))
    # the expression says how the grid follows the sizes; a template's fixed grid (_grid_0…)
    # and constants say nothing more than the values
    if not brief and expr and any(str(e) not in ("1", str(v)) and not str(e).startswith("_grid_")
                                  for e, v in zip(expr, grid or [None] * 3)):
        parts.append("(" + ", ".join(str(e) for e in expr) + ")")
    cfg = launch.get("config")
    if not brief:
        parts += [f"{k}={v}" for k, v in (cfg.items() if isinstance(cfg, dict) else ())]
    keys = (("num_warps", "warp"), ("registers", "reg")) if brief else (
        ("num_warps", "warp"), ("num_stages", "stage"), ("registers", "reg"), ("spills", "spill"))
    for key, unit in keys:
        if launch.get(key) is not None:
            parts.append(f"{launch[key]} {unit}{'' if launch[key] == 1 else 's'}")
    if brief and launch.get("spills"):
        parts.append(f"{launch['spills']} spills")
    if not brief and launch.get("shared_mem") is not None:
        parts.append(f"{launch['shared_mem']} B shared")
    return ("  " if not brief else " · ").join(parts)


def changed_passes(stages: list[StageInfo]) -> list[str] | None:
    """The passes that changed the graph, in order; None when that is not known (a trace
    imported from a log, which times passes but never snapshots them)."""
    passes = [s for s in stages if s.kind == "pass"]
    if passes and all(s.changed is None for s in passes):
        return None
    return [s.name for s in passes if s.changed and s.file]


def graph_summary(g: GraphRecord) -> dict[str, Any]:
    meta = g.meta
    g.check_files()
    stages = g.stages
    final = g.final_graph()
    kernels = [k for k in g.kernels if k.get("kind") != "extern"]
    externs = [k for k in g.kernels if k.get("kind") == "extern"]
    prov = g.provenance.get("kernels") or {}
    with_source = [k["name"] for k in kernels if (prov.get(k["name"]) or {}).get("source")]
    files: set[str] = set()
    for p in prov.values():
        for s in p.get("source") or []:
            if s.get("file"):
                files.add(s["file"])
    fusion = meta.get("fusion") or {}
    recorded = fusion.get("recorded", True)
    changed = changed_passes(stages)
    return {
        "id": g.id,
        "kind": g.kind,
        "compile_id": g.compile_id,
        "status": g.status,
        "nodes": len(final) if final is not None else None,
        "stages": len(stages),
        "passes_run": sum(1 for s in stages if s.kind == "pass"),
        "passes_changed": len(changed) if changed is not None else None,
        "changed_passes": changed,
        "kernels": len(kernels),
        "kernel_kinds": sorted({str(k.get("kind")) for k in kernels}),
        "extern_calls": len(externs),
        "kernels_with_source": len(with_source),
        "source_files": sorted(files),
        "fused": fusion.get("fused", 0) if recorded else None,
        "rejected_fusions": fusion.get("rejected", 0) if recorded else None,
        "autotuned_ops": len(g.autotune),
        "cudagraphs": cudagraphs_state(g),
        "phase_times_s": meta.get("phase_times_s") or {},
        "error": g.error,
    }


def trace_summary(trace: Trace) -> dict[str, Any]:
    m = trace.manifest
    err = trace.error
    out: dict[str, Any] = {
        "trace": str(trace.root),
        "status": trace.status,
        "phase": trace.phase,
        "format_version": m.get("format_version"),
        "versions": m.get("versions") or {},
        "command": m.get("command"),
        "graphs": [graph_summary(g) for g in trace.graphs],
        "compiles": [],
        "config_changed": sorted((trace.config.get("changed") or {}).keys()),
        "warnings": list(m.get("warnings") or []),
    }
    if m.get("imported_from"):
        out["imported_from"] = m["imported_from"]
    if err:
        out["error"] = {"phase": err.get("phase"), "type": err.get("type"),
                        "message": err.get("message"), "graph": err.get("graph")}
    for cid, c in trace.compiles.items():
        metrics = c.get("metrics") or {}
        out["compiles"].append({
            "id": cid, "graphs": c.get("graphs", []),
            "function": metrics.get("co_name"), "file": metrics.get("co_filename"),
            "line": metrics.get("co_firstlineno"),
            "compile_time_s": metrics.get("entire_frame_compile_time_s"),
            "inductor_time_s": metrics.get("inductor_compile_time_s"),
            "graph_breaks": len(c.get("dynamo_graph_break_reason") or []),
            "recompile_reasons": c.get("recompile_reasons") or [],
        })
    checks = (trace.runtime.get("checks") or {})
    out["accuracy"] = {cid: {k: c.get(k) for k in ("max_abs", "max_rel", "close", "skipped")}
                       for cid, c in checks.items()}
    if trace.status == "crashed":
        out["error"] = out.get("error") or {
            "phase": trace.phase, "type": "crashed",
            "message": f"the capturing process died during phase {trace.phase!r}"}
    out["problems"] = [str(p) for p in trace.problems]
    return out
