"""One compiled graph against its namesake: stages, post-grad ops, pass effects, IR, fusion,
phase times, errors (and its kernels and wrapper, from ``diff.kernels``)."""

from __future__ import annotations

import collections
import re
from typing import Any

from tuidebug.trace.diff.common import pair
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


def _same(ga: GraphRecord | None, gb: GraphRecord | None, rel: str | None) -> bool:
    """Both graphs hold the same bytes at ``rel``: what is read from one holds for the other
    (two traces of one model: most files are; each parsed once)."""
    return ga is not None and gb is not None and rel is not None and ga.same_file(gb, rel)


def _ops(ga: GraphRecord | None, gb: GraphRecord | None) -> list[dict[str, Any]]:
    """Ops (node targets) whose count differs between the two last snapshots (post-grad)."""
    last_a = ga.snapshots()[-1].file if ga and ga.snapshots() else None
    last_b = gb.snapshots()[-1].file if gb and gb.snapshots() else None
    if last_a == last_b and _same(ga, gb, last_a):
        return []  # the same graph: no op count differs

    ca = ga.final_op_counts() if ga else collections.Counter()
    cb = gb.final_op_counts() if gb else collections.Counter()
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
    nodes = [n for n in ir["nodes"] if isinstance(n, dict)]
    by_type = collections.Counter(str(n.get("type")) for n in nodes)
    return {"nodes": len(nodes), "by_type": dict(sorted(by_type.items())),
            "reductions": sum(1 for n in nodes if n.get("is_reduction")),
            "extern": sum(1 for n in nodes if n.get("is_extern")),
            # what the scheduler turns into kernels: one Triton kernel each on GPU; on CPU one
            # loop nest each, which the C++ backend packs into one function per run of nodes
            # between extern calls
            "kernels": sum(1 for n in nodes if not n.get("is_extern")
                           and str(n.get("type")) != "NopKernelSchedulerNode"),
            "template": sum(1 for n in nodes if n.get("is_template")),
            "fused_groups": sum(1 for n in nodes if len(n.get("members") or []) > 1),
            "members": sum(len(n.get("members") or [n.get("name")]) for n in nodes)}


def _groups(ir: dict[str, Any] | None) -> collections.Counter[tuple[str, ...]]:
    c: collections.Counter[tuple[str, ...]] = collections.Counter()
    if not isinstance(ir, dict):
        return c
    for n in ir.get("nodes") or []:
        if isinstance(n, dict) and len(n.get("members") or []) > 1:
            c[tuple(sorted(str(o) for o in n.get("origins") or []))] += 1
    return c


def _ir(ga: GraphRecord | None, gb: GraphRecord | None) -> dict[str, Any]:
    post_a = ga.ir_post if ga else None
    same_post = _same(ga, gb, f"{schema.IR_POST}.json")
    post_b = post_a if same_post else gb.ir_post if gb else None
    pre_a = ir_counts(ga.ir_pre if ga else None)
    pre_b = pre_a if _same(ga, gb, f"{schema.IR_PRE}.json") else ir_counts(
        gb.ir_pre if gb else None)
    out: dict[str, Any] = {
        "pre": pair(pre_a, pre_b),
        "post": pair(ir_counts(post_a), ir_counts(post_b)),
    }
    ca, cb = _groups(post_a), _groups(post_b)
    out["groups_only_a"] = [{"origins": list(k), "count": v} for k, v in (ca - cb).items()]
    out["groups_only_b"] = [{"origins": list(k), "count": v} for k, v in (cb - ca).items()]
    return out


def _fusion(ga: GraphRecord | None, gb: GraphRecord | None) -> dict[str, Any]:
    def counts(g: GraphRecord | None) -> tuple[int | None, int | None, collections.Counter[str]]:
        if g is None:
            return None, None, collections.Counter()
        recs = g.fusion
        reasons = collections.Counter(_reason_key(str(r.get("reason")))
                                      for r in recs if r.get("action") == "rejected")
        return (sum(1 for r in recs if r.get("action") == "fused"),
                sum(1 for r in recs if r.get("action") == "rejected"), reasons)

    fa, ra, rsa = counts(ga)
    fb, rb, rsb = (fa, ra, rsa) if _same(ga, gb, schema.FUSION) else counts(gb)
    reasons = [{"reason": r, "a": rsa.get(r, 0), "b": rsb.get(r, 0)}
               for r in sorted(set(rsa) | set(rsb)) if rsa.get(r, 0) != rsb.get(r, 0)]
    return {"fused": pair(fa, fb), "rejected": pair(ra, rb), "reasons": reasons}


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
    kernels = kernel_diffs(ga, gb, code=code, context=context, max_diff_lines=max_diff_lines)
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
        "kernel_count": pair(generated_kernels(ga) if ga else None,
                              generated_kernels(gb) if gb else None),
        "externs": [e for e in extern_diffs(ga, gb) if e["a"] != e["b"]],
        "extern_count": pair(sum(1 for k in ga.kernels if k.extern) if ga else None,
                              sum(1 for k in gb.kernels if k.extern) if gb else None),
        "wrapper": wrapper_diff(ga, gb, code=code, context=context, max_diff_lines=max_diff_lines),
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
