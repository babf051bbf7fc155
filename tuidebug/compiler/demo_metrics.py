"""The evidence a flag demo (``tuidebug flags demo``) compares, measured on one trace: kernels,
IR nodes, fusions, cache hits, autotune choices, eager checks, greps over the generated code.
Torch-free: it reads the trace only.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tuidebug.trace.format.reader import Trace

__all__ = ["METRIC_LABELS", "trace_metrics", "output_metrics"]

# evidence: metric key → label. Metrics are computed by trace_metrics().
METRIC_LABELS = {
    "status": "trace status",
    "error": "error",
    "kernels": "generated kernels (C++/Triton functions)",
    "scheduler_kernels": "scheduler kernels (IR nodes after fusion, no externs)",
    "extern_calls": "extern calls",
    "fx_nodes": "FX nodes (post-grad)",
    "ir_pre": "IR nodes before fusion",
    "ir_post": "IR nodes after fusion",
    "reductions": "reductions in the IR",
    "fused": "fusions made",
    "passes_changed": "passes that changed the graph",
    "post_grad_ops": "ops in the post-grad graph",
    "assert_size_stride": "assert_size_stride( in wrappers",
    "aten_fallbacks": "torch.ops.aten.* calls in wrappers",
    "fxgraph_cache_hit": "FX graph cache hits",
    "fxgraph_cache_miss": "FX graph cache misses",
    "autotuned_ops": "autotuned ops",
    "autotune_choices": "autotune choices benchmarked",
    "autotune_winners": "autotune winners",
    "autotune_reused": "autotuned ops whose timings repeat an earlier op's (cache served)",
    "matches_eager": "compiled output matches eager",
    "compile_s": "compile time (s, all frames)",
    "first_call_s": "first compiled call (s)",
    "code_sha": "generated code (hash of all kernels)",
    "cudagraphs": "CUDA graphs, per graph (meta.json: on / off / skipped: reason)",
}


def _autotune_metrics(t: Trace) -> dict[str, Any]:
    ops = [r for g in t.graphs for r in g.autotune]
    seen: dict[str, list[Any]] = {}
    reused = 0
    winners = []
    choices = 0
    for r in ops:
        key = json.dumps([r.get("op"), r.get("inputs")], sort_keys=True, default=str)
        times = [c.get("time_ms") for c in r.get("choices") or []]
        choices += len(times)
        if key in seen and seen[key] == times:
            reused += 1
        seen.setdefault(key, times)
        winners.append(_norm_name(str(r.get("winner"))))
    return {"autotuned_ops": len(ops), "autotune_choices": choices,
            "autotune_winners": ",".join(winners) or None, "autotune_reused": reused}


def _norm_name(n: str) -> str:
    return re.sub(r"_\d+$", "", n)


def trace_metrics(path: str | Path, greps: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    """The evidence a demo compares, measured on one trace."""
    import hashlib

    from tuidebug.trace.diff.graphs import ir_counts
    from tuidebug.trace.diff.runs import counter_deltas

    t = Trace(path)
    m: dict[str, Any] = {"status": t.status}
    err = t.error
    m["error"] = f"{err.type} ({err.phase})" if err is not None else None
    kernels = extern = fx = pre = post = red = fused = sched = 0
    asserts = fallbacks = 0
    passes: list[str] = []
    ops: dict[str, int] = {}
    texts: list[str] = []
    code_hash = hashlib.sha256()
    for g in t.graphs:
        ks = g.kernels
        kernels += sum(1 for k in ks if not k.extern)
        extern += sum(1 for k in ks if k.extern)
        snaps = [s for s in g.stages if s.file]
        fx += (snaps[-1].nodes or 0) if snaps else 0
        a, b = ir_counts(g.ir_pre), ir_counts(g.ir_post)
        pre += (a or {}).get("nodes", 0)
        post += (b or {}).get("nodes", 0)
        red += (b or {}).get("reductions", 0)
        sched += (b or {}).get("kernels", 0)
        fused += sum(1 for r in g.fusion if r.get("action") == "fused")
        passes += [s.name for s in g.stages if s.kind == "pass" and s.changed and s.file]
        final = g.final_graph()
        for n in final.compute_nodes() if final is not None else []:
            ops[n.short_target] = ops.get(n.short_target, 0) + 1
        wrapper = g.wrapper_code() or ""
        asserts += wrapper.count("assert_size_stride(")
        fallbacks += len(re.findall(r"torch\.ops\.aten\.\w+", _calls_only(wrapper)))
        texts.append(wrapper)
        for k in ks:
            if k.file:
                src = g.code(k.file) or ""
                texts.append(src)
                code_hash.update(re.sub(rf"\b{re.escape(k.name)}\b", "K", src).encode())
    m.update(kernels=kernels, extern_calls=extern, fx_nodes=fx, ir_pre=pre, ir_post=post,
             reductions=red, scheduler_kernels=sched, fused=fused,
             passes_changed=",".join(sorted(set(passes))) or None,
             post_grad_ops=" ".join(f"{k}×{v}" for k, v in sorted(ops.items())) or None,
             assert_size_stride=asserts, aten_fallbacks=fallbacks,
             code_sha=code_hash.hexdigest()[:12] if kernels else None)
    hits = misses = 0
    for deltas in counter_deltas(t).values():
        hits += deltas.get("fxgraph_cache_hit", 0)
        misses += deltas.get("fxgraph_cache_miss", 0)
    m.update(fxgraph_cache_hit=hits, fxgraph_cache_miss=misses)
    m.update(_autotune_metrics(t))
    checks = (t.runtime.get("checks") or {}) if isinstance(t.runtime, dict) else {}
    closes = [c.get("close") for c in checks.values() if isinstance(c.get("close"), bool)]
    m["matches_eager"] = all(closes) if closes else None
    firsts = [c.get("first_call_s") for c in checks.values() if isinstance(c.get("first_call_s"), (int, float))]
    m["first_call_s"] = round(sum(firsts), 4) if firsts else None
    times = [((c.get("metrics") or {}).get("entire_frame_compile_time_s")) for c in t.compiles.values()]
    times = [x for x in times if isinstance(x, (int, float))]
    m["compile_s"] = round(sum(times), 3) if times else None
    m["cudagraphs"] = _cudagraphs(t)
    all_text = "\n".join(texts)
    for label, pattern in greps:
        m[f"grep:{label}"] = len(re.findall(pattern, all_text))
    return m


def _cudagraphs(t: Trace) -> str | None:
    """Each graph's CUDA graphs state (``0_0-forward: on``), None where the trace has none."""
    from tuidebug.trace.queries.summary import cudagraphs_state

    states = [(g.id, cudagraphs_state(g)) for g in t.graphs]
    return "; ".join(f"{gid}: {s}" for gid, s in states if s) or None


def output_metrics(lines: Any, greps: tuple[tuple[str, str], ...]) -> dict[str, int]:
    """``output:LABEL`` → matches of each regex in a job's output lines."""
    text = "\n".join(str(x) for x in lines or ())
    return {f"output:{label}": len(re.findall(pattern, text)) for label, pattern in greps}


def _calls_only(wrapper: str) -> str:
    from tuidebug.trace.diff.kernels import wrapper_calls

    return wrapper_calls(wrapper)
