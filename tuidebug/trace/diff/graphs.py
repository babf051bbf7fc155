"""One compiled graph against its namesake: stages, post-grad ops, pass effects, IR, fusion,
phase times, errors (and its kernels and wrapper, from ``diff.kernels``)."""

from __future__ import annotations

import collections
import re
from typing import Any

from tuidebug.trace.diff.common import kept, pair, same_file as _same
from tuidebug.trace.diff.kernels import extern_diffs, kernel_diffs, wrapper_diff
from tuidebug.trace.format import schema
from tuidebug.trace.format.reader import GraphRecord
from tuidebug.trace.queries.provenance import generated_kernels


def _stage_counts(g: GraphRecord | None) -> dict[str, int | None]:
    if g is None:
        return {}
    out: dict[str, int | None] = {}
    for s in g.stages:
        if s.kind == "stage":
            out[s.name] = s.nodes
    return out


def _final_nodes(g: GraphRecord | None) -> int | None:
    if g is None:
        return None
    snaps = [s for s in g.stages if s.file]
    return snaps[-1].nodes if snaps else None


def _ops(ga: GraphRecord | None, gb: GraphRecord | None) -> list[dict[str, Any]]:
    """Ops (node targets) whose count differs between the two last snapshots (post-grad)."""
    last_a = ga.snapshots()[-1].file if ga and ga.snapshots() else None
    last_b = gb.snapshots()[-1].file if gb and gb.snapshots() else None
    if last_a == last_b and _same(ga, gb, last_a):
        return []  # the same graph: no op count differs

    ca, cb = _op_counts(ga), _op_counts(gb)
    return [{"op": op, "a": ca.get(op, 0), "b": cb.get(op, 0)}
            for op in sorted(set(ca) | set(cb)) if ca.get(op, 0) != cb.get(op, 0)]


def _pass_effects(g: GraphRecord | None) -> "collections.OrderedDict[tuple[str, int], dict[str, Any]]":
    out: collections.OrderedDict[tuple[str, int], dict[str, Any]] = collections.OrderedDict()
    if g is None:
        return out
    seen: collections.Counter[str] = collections.Counter()
    for s in g.stages:
        if s.kind != "pass":
            continue
        k = seen[s.name]
        seen[s.name] += 1
        changed = bool(s.changed and s.file)
        out[(s.name, k)] = {"subsystem": s.subsystem, "changed": changed,
                            "added": s.added if changed else 0,
                            "removed": s.removed if changed else 0,
                            "modified": s.modified if changed else 0}
    return out


def _passes(ga: GraphRecord | None, gb: GraphRecord | None) -> list[dict[str, Any]]:
    pa, pb = _pass_effects(ga), _pass_effects(gb)
    keys = list(pa) + [k for k in pb if k not in pa]
    out = []
    for key in keys:
        x, y = pa.get(key), pb.get(key)
        sig = lambda e: None if e is None else (e["changed"], e["added"], e["removed"], e["modified"])  # noqa: E731
        if sig(x) == sig(y):
            continue
        if x is None and y is not None and not y["changed"]:
            pass  # a no-op pass that ran only in B: still reported (the pass list differs)
        out.append({"name": key[0], "occurrence": key[1],
                    "subsystem": (x or y or {}).get("subsystem"),
                    "a": _effect(x), "b": _effect(y)})
    return out


def _effect(e: dict[str, Any] | None) -> dict[str, Any] | None:
    if e is None:
        return None
    return {"changed": e["changed"], "added": e["added"], "removed": e["removed"],
            "modified": e["modified"]}


def ir_counts(ir: dict[str, Any] | None) -> dict[str, Any] | None:
    if not isinstance(ir, dict) or not isinstance(ir.get("nodes"), list):
        return None
    by_type: collections.Counter[str] = collections.Counter()
    count = reductions = extern = kernels = template = fused_groups = members = 0
    for n in ir["nodes"]:  # one pass: a 24-layer graph's IR holds hundreds of nodes
        if not isinstance(n, dict):
            continue
        count += 1
        kind = str(n.get("type"))
        by_type[kind] += 1
        reductions += bool(n.get("is_reduction"))
        is_extern = bool(n.get("is_extern"))
        extern += is_extern
        # what the scheduler turns into kernels: one Triton kernel each on GPU; on CPU one
        # loop nest each, which the C++ backend packs into one function per run of nodes
        # between extern calls
        kernels += not is_extern and kind != "NopKernelSchedulerNode"
        template += bool(n.get("is_template"))
        group = n.get("members") or []
        fused_groups += len(group) > 1
        members += len(group) if group else 1
    return {"nodes": count, "by_type": dict(sorted(by_type.items())),
            "reductions": reductions, "extern": extern, "kernels": kernels,
            "template": template, "fused_groups": fused_groups, "members": members}


def _groups(ir: dict[str, Any] | None) -> collections.Counter[tuple[str, ...]]:
    c: collections.Counter[tuple[str, ...]] = collections.Counter()
    if not isinstance(ir, dict):
        return c
    for n in ir.get("nodes") or []:
        if isinstance(n, dict) and len(n.get("members") or []) > 1:
            c[tuple(sorted(str(o) for o in n.get("origins") or []))] += 1
    return c


def _pre(g: GraphRecord | None) -> dict[str, Any] | None:
    """The pre-fusion IR of ``g`` counted (kept with the graph)."""
    return kept(g, "ir_pre", lambda: ir_counts(g.ir_pre)) if g is not None else None


def _post(g: GraphRecord | None) -> tuple[dict[str, Any] | None,
                                          collections.Counter[tuple[str, ...]]]:
    """The post-fusion IR of ``g`` counted, and its fused groups (kept with the graph)."""
    if g is None:
        return None, collections.Counter()
    return kept(g, "ir_post", lambda: (ir_counts(g.ir_post), _groups(g.ir_post)))


def _copy(counts: dict[str, Any] | None) -> dict[str, Any] | None:
    """Counts kept with a graph, as the comparison's own (whoever reads it may change it)."""
    return None if counts is None else {**counts, "by_type": dict(counts["by_type"])}


def _ir(ga: GraphRecord | None, gb: GraphRecord | None) -> dict[str, Any]:
    post_a, ca = _post(ga)
    post_b, cb = (post_a, ca) if _same(ga, gb, f"{schema.IR_POST}.json") else _post(gb)
    pre_a = _pre(ga)
    pre_b = pre_a if _same(ga, gb, f"{schema.IR_PRE}.json") else _pre(gb)
    out: dict[str, Any] = {
        "pre": pair(_copy(pre_a), _copy(pre_b)),
        "post": pair(_copy(post_a), _copy(post_b)),
    }
    out["groups_only_a"] = [{"origins": list(k), "count": v} for k, v in (ca - cb).items()]
    out["groups_only_b"] = [{"origins": list(k), "count": v} for k, v in (cb - ca).items()]
    return out


def _fusion_of(g: GraphRecord | None) -> tuple[int | None, int | None, collections.Counter[str]]:
    """``g``'s fusion decisions counted (kept with the graph)."""
    if g is None:
        return None, None, collections.Counter()
    return kept(g, "fusion", lambda: _fusion_counts(g))


def _op_counts(g: GraphRecord | None) -> collections.Counter[str]:
    """The compute ops of ``g``'s last snapshot counted (kept with the graph)."""
    return kept(g, "op_counts", g.final_op_counts) if g else collections.Counter()


def _fusion(ga: GraphRecord | None, gb: GraphRecord | None) -> dict[str, Any]:
    fa, ra, rsa = _fusion_of(ga)
    fb, rb, rsb = (fa, ra, rsa) if _same(ga, gb, schema.FUSION) else _fusion_of(gb)
    reasons = [{"reason": r, "a": rsa.get(r, 0), "b": rsb.get(r, 0)}
               for r in sorted(set(rsa) | set(rsb)) if rsa.get(r, 0) != rsb.get(r, 0)]
    return {"fused": pair(fa, fb), "rejected": pair(ra, rb), "reasons": reasons}


def _fusion_counts(g: GraphRecord) -> tuple[int, int, collections.Counter[str]]:
    """(fusions made, rejected, rejections by reason) of ``g``'s fusion decisions."""
    actions: collections.Counter[Any] = collections.Counter()
    raw: collections.Counter[str] = collections.Counter()  # rejections by reason as written
    for r in g.fusion:
        action = r.get("action")
        actions[action] += 1
        if action == "rejected":
            raw[str(r.get("reason"))] += 1
    reasons: collections.Counter[str] = collections.Counter()
    for reason, n in raw.items():  # a few distinct reasons among thousands of rejections
        reasons[_reason_key(reason)] += n
    return actions["fused"], actions["rejected"], reasons


_NUMS = re.compile(r"\b(?:op|buf)\d+\b|\b\d+\b")


def _reason_key(reason: str) -> str:
    """Rejection reasons without node names and numbers, so that they can be counted."""
    return _NUMS.sub("N", reason)[:160]


def _phases(g: GraphRecord | None) -> dict[str, float]:
    """Seconds spent in each phase. ``phase_times_s`` holds durations when the meta also has
    ``phase_starts_s``; older traces stored start offsets there."""
    if g is None:
        return {}
    times = g.meta.phase_times_s
    if g.meta.phase_starts_s is not None:
        return {k: round(v, 4) for k, v in times.items()}
    items = sorted(times.items(), key=lambda kv: kv[1])
    out = {}
    for (name, t), nxt in zip(items, items[1:] + [None]):
        if nxt is not None:
            out[name] = round(nxt[1] - t, 4)
    return out


def _graph_seconds(g: GraphRecord | None) -> float | None:
    """The graph's compile time: the sum of its phases (to the last phase's start, in older
    traces)."""
    if g is None:
        return None
    times = list(g.meta.phase_times_s.values())
    if not times:
        return None
    return round(sum(times), 4) if g.meta.phase_starts_s is not None else max(times)


def graph_diff(gid: str, ga: GraphRecord | None, gb: GraphRecord | None, *, code: bool,
           context: int, max_diff_lines: int) -> dict[str, Any]:
    sa, sb = _stage_counts(ga), _stage_counts(gb)
    stages = [{"name": n, "a": sa.get(n), "b": sb.get(n)}
              for n in list(sa) + [x for x in sb if x not in sa] if sa.get(n) != sb.get(n)]
    pa, pb = _phases(ga), _phases(gb)
    ka = ga.kernels if ga else []
    kb = ka if _same(ga, gb, schema.KERNELS_INDEX) else gb.kernels if gb else []
    kernels = kernel_diffs(ga, gb, ka, kb, code=code, context=context,
                           max_diff_lines=max_diff_lines)
    return {
        "id": gid, "in": "both" if ga and gb else ("a" if ga else "b"),
        "kind": (ga or gb).kind,  # type: ignore[union-attr]
        "status": pair(ga.status if ga else None, gb.status if gb else None),
        "nodes": pair(_final_nodes(ga), _final_nodes(gb)),
        "stages": stages,
        "passes": _passes(ga, gb),
        "ops": _ops(ga, gb),
        "passes_run": pair(sum(1 for s in ga.stages if s.kind == "pass") if ga else None,
                            sum(1 for s in gb.stages if s.kind == "pass") if gb else None),
        "ir": _ir(ga, gb),
        "fusion": _fusion(ga, gb),
        "kernels": kernels,
        # counted as info and the overview count them (meta.json's count without a kernel index)
        "kernel_count": pair(generated_kernels(ga, ka) if ga else None,
                              generated_kernels(gb, kb) if gb else None),
        "externs": [e for e in extern_diffs(ka, kb) if e["a"] != e["b"]],
        "extern_count": pair(sum(1 for k in ka if k.extern) if ga else None,
                              sum(1 for k in kb if k.extern) if gb else None),
        "wrapper": wrapper_diff(ga, gb, ka, kb, code=code, context=context,
                                max_diff_lines=max_diff_lines),
        "autotune": pair(len(ga.autotune) if ga else None, len(gb.autotune) if gb else None),
        "phase_s": {k: pair(pa.get(k), pb.get(k)) for k in list(pa) + [x for x in pb if x not in pa]},
        "compile_s": pair(_graph_seconds(ga), _graph_seconds(gb)),
        "error": pair(_err(ga), _err(gb)),
    }


def _err(g: GraphRecord | None) -> dict[str, Any] | None:
    e = g.error if g else None
    if e is None:
        return None
    return {"phase": e.phase, "type": e.type, "message": str(e.message)[:1000]}
