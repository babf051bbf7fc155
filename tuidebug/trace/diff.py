"""Compare two traces: config, passes, IR and fusion, kernels (with code diffs), times. No torch.

``diff_traces(a, b)`` returns plain JSON-able data (``tuidebug diff --json`` prints it; the TUI's
comparison screen and ``viewers/diff_view.py`` render it)::

    {"a": SIDE, "b": SIDE,                       # path, name, status, overrides, recompile info
     "config": {"changed": [{"name", "a", "b", "capture"}], "overrides": [...],
                "capture_settings": [...], "note"},
     "graphs": [GRAPH, ...],                      # matched by graph id
     "compiles": [{"id", "in", "compile_time_s", "inductor_time_s", "code_gen_time_s",
                   "counters": {NAME: {"a", "b"}}}],
     "runtime": [{"compile_id", "first_call_s", "eager_s", "close", "max_abs"}],
     "summary": {...}, "lines": [one-line findings, most important first]}

    GRAPH = {"id", "in" ("both" | "a" | "b"), "kind", "status": {"a", "b"}, "nodes": {"a", "b"},
             "stages": [{"name", "a", "b"}],                     # snapshot node counts that differ
             "passes": [{"name", "subsystem", "a", "b"}],        # passes whose effect differs
             "ir": {"pre": COUNTS, "post": COUNTS, "groups_only_a", "groups_only_b"},
             "fusion": {"fused": {"a","b"}, "rejected": {"a","b"}, "reasons": [{"reason","a","b"}]},
             "kernels": [{"status" (unchanged|changed|added|removed), "a", "b", "kind",
                          "lines": {"a","b"}, "diff", "compile_s": {"a","b"},
                          "compiled": {"a","b"} ("built" | "cached" | None),
                          "run_s": {"a","b"}, "run_min_s": {"a","b"}, "calls": {"a","b"},
                          "run_ratio" (B/A of run_s)}],
             "externs": [{"name", "a", "b"}], "wrapper": {"lines", "markers", "diff"},
             "phase_s": {PHASE: {"a","b"}}, "compile_s": {"a","b"}, "error": {"a","b"}}

Every ``{"a": x, "b": y}`` pair holds the value in trace A and trace B (``None`` where absent).
Kernels are matched by name with the numeric suffix dropped (``cpp_fused_add_0`` and
``cpp_fused_add_3`` are the same kernel), and their code compared with their own names
normalised, so renumbering alone is never a change.
"""

from __future__ import annotations

import collections
import difflib
import json
import os
import re
from typing import Any, Iterable

from tuidebug.trace import kernels as kernel_text
from tuidebug.trace.reader import GraphRecord, Trace

__all__ = ["diff_traces", "normalize_kernel_name", "finding_lines", "format_duration",
           "WRAPPER_MARKERS"]

# grep-able things in a wrapper whose count a flag can change
WRAPPER_MARKERS = {
    "assert_size_stride": "assert_size_stride(",
    "assert_alignment": "assert_alignment(",
    "extern_kernels": "extern_kernels.",
    "aten_fallbacks": "torch.ops.aten.",
    "kernel_calls": ".run(",
    "cpp_kernel_calls": None,  # filled per trace: calls of generated C++ kernels
    "random_seeds": "inductor_seeds",
    "cudagraph": "cudagraph",
}
_SUFFIX = re.compile(r"_\d+$")
_AOT_ID = re.compile(r"^# AOT ID: .*$", re.M)  # a process-wide counter, not a change
_TMP_PATH = re.compile(r"/tmp/[^\s'\"]*|/var/folders/[^\s'\"]*")


def normalize_kernel_name(name: str) -> str:
    """``cpp_fused_add_0`` → ``cpp_fused_add``; ``extern_kernels.addmm:3`` → ``extern_kernels.addmm``."""
    base = name.split(":", 1)[0]
    if "@" in base:
        base = base.split("@", 1)[0]
    return _SUFFIX.sub("", base)


def _pair(a: Any, b: Any) -> dict[str, Any]:
    return {"a": a, "b": b}


def _open(t: Trace | str | os.PathLike[str]) -> Trace:
    return t if isinstance(t, Trace) else Trace(t)


# -- sides and config -----------------------------------------------------------------------------

def _side(t: Trace) -> dict[str, Any]:
    m = t.manifest
    err = t.error
    return {"path": str(t.root), "name": t.name, "status": t.status,
            "torch": (m.get("versions") or {}).get("torch"),
            "command": m.get("command"), "config_overrides": m.get("config_overrides") or {},
            "capture_settings": m.get("tuidebug_config") or {},
            "recompile": m.get("recompile"),
            "error": ({k: err.get(k) for k in ("phase", "type", "message", "graph")}
                      if isinstance(err, dict) else None)}


def _config(a: Trace, b: Trace) -> dict[str, Any]:
    va = (a.config.get("values") or {}) if isinstance(a.config, dict) else {}
    vb = (b.config.get("values") or {}) if isinstance(b.config, dict) else {}
    capture: set[str] = set()
    for t in (a, b):
        capture |= set((t.manifest.get("tuidebug_config") or {}).keys())
        capture |= set(t.config.get("set_by_tuidebug") or []) if isinstance(t.config, dict) else set()
    out: dict[str, Any] = {"changed": [], "overrides": [], "capture_settings": [], "note": None}
    missing = "_missing_"
    if va and vb:
        for name in sorted(set(va) | set(vb)):
            x, y = va.get(name, missing), vb.get(name, missing)
            if _canon(x) != _canon(y):
                out["changed"].append({"name": name, "a": None if x is missing else x,
                                       "b": None if y is missing else y,
                                       "capture": name in capture})
    else:
        which = " and ".join(s for s, v in (("A", va), ("B", vb)) if not v)
        out["note"] = (f"config.json missing in {which} (the compile stopped before Inductor "
                       "read its config); compared the --set overrides only")
    oa, ob = a.manifest.get("config_overrides") or {}, b.manifest.get("config_overrides") or {}
    for name in sorted(set(oa) | set(ob)):
        if _canon(oa.get(name, missing)) != _canon(ob.get(name, missing)):
            out["overrides"].append({"name": name, "a": oa.get(name), "b": ob.get(name)})
    ca, cb = a.manifest.get("tuidebug_config") or {}, b.manifest.get("tuidebug_config") or {}
    for name in sorted(set(ca) | set(cb)):
        if _canon(ca.get(name, missing)) != _canon(cb.get(name, missing)):
            out["capture_settings"].append({"name": name, "a": ca.get(name), "b": cb.get(name)})
    return out


def _canon(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


# -- per graph ------------------------------------------------------------------------------------

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
    def count(g: GraphRecord | None) -> collections.Counter[str]:
        graph = g.final_graph() if g else None
        return collections.Counter(n.target for n in graph.compute_nodes()) if graph else collections.Counter()
    ca, cb = count(ga), count(gb)
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


def _ir_counts(ir: dict[str, Any] | None) -> dict[str, Any] | None:
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
    post_b = gb.ir_post if gb else None
    out: dict[str, Any] = {
        "pre": _pair(_ir_counts(ga.ir_pre if ga else None), _ir_counts(gb.ir_pre if gb else None)),
        "post": _pair(_ir_counts(post_a), _ir_counts(post_b)),
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
    fb, rb, rsb = counts(gb)
    reasons = [{"reason": r, "a": rsa.get(r, 0), "b": rsb.get(r, 0)}
               for r in sorted(set(rsa) | set(rsb)) if rsa.get(r, 0) != rsb.get(r, 0)]
    return {"fused": _pair(fa, fb), "rejected": _pair(ra, rb), "reasons": reasons}


_NUMS = re.compile(r"\b(?:op|buf)\d+\b|\b\d+\b")


def _reason_key(reason: str) -> str:
    """Rejection reasons without node names and numbers, so that they can be counted."""
    return _NUMS.sub("N", reason)[:160]


# -- kernels --------------------------------------------------------------------------------------

def _kernel_code(g: GraphRecord, k: dict[str, Any]) -> str:
    if not k.get("file"):
        return ""
    text = g.code(str(k["file"])) or ""
    return _normalize_code(text, str(k.get("name", "")))


def _normalize_code(text: str, name: str) -> str:
    if name:
        text = re.sub(rf"\b{re.escape(name)}\b", "KERNEL", text)
    return _TMP_PATH.sub("<tmp>", text)


def _kernels(ga: GraphRecord | None, gb: GraphRecord | None, *, code: bool, context: int,
             max_diff_lines: int) -> list[dict[str, Any]]:
    ka = [k for k in (ga.kernels if ga else []) if k.get("kind") != "extern"]
    kb = [k for k in (gb.kernels if gb else []) if k.get("kind") != "extern"]
    src_a = {k["name"]: _kernel_code(ga, k) for k in ka} if ga else {}
    src_b = {k["name"]: _kernel_code(gb, k) for k in kb} if gb else {}
    groups_a: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    groups_b: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for k in ka:
        groups_a[normalize_kernel_name(k["name"])].append(k)
    for k in kb:
        groups_b[normalize_kernel_name(k["name"])].append(k)
    out: list[dict[str, Any]] = []
    removed: list[dict[str, Any]] = []
    added: list[dict[str, Any]] = []
    for base in list(groups_a) + [x for x in groups_b if x not in groups_a]:
        la, lb = list(groups_a.get(base, [])), list(groups_b.get(base, []))
        # identical code first, then in order
        for x in list(la):
            y = next((y for y in lb if src_b.get(y["name"]) == src_a.get(x["name"])), None)
            if y is not None:
                la.remove(x)
                lb.remove(y)
                out.append(_kernel_entry("unchanged", x, y, src_a, src_b, code, context, max_diff_lines))
        for x, y in zip(la, lb):
            out.append(_kernel_entry("changed", x, y, src_a, src_b, code, context, max_diff_lines))
        removed += la[len(lb):]
        added += lb[len(la):]
    # a kernel that only changed its fused name but not its code
    for x in list(removed):
        y = next((y for y in added if src_b.get(y["name"]) == src_a.get(x["name"])
                  and src_a.get(x["name"])), None)
        if y is not None:
            removed.remove(x)
            added.remove(y)
            out.append(_kernel_entry("renamed", x, y, src_a, src_b, code, context, max_diff_lines))
    out += [_kernel_entry("removed", x, None, src_a, src_b, code, context, max_diff_lines) for x in removed]
    out += [_kernel_entry("added", None, y, src_a, src_b, code, context, max_diff_lines) for y in added]
    order = {"changed": 0, "removed": 1, "added": 2, "renamed": 3, "unchanged": 4}
    out.sort(key=lambda e: order[e["status"]])
    times_a, times_b = (ga.timings if ga else {}), (gb.timings if gb else {})
    for e in out:
        e.update(_kernel_times(times_a.get(e["a"] or ""), times_b.get(e["b"] or "")))
    return out


def _kernel_times(x: dict[str, Any] | None, y: dict[str, Any] | None) -> dict[str, Any]:
    """One kernel's compile and run times in A and B (``code/timings.json``), and B/A of the
    run time."""
    x, y = x or {}, y or {}
    run = _pair(x.get("run_s"), y.get("run_s"))
    return {"compile_s": _pair(x.get("compile_s"), y.get("compile_s")),
            "compiled": _pair(x.get("compile"), y.get("compile")),
            "run_s": run, "run_min_s": _pair(x.get("run_min_s"), y.get("run_min_s")),
            "calls": _pair(x.get("calls"), y.get("calls")), "run_ratio": _ratio(run)}


def _ratio(p: dict[str, Any]) -> float | None:
    a, b = p["a"], p["b"]
    ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
    return float(f"{b / a:.4g}") if ok and a > 0 else None


def _kernel_entry(status: str, x: dict[str, Any] | None, y: dict[str, Any] | None,
                  src_a: dict[str, str], src_b: dict[str, str], code: bool, context: int,
                  max_diff_lines: int) -> dict[str, Any]:
    e: dict[str, Any] = {
        "status": status, "a": x["name"] if x else None, "b": y["name"] if y else None,
        "kind": (x or y or {}).get("kind"),
        "lines": _pair(x.get("lines") if x else None, y.get("lines") if y else None),
        "source_nodes": _pair(x.get("source_nodes") if x else None,
                              y.get("source_nodes") if y else None),
        "diff": None, "diff_stats": None,
    }
    if status == "changed":
        a_lines = src_a.get(x["name"], "").splitlines(keepends=True) if x else []
        b_lines = src_b.get(y["name"], "").splitlines(keepends=True) if y else []
        diff = list(difflib.unified_diff(a_lines, b_lines, fromfile=f"a/{x['name'] if x else ''}",
                                         tofile=f"b/{y['name'] if y else ''}", n=context))
        plus = sum(1 for d in diff if d.startswith("+") and not d.startswith("+++"))
        minus = sum(1 for d in diff if d.startswith("-") and not d.startswith("---"))
        e["diff_stats"] = {"added": plus, "removed": minus}
        if code:
            text = "".join(d if d.endswith("\n") else d + "\n" for d in diff[:max_diff_lines])
            if len(diff) > max_diff_lines:
                text += f"… {len(diff) - max_diff_lines} more diff lines\n"
            e["diff"] = text
    return e


def _externs(ga: GraphRecord | None, gb: GraphRecord | None) -> list[dict[str, Any]]:
    def count(g: GraphRecord | None) -> collections.Counter[str]:
        return collections.Counter(str(k.get("call") or normalize_kernel_name(str(k.get("name"))))
                                   for k in (g.kernels if g else []) if k.get("kind") == "extern")
    ca, cb = count(ga), count(gb)
    return [{"name": n, "a": ca.get(n, 0), "b": cb.get(n, 0)}
            for n in sorted(set(ca) | set(cb))]


def _wrapper_calls(code: str | None) -> str:
    """The wrapper with kernel definitions folded to one line each (their code is diffed per
    kernel), names of kernels' numbered suffixes kept, temporary paths normalised."""
    if not code:
        return ""
    out, pos = [], 0
    for m in kernel_text._DEF_RE.finditer(code):
        got = kernel_text._kernel_source(code, m.end())
        if got is None or m.start() < pos:
            continue
        _, end = got
        close = code.find("\n", end)
        close = len(code) if close < 0 else close
        out.append(code[pos:m.start()])
        out.append(f"{m['name']} = async_compile.{m['api']}(…)")
        pos = close
    out.append(code[pos:])
    text = _AOT_ID.sub("# AOT ID: […]", "".join(out))
    return _TMP_PATH.sub("<tmp>", text)


def _markers(text: str, kernels: Iterable[str]) -> dict[str, int]:
    res = {}
    for key, needle in WRAPPER_MARKERS.items():
        if needle:
            res[key] = text.count(needle)
    names = [k for k in kernels]
    res["cpp_kernel_calls"] = sum(len(re.findall(rf"^\s*{re.escape(n)}\(", text, re.M)) for n in names)
    return res


def _wrapper(ga: GraphRecord | None, gb: GraphRecord | None, *, code: bool, context: int,
             max_diff_lines: int) -> dict[str, Any]:
    wa = _wrapper_calls(ga.wrapper_code() if ga else None)
    wb = _wrapper_calls(gb.wrapper_code() if gb else None)
    names_a = [k["name"] for k in (ga.kernels if ga else []) if k.get("kind") != "extern"]
    names_b = [k["name"] for k in (gb.kernels if gb else []) if k.get("kind") != "extern"]
    ma, mb = _markers(wa, names_a), _markers(wb, names_b)
    out: dict[str, Any] = {
        "lines": _pair(wa.count("\n") if wa else None, wb.count("\n") if wb else None),
        "markers": {k: _pair(ma.get(k), mb.get(k)) for k in ma if ma.get(k) != mb.get(k)},
        "changed": wa != wb, "diff": None,
    }
    if code and wa and wb and wa != wb:
        diff = list(difflib.unified_diff(wa.splitlines(keepends=True), wb.splitlines(keepends=True),
                                         fromfile="a/wrapper.py", tofile="b/wrapper.py", n=context))
        text = "".join(d if d.endswith("\n") else d + "\n" for d in diff[:max_diff_lines])
        if len(diff) > max_diff_lines:
            text += f"… {len(diff) - max_diff_lines} more diff lines\n"
        out["diff"] = text
    return out


def _phases(g: GraphRecord | None) -> dict[str, float]:
    """Seconds spent in each phase. ``phase_times_s`` holds durations when the meta also has
    ``phase_starts_s``; older traces stored start offsets there."""
    if g is None:
        return {}
    times = {k: float(v) for k, v in (g.meta.get("phase_times_s") or {}).items()
             if isinstance(v, (int, float))}
    if "phase_starts_s" in g.meta:
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
    times = [float(v) for v in (g.meta.get("phase_times_s") or {}).values()
             if isinstance(v, (int, float))]
    if not times:
        return None
    return round(sum(times), 4) if "phase_starts_s" in g.meta else max(times)


def _graph(gid: str, ga: GraphRecord | None, gb: GraphRecord | None, *, code: bool,
           context: int, max_diff_lines: int) -> dict[str, Any]:
    sa, sb = _stage_counts(ga), _stage_counts(gb)
    stages = [{"name": n, "a": sa.get(n), "b": sb.get(n)}
              for n in list(sa) + [x for x in sb if x not in sa] if sa.get(n) != sb.get(n)]
    pa, pb = _phases(ga), _phases(gb)
    kernels = _kernels(ga, gb, code=code, context=context, max_diff_lines=max_diff_lines)
    return {
        "id": gid, "in": "both" if ga and gb else ("a" if ga else "b"),
        "kind": (ga or gb).kind,  # type: ignore[union-attr]
        "status": _pair(ga.status if ga else None, gb.status if gb else None),
        "nodes": _pair(_final_nodes(ga), _final_nodes(gb)),
        "stages": stages,
        "passes": _passes(ga, gb),
        "ops": _ops(ga, gb),
        "passes_run": _pair(sum(1 for s in ga.stages if s.kind == "pass") if ga else None,
                            sum(1 for s in gb.stages if s.kind == "pass") if gb else None),
        "ir": _ir(ga, gb),
        "fusion": _fusion(ga, gb),
        "kernels": kernels,
        "kernel_count": _pair(sum(1 for k in (ga.kernels if ga else []) if k.get("kind") != "extern") if ga else None,
                              sum(1 for k in (gb.kernels if gb else []) if k.get("kind") != "extern") if gb else None),
        "externs": [e for e in _externs(ga, gb) if e["a"] != e["b"]],
        "extern_count": _pair(sum(1 for k in ga.kernels if k.get("kind") == "extern") if ga else None,
                              sum(1 for k in gb.kernels if k.get("kind") == "extern") if gb else None),
        "wrapper": _wrapper(ga, gb, code=code, context=context, max_diff_lines=max_diff_lines),
        "autotune": _pair(len(ga.autotune) if ga else None, len(gb.autotune) if gb else None),
        "phase_s": {k: _pair(pa.get(k), pb.get(k)) for k in list(pa) + [x for x in pb if x not in pa]},
        "compile_s": _pair(_graph_seconds(ga), _graph_seconds(gb)),
        "error": _pair(_err(ga), _err(gb)),
    }


def _err(g: GraphRecord | None) -> dict[str, Any] | None:
    e = g.error if g else None
    if not isinstance(e, dict):
        return None
    return {"phase": e.get("phase"), "type": e.get("type"), "message": str(e.get("message"))[:1000]}


# -- compiles and runtime -------------------------------------------------------------------------

_TIME_KEYS = (("compile_time_s", "entire_frame_compile_time_s"),
              ("inductor_time_s", "inductor_compile_time_s"),
              ("code_gen_time_s", "code_gen_time_s"))


def _counter_deltas(t: Trace) -> dict[str, dict[str, int]]:
    """Inductor counters per compile. The trace stores the process's cumulative counters at
    the end of each compile; this takes the difference from the compile before."""
    out: dict[str, dict[str, int]] = {}
    prev: dict[str, int] = {}
    for cid, c in t.compiles.items():
        cur = (c.get("counters") or {}).get("inductor") or {}
        if not cur:
            out[cid] = {}
            continue
        out[cid] = {k: int(v) - int(prev.get(k, 0)) for k, v in cur.items()
                    if isinstance(v, (int, float)) and int(v) - int(prev.get(k, 0))}
        prev = cur
    return out


def _compiles(a: Trace, b: Trace) -> list[dict[str, Any]]:
    ca, cb = a.compiles, b.compiles
    da, db = _counter_deltas(a), _counter_deltas(b)
    out = []
    for cid in list(ca) + [x for x in cb if x not in ca]:
        x, y = ca.get(cid) or {}, cb.get(cid) or {}
        mx, my = x.get("metrics") or {}, y.get("metrics") or {}
        entry: dict[str, Any] = {"id": cid, "in": "both" if x and y else ("a" if x else "b")}
        for key, metric in _TIME_KEYS:
            entry[key] = _pair(mx.get(metric), my.get(metric))
        kx, ky = da.get(cid) or {}, db.get(cid) or {}
        entry["counters"] = {n: _pair(kx.get(n, 0), ky.get(n, 0))
                             for n in sorted(set(kx) | set(ky)) if kx.get(n, 0) != ky.get(n, 0)}
        entry["cache"] = {n: _pair(kx.get(n, 0), ky.get(n, 0))
                          for n in ("fxgraph_cache_hit", "fxgraph_cache_miss", "fxgraph_cache_bypass")}
        out.append(entry)
    return out


def _runtime(a: Trace, b: Trace) -> list[dict[str, Any]]:
    ra = (a.runtime.get("checks") or {}) if isinstance(a.runtime, dict) else {}
    rb = (b.runtime.get("checks") or {}) if isinstance(b.runtime, dict) else {}
    out = []
    for cid in list(ra) + [x for x in rb if x not in ra]:
        x, y = ra.get(cid) or {}, rb.get(cid) or {}
        out.append({"compile_id": cid,
                    **{k: _pair(x.get(k), y.get(k))
                       for k in ("first_call_s", "eager_s", "close", "max_abs", "max_rel")}})
    return out


# -- the whole comparison -------------------------------------------------------------------------

def diff_traces(a: Trace | str | os.PathLike[str], b: Trace | str | os.PathLike[str], *,
                code: bool = True, context: int = 3, max_diff_lines: int = 400) -> dict[str, Any]:
    """Compare trace ``a`` (before) with ``b`` (after). ``code=False`` leaves out diff texts."""
    ta, tb = _open(a), _open(b)
    graphs_a = {g.id: g for g in ta.graphs}
    graphs_b = {g.id: g for g in tb.graphs}
    ids = list(graphs_a) + [g for g in graphs_b if g not in graphs_a]
    graphs = [_graph(gid, graphs_a.get(gid), graphs_b.get(gid), code=code, context=context,
                     max_diff_lines=max_diff_lines) for gid in ids]
    out: dict[str, Any] = {
        "format": "tuidebug.diff/1",
        "a": _side(ta), "b": _side(tb),
        "config": _config(ta, tb),
        "graphs": graphs,
        "compiles": _compiles(ta, tb),
        "runtime": _runtime(ta, tb),
    }
    out["summary"] = _summary(out)
    out["lines"] = finding_lines(out)
    out["problems"] = {"a": [str(p) for p in ta.problems], "b": [str(p) for p in tb.problems]}
    return out


def _sum(values: Iterable[Any]) -> Any:
    vals = [v for v in values if isinstance(v, (int, float))]
    return round(sum(vals), 6) if vals else None


def _summary(d: dict[str, Any]) -> dict[str, Any]:
    status = collections.Counter(k["status"] for g in d["graphs"] for k in g["kernels"])
    graphs = d["graphs"]
    return {
        "status": _pair(d["a"]["status"], d["b"]["status"]),
        "config_changed": len([c for c in d["config"]["changed"] if not c["capture"]]),
        "capture_config_changed": len([c for c in d["config"]["changed"] if c["capture"]]),
        "graphs": _pair(sum(1 for g in graphs if g["in"] != "b"),
                        sum(1 for g in graphs if g["in"] != "a")),
        "graphs_only_a": [g["id"] for g in graphs if g["in"] == "a"],
        "graphs_only_b": [g["id"] for g in graphs if g["in"] == "b"],
        "kernels": _pair(_sum(g["kernel_count"]["a"] for g in graphs),
                         _sum(g["kernel_count"]["b"] for g in graphs)),
        "kernel_changes": {s: status.get(s, 0)
                           for s in ("unchanged", "changed", "added", "removed", "renamed")},
        "extern_calls": _pair(_sum(g["extern_count"]["a"] for g in graphs),
                              _sum(g["extern_count"]["b"] for g in graphs)),
        "fx_nodes": _pair(_sum(g["nodes"]["a"] for g in graphs), _sum(g["nodes"]["b"] for g in graphs)),
        "ir_nodes_post": _pair(_sum((g["ir"]["post"]["a"] or {}).get("nodes") for g in graphs),
                               _sum((g["ir"]["post"]["b"] or {}).get("nodes") for g in graphs)),
        "ir_nodes_pre": _pair(_sum((g["ir"]["pre"]["a"] or {}).get("nodes") for g in graphs),
                              _sum((g["ir"]["pre"]["b"] or {}).get("nodes") for g in graphs)),
        "scheduler_kernels": _pair(_sum((g["ir"]["post"]["a"] or {}).get("kernels") for g in graphs),
                                   _sum((g["ir"]["post"]["b"] or {}).get("kernels") for g in graphs)),
        "reductions_post": _pair(_sum((g["ir"]["post"]["a"] or {}).get("reductions") for g in graphs),
                                 _sum((g["ir"]["post"]["b"] or {}).get("reductions") for g in graphs)),
        "passes_differing": sum(len(g["passes"]) for g in graphs),
        "fused": _pair(_sum(g["fusion"]["fused"]["a"] for g in graphs),
                       _sum(g["fusion"]["fused"]["b"] for g in graphs)),
        "wrapper_markers": _merge_markers(graphs),
        "autotuned_ops": _pair(_sum(g["autotune"]["a"] for g in graphs),
                               _sum(g["autotune"]["b"] for g in graphs)),
        "compile_time_s": _pair(_sum(c["compile_time_s"]["a"] for c in d["compiles"]),
                                _sum(c["compile_time_s"]["b"] for c in d["compiles"])),
        "inductor_time_s": _pair(_sum(c["inductor_time_s"]["a"] for c in d["compiles"]),
                                 _sum(c["inductor_time_s"]["b"] for c in d["compiles"])),
        "first_call_s": _pair(_sum(r["first_call_s"]["a"] for r in d["runtime"]),
                              _sum(r["first_call_s"]["b"] for r in d["runtime"])),
        "kernel_run_s": _pair(_kernel_total(graphs, "a", "run_s"),
                              _kernel_total(graphs, "b", "run_s")),
        "kernel_compile_s": _pair(_kernel_total(graphs, "a", "compile_s"),
                                  _kernel_total(graphs, "b", "compile_s")),
        "cache": {n: _pair(_sum(c["cache"][n]["a"] for c in d["compiles"]),
                           _sum(c["cache"][n]["b"] for c in d["compiles"]))
                  for n in ("fxgraph_cache_hit", "fxgraph_cache_miss", "fxgraph_cache_bypass")},
        "accuracy_close": _pair(_all_close(r["close"]["a"] for r in d["runtime"]),
                                _all_close(r["close"]["b"] for r in d["runtime"])),
        "errors": _pair(d["a"]["error"], d["b"]["error"]),
    }


def _kernel_total(graphs: list[dict[str, Any]], side: str, key: str) -> float | None:
    """Seconds over all kernels of one side: compile times, or run time per call × calls."""
    def one(k: dict[str, Any]) -> Any:
        v = k[key][side]
        calls = k["calls"][side] if key == "run_s" else 1
        return v * calls if isinstance(v, (int, float)) and isinstance(calls, int) else None
    vals = [x for x in (one(k) for g in graphs for k in g["kernels"]) if x is not None]
    return round(sum(vals), 9) if vals else None  # microseconds: more digits than _sum keeps


def _largest_run_change(d: dict[str, Any], threshold: float = 1.5) -> dict[str, Any] | None:
    """The kernel whose run time changed the most (by ratio), if by at least ``threshold``×."""
    ks = [k for g in d["graphs"] for k in g["kernels"] if k.get("run_ratio")]
    if not ks:
        return None
    top = max(ks, key=lambda k: max(k["run_ratio"], 1 / k["run_ratio"]))
    return top if max(top["run_ratio"], 1 / top["run_ratio"]) >= threshold else None


def format_duration(s: Any) -> str:
    """``12.3 µs``, ``4.56 ms``, ``1.23 s``; ``—`` when unknown."""
    if not isinstance(s, (int, float)) or isinstance(s, bool):
        return "—"
    if abs(s) < 1e-3:
        return f"{s * 1e6:.1f} µs"
    return f"{s * 1e3:.2f} ms" if abs(s) < 1 else f"{s:.2f} s"


def _all_close(values: Iterable[Any]) -> bool | None:
    vals = [v for v in values if isinstance(v, bool)]
    return all(vals) if vals else None


def _merge_markers(graphs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Marker counts over all graphs, for markers that differ somewhere."""
    out: dict[str, dict[str, int]] = {}
    for g in graphs:
        for k, v in g["wrapper"]["markers"].items():
            e = out.setdefault(k, {"a": 0, "b": 0})
            e["a"] += v["a"] or 0
            e["b"] += v["b"] or 0
    return out


def _arrow(p: dict[str, Any], fmt: str = "{}") -> str:
    f = lambda v: "—" if v is None else fmt.format(v)  # noqa: E731
    return f"{f(p['a'])} → {f(p['b'])}"


def _kernel_time_lines(d: dict[str, Any], s: dict[str, Any]) -> list[str]:
    lines = []
    for key, label in (("kernel_run_s", "generated kernels' run time (per call of the graphs)"),
                       ("kernel_compile_s", "generated kernels' compile time (builds timed)")):
        p = s.get(key) or {"a": None, "b": None}
        if p["a"] is not None and p["b"] is not None and p["a"] != p["b"]:
            ratio = _ratio(p)
            lines.append(f"{label}: {format_duration(p['a'])} → {format_duration(p['b'])}"
                         + (f" (×{ratio:.2f})" if ratio else ""))
    top = _largest_run_change(d)
    if top:
        lines.append(f"largest kernel run time change: {top['b']} {format_duration(top['run_s']['a'])}"
                     f" → {format_duration(top['run_s']['b'])} (×{top['run_ratio']:.2f})")
    return lines


def finding_lines(d: dict[str, Any]) -> list[str]:
    """Short sentences saying what differs, the most telling first (for a status line)."""
    s = d.get("summary") or _summary(d)
    lines: list[str] = []
    if s["status"]["a"] != s["status"]["b"]:
        lines.append(f"status: {_arrow(s['status'])}")
        err = s["errors"]["b"] or s["errors"]["a"]
        if err:
            lines.append(f"error: {err.get('type')} in phase {err.get('phase')}: "
                         f"{str(err.get('message'))[:160]}")
    for c in d["config"]["changed"]:
        if not c["capture"]:
            lines.append(f"config {c['name']}: {json.dumps(c['a'])} → {json.dumps(c['b'])}")
    if not d["config"]["changed"]:
        for c in d["config"]["overrides"]:
            lines.append(f"--set {c['name']}: {json.dumps(c['a'])} → {json.dumps(c['b'])}")
    kc = s["kernel_changes"]
    if s["kernels"]["a"] != s["kernels"]["b"] or any(kc[k] for k in ("changed", "added", "removed")):
        lines.append(f"kernels: {_arrow(s['kernels'])} ({kc['changed']} changed, "
                     f"{kc['added']} added, {kc['removed']} removed, {kc['unchanged']} unchanged)")
    if s["extern_calls"]["a"] != s["extern_calls"]["b"]:
        lines.append(f"extern calls: {_arrow(s['extern_calls'])}")
    for key, label in (("scheduler_kernels", "scheduler kernels (IR after fusion, no externs)"),
                       ("fx_nodes", "FX nodes (post-grad)"), ("ir_nodes_pre", "IR nodes before fusion"),
                       ("ir_nodes_post", "IR nodes after fusion"), ("reductions_post", "reductions (IR)"),
                       ("fused", "fusions made"), ("autotuned_ops", "autotuned ops")):
        if s[key]["a"] != s[key]["b"]:
            lines.append(f"{label}: {_arrow(s[key])}")
    ops = collections.Counter()
    for g in d["graphs"]:
        for o in g.get("ops") or []:
            ops[o["op"]] += o["b"] - o["a"]
    if any(ops.values()):
        lines.append("ops in the post-grad graph: " + ", ".join(
            f"{op} {n:+d}" for op, n in sorted(ops.items(), key=lambda kv: -abs(kv[1])) if n)[:300])
    if s["passes_differing"]:
        names = sorted({p["name"] for g in d["graphs"] for p in g["passes"]})
        lines.append(f"passes with a different effect: {', '.join(names[:8])}"
                     + (" …" if len(names) > 8 else ""))
    for k, v in s["wrapper_markers"].items():
        lines.append(f"wrapper {k}: {_arrow(v)}")
    for n, v in s["cache"].items():
        if v["a"] != v["b"]:
            lines.append(f"{n}: {_arrow(v)}")
    if s["accuracy_close"]["a"] != s["accuracy_close"]["b"]:
        lines.append(f"matches eager: {_arrow(s['accuracy_close'])}")
    if s["graphs_only_a"] or s["graphs_only_b"]:
        lines.append(f"graphs only in A: {s['graphs_only_a']}; only in B: {s['graphs_only_b']}")
    if s["compile_time_s"]["a"] is not None and s["compile_time_s"]["b"] is not None:
        lines.append(f"compile time: {_arrow(s['compile_time_s'], '{:.2f}s')}")
    lines += _kernel_time_lines(d, s)
    if not lines:
        lines.append("no difference found")
    return lines
