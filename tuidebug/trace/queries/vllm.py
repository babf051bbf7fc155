"""What vLLM did with torch.compile, from an imported vLLM log: its compilation config, its
compile ranges and CUDA-graph capture sizes with the piecewise submodules compiled for each,
the split graph and the submodules' graphs it dumped, and its post-grad passes (stages of the
Inductor graphs they ran in). The one answer ``info``, ``info --json``, the TUI and the MCP
server give; None for a trace without vLLM records."""

from __future__ import annotations

from typing import Any

from tuidebug.trace.format import schema
from tuidebug.trace.format.reader import Trace

# what of vLLM's config is shown (a config of another vLLM version may lack some or add others)
CONFIG_KEYS = ("model", "prefix", "backend", "mode", "cudagraph_mode", "compile_sizes",
               "compile_ranges_split_points", "compile_ranges_endpoints", "splitting_ops",
               "custom_ops", "inductor_passes", "enabled_passes", "use_inductor_graph_partition",
               "dynamic_shapes_type", "dynamic_shapes_evaluate_guards")


def range_label(c: dict[str, Any]) -> str:
    """``size 8`` (one batch size) or ``range [1, 16384]`` (a compile range)."""
    lo, hi = c.get("compile_range_start"), c.get("compile_range_end")
    return f"size {lo}" if c.get("is_single_size") else f"range [{lo}, {hi}]"


def post_grad_passes(trace: Trace) -> list[dict[str, Any]]:
    """vLLM's post-grad passes, each as a stage of its graph, with what it changed."""
    return [{"graph": g.id, "stage": s.index, "name": s.name, "changed": s.changed,
             "added": s.added, "removed": s.removed, "modified": s.modified, "nodes": s.nodes}
            for g in trace.graphs for s in g.stages if s.subsystem == schema.VLLM_POST_GRAD]


def vllm_summary(trace: Trace) -> dict[str, Any] | None:
    """``config`` (the keys of ``CONFIG_KEYS`` it has), ``compile_ranges`` (one per range or
    size, in the order compiled: ``range``, ``cudagraph_capture_size``, ``submodules``,
    ``graphs``), ``piecewise_compiles`` (logged, and the total vLLM announced), ``split_graph``
    (its file), ``submodules`` (each piecewise submodule of the split graph: its file, and the
    ranges and sizes it was compiled for, none for a splitting op's), ``dumps`` and
    ``post_grad_passes``."""
    v = trace.vllm
    passes = post_grad_passes(trace)
    if not v and not passes:
        return None
    config = v.get("config") or {}
    ranges: dict[str, dict[str, Any]] = {}
    for c in v.get("compiles") or []:
        label = range_label(c)
        r = ranges.setdefault(label, {"range": label, "cudagraph_capture_size": False,
                                      "submodules": [], "graphs": []})
        r["cudagraph_capture_size"] |= bool(c.get("is_cudagraph_capture_size"))
        r["submodules"].append(c.get("submod_name") or f"subgraph_{c.get('piecewise_index')}")
        r["graphs"] += c.get("graphs") or []
    compiles = v.get("compiles") or []
    totals = {c.get("total_piecewise_compiles") for c in compiles} - {None}
    ranges_of: dict[str, list[str]] = {}
    for c in compiles:
        ranges_of.setdefault(str(c.get("submod_name")), []).append(range_label(c))
    submodules = [{"name": s.get("name"), "file": s.get("file"), "lines": s.get("lines"),
                   "compiled_for": list(dict.fromkeys(ranges_of.get(str(s.get("name")), [])))}
                  for s in v.get("submodules") or []]
    return {
        "config": {k: config[k] for k in CONFIG_KEYS if k in config},
        "compile_ranges": list(ranges.values()),
        "piecewise_compiles": {"logged": len(compiles),
                               "announced": max(totals) if totals else None},
        "split_graph": v.get("split_graph"),
        "submodules": submodules,
        "dumps": [{"name": d.get("name"), "file": d.get("file")} for d in v.get("dumps") or []],
        "post_grad_passes": passes,
    }
