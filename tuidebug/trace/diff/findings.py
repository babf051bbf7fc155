"""The comparison summed up: totals per side (``summary``) and one-line findings, the most telling
first (``finding_lines``)."""

from __future__ import annotations

import collections
import json
from typing import Any, Iterable

from tuidebug.trace.diff.common import pair, total
from tuidebug.trace.diff.kernels import time_ratio
from tuidebug.trace.diff.profile import threads_line
from tuidebug.trace.queries.verdict import format_duration  # noqa: F401 (re-exported)


def summary(d: dict[str, Any]) -> dict[str, Any]:
    status = collections.Counter(k["status"] for g in d["graphs"] for k in g["kernels"])
    graphs = d["graphs"]
    return {
        "status": pair(d["a"]["status"], d["b"]["status"]),
        "config_changed": len([c for c in d["config"]["changed"] if not c["capture"]]),
        "capture_config_changed": len([c for c in d["config"]["changed"] if c["capture"]]),
        "graphs": pair(sum(1 for g in graphs if g["in"] != "b"),
                        sum(1 for g in graphs if g["in"] != "a")),
        # an attempt Dynamo abandoned (restarted) is no graph of the run's: not a difference
        "graphs_only_a": [g["id"] for g in graphs if g["in"] == "a"
                          and g["status"]["a"] != "restarted"],
        "graphs_only_b": [g["id"] for g in graphs if g["in"] == "b"
                          and g["status"]["b"] != "restarted"],
        "kernels": pair(total(g["kernel_count"]["a"] for g in graphs),
                         total(g["kernel_count"]["b"] for g in graphs)),
        "kernel_changes": {s: status.get(s, 0)
                           for s in ("unchanged", "changed", "added", "removed", "renamed")},
        "extern_calls": pair(total(g["extern_count"]["a"] for g in graphs),
                              total(g["extern_count"]["b"] for g in graphs)),
        "fx_nodes": pair(total(g["nodes"]["a"] for g in graphs), total(g["nodes"]["b"] for g in graphs)),
        "ir_nodes_post": pair(total((g["ir"]["post"]["a"] or {}).get("nodes") for g in graphs),
                               total((g["ir"]["post"]["b"] or {}).get("nodes") for g in graphs)),
        "ir_nodes_pre": pair(total((g["ir"]["pre"]["a"] or {}).get("nodes") for g in graphs),
                              total((g["ir"]["pre"]["b"] or {}).get("nodes") for g in graphs)),
        "scheduler_kernels": pair(total((g["ir"]["post"]["a"] or {}).get("kernels") for g in graphs),
                                   total((g["ir"]["post"]["b"] or {}).get("kernels") for g in graphs)),
        "reductions_post": pair(total((g["ir"]["post"]["a"] or {}).get("reductions") for g in graphs),
                                 total((g["ir"]["post"]["b"] or {}).get("reductions") for g in graphs)),
        # of the graphs both traces have: each pass of a graph only one has "differs" otherwise
        "passes_differing": sum(len(g["passes"]) for g in graphs if g["in"] == "both"),
        "fused": pair(total(g["fusion"]["fused"]["a"] for g in graphs),
                       total(g["fusion"]["fused"]["b"] for g in graphs)),
        "wrapper_markers": _merge_markers(graphs),
        "autotuned_ops": pair(total(g["autotune"]["a"] for g in graphs),
                               total(g["autotune"]["b"] for g in graphs)),
        "compile_time_s": pair(total(c["compile_time_s"]["a"] for c in d["compiles"]),
                                total(c["compile_time_s"]["b"] for c in d["compiles"])),
        "inductor_time_s": pair(total(c["inductor_time_s"]["a"] for c in d["compiles"]),
                                 total(c["inductor_time_s"]["b"] for c in d["compiles"])),
        "first_call_s": pair(total(r["first_call_s"]["a"] for r in d["runtime"]),
                              total(r["first_call_s"]["b"] for r in d["runtime"])),
        "kernel_run_s": pair(_kernel_total(graphs, "a", "run_s"),
                              _kernel_total(graphs, "b", "run_s")),
        "kernel_compile_s": pair(_kernel_total(graphs, "a", "compile_s"),
                                  _kernel_total(graphs, "b", "compile_s")),
        "cache": {n: pair(total(c["cache"][n]["a"] for c in d["compiles"]),
                           total(c["cache"][n]["b"] for c in d["compiles"]))
                  for n in ("fxgraph_cache_hit", "fxgraph_cache_miss", "fxgraph_cache_bypass")},
        "accuracy_close": pair(_all_close(r["close"]["a"] for r in d["runtime"]),
                                _all_close(r["close"]["b"] for r in d["runtime"])),
        "errors": pair(d["a"]["error"], d["b"]["error"]),
    }


def _kernel_total(graphs: list[dict[str, Any]], side: str, key: str) -> float | None:
    """Seconds over all kernels of one side: compile times, or run time per call × calls."""
    def one(k: dict[str, Any]) -> Any:
        v = k[key][side]
        calls = k["calls"][side] if key == "run_s" else 1
        return v * calls if isinstance(v, (int, float)) and isinstance(calls, int) else None
    vals = [x for x in (one(k) for g in graphs for k in g["kernels"]) if x is not None]
    return round(sum(vals), 9) if vals else None  # microseconds: more digits than total keeps


SAME_CODE = ("unchanged", "renamed")  # a kernel whose code is identical in A and B


def _largest_run_change(d: dict[str, Any], threshold: float = 1.5) -> dict[str, Any] | None:
    """The kernel whose code changed and whose run time changed the most (by ratio), if by at
    least ``threshold``× and beyond the spread of both sides (their fastest-to-median ranges
    apart: the two traces were timed in two processes)."""
    ks = [k for g in d["graphs"] for k in g["kernels"]
          if k.get("run_ratio") and k["status"] not in SAME_CODE and runs_apart(k)]
    if not ks:
        return None
    top = max(ks, key=lambda k: max(k["run_ratio"], 1 / k["run_ratio"]))
    return top if max(top["run_ratio"], 1 / top["run_ratio"]) >= threshold else None


def _range(k: dict[str, Any], side: str) -> tuple[float, float] | None:
    med, low = k["run_s"][side], k["run_min_s"][side]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (med, low)):
        return None
    return (min(low, med), max(low, med))


def timed_once(k: dict[str, Any], side: str) -> bool:
    """Whether a side timed a kernel once (the timing budget spent on a busy machine): the
    count the trace records (``timed``: calls × runs); where it records none (an older
    trace), fastest and median the same."""
    n = (k.get("timed") or {}).get(side)
    if isinstance(n, int) and not isinstance(n, bool):
        return n <= 1
    r = _range(k, side)
    return r is not None and r[0] == r[1]


def runs_apart(k: dict[str, Any]) -> bool:
    """Whether a kernel's fastest-to-median run times in A and B do not overlap. A side timed
    once (``timed_once``) has no spread: never apart."""
    ra, rb = _range(k, "a"), _range(k, "b")
    return (ra is not None and rb is not None and not timed_once(k, "a")
            and not timed_once(k, "b") and (ra[1] < rb[0] or rb[1] < ra[0]))


def process_kind(side: dict[str, Any]) -> str:
    """Where a trace's compiles ran: the warm recompile worker (its imports and warm-up done)
    or a fresh process; their compile times are compared only like with like."""
    return "the warm recompile worker" if side.get("recompile") else "a fresh process"


def _all_close(values: Iterable[Any]) -> bool | None:
    vals = [v for v in values if isinstance(v, bool)]
    return all(vals) if vals else None


def _merge_markers(graphs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Marker counts over the graphs both traces have, for markers that differ somewhere (a
    graph only one side has is named as such: its markers counted against nothing read as the
    other side having none, ``assert_size_stride: 0 → 97`` for a rank that compiled once more
    than another whose graphs held the same asserts)."""
    out: dict[str, dict[str, int]] = {}
    for g in graphs:
        if g.get("in") != "both":
            continue
        for k, v in g["wrapper"]["markers"].items():
            e = out.setdefault(k, {"a": 0, "b": 0})
            e["a"] += v["a"] or 0
            e["b"] += v["b"] or 0
    return out


def _arrow(p: dict[str, Any], fmt: str = "{}") -> str:
    f = lambda v: "—" if v is None else fmt.format(v)  # noqa: E731
    return f"{f(p['a'])} → {f(p['b'])}"


def _kernel_time_lines(d: dict[str, Any], s: dict[str, Any]) -> list[str]:
    """Run times of the generated kernels whose code changed (identical code is never a
    change), each side with its spread (fastest to median: the two traces were timed in two
    processes, not side by side): a change only when the ranges are apart."""
    lines = []
    changed = [k for g in d["graphs"] for k in g["kernels"] if k["status"] not in SAME_CODE]
    sums: dict[str, list[float]] = {}
    for side in ("a", "b"):
        vals = [(k["run_s"][side] * (k["calls"][side] or 1), k["run_min_s"][side]
                 * (k["calls"][side] or 1)) for k in changed
                if isinstance(k["run_s"][side], (int, float))
                and isinstance(k["run_min_s"][side], (int, float))]
        if vals:
            sums[side] = [sum(v[1] for v in vals), sum(v[0] for v in vals)]
    if len(sums) == 2:
        (a0, a1), (b0, b1) = sorted(sums["a"]), sorted(sums["b"])
        once = any(all(timed_once(k, side) for k in changed
                       if isinstance(k["run_s"][side], (int, float))
                       and isinstance(k["run_min_s"][side], (int, float)))
                   for side in "ab")  # every kernel of a side timed once: no spread
        noise = not (a1 < b0 or b1 < a0)
        lines.append(f"run time of the {len(changed)} generated kernel(s) whose code changed: "
                     f"{format_duration(a1)} (fastest {format_duration(a0)}) → "
                     f"{format_duration(b1)} (fastest {format_duration(b0)})"
                     + (": not compared (a kernel timed once has no spread)" if once else
                        ": no change (inside the noise; timed in two processes)" if noise
                        else " (timed in two processes, not side by side)"))
    p = s.get("kernel_compile_s") or {"a": None, "b": None}
    if p["a"] is not None and p["b"] is not None and p["a"] != p["b"] and _like(d):
        ratio = time_ratio(p)
        lines.append(f"generated kernels' compile time (builds timed): {format_duration(p['a'])}"
                     f" → {format_duration(p['b'])}" + (f" (×{ratio:.2f})" if ratio else ""))
    top = _largest_run_change(d)
    if top:
        lines.append(f"largest kernel run time change: {top['b']} {format_duration(top['run_s']['a'])}"
                     f" → {format_duration(top['run_s']['b'])} (×{top['run_ratio']:.2f})")
    return lines


def _like(d: dict[str, Any]) -> bool:
    return process_kind(d["a"]) == process_kind(d["b"])


def _compile_time_line(d: dict[str, Any], s: dict[str, Any], same: bool) -> str | None:
    """The compile times, compared like with like; ``same``: nothing else differs (the same
    graphs, kernels and config) and neither do the caches' hits and Inductor's counters, so a
    difference is the machine's moment, not a change."""
    p = s["compile_time_s"]
    if p["a"] is None or p["b"] is None:
        return None
    if not _like(d):
        return (f"compile time not compared: A compiled in {process_kind(d['a'])} "
                f"({p['a']:.2f}s), B in {process_kind(d['b'])} ({p['b']:.2f}s)")
    same = same and all(v["a"] == v["b"] for v in s["cache"].values()) and all(
        v["a"] == v["b"] for c in d["compiles"] for v in (c.get("counters") or {}).values())
    if same and p["a"] != p["b"]:
        return (f"compile time: {_arrow(p, '{:.2f}s')}: no change (the same graphs and "
                "kernels, compiled once each: the machine's moment, not a difference)")
    return f"compile time: {_arrow(p, '{:.2f}s')}" + _kernel_builds(d)


def _kernel_builds(d: dict[str, Any]) -> str:
    """Where one side built kernels the other took from Inductor's kernel cache (a C++ build
    costs seconds, a cache hit none), the compile times are not like for like: how many each
    side built, so that the difference is not read as the cost of what changed. Counted over
    the kernels both sides have and both recorded how they got (a kernel only one side has is
    built by what changed; a trace that does not record it, e.g. an imported one, says
    nothing)."""
    both = [h for g in d["graphs"] for k in g["kernels"]
            for h in [k.get("compiled") or {}] if h.get("a") is not None and h.get("b") is not None]
    built = {side: sum(h[side] != "cached" for h in both) for side in ("a", "b")}
    if not both or built["a"] == built["b"]:
        return ""
    n = len(both)
    return (f", not like for like (kernels built, the others taken from Inductor's kernel cache: "
            f"A {built['a']} of {n}, B {built['b']} of {n}; a build costs seconds)")


def finding_lines(d: dict[str, Any]) -> list[str]:
    """Short sentences saying what differs, the most telling first (for a status line)."""
    s = d.get("summary") or summary(d)
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
    installs = [c["name"] for c in d["config"].get("install_paths") or []]
    if installs:
        lines.append(f"config paths that differ only by where torch is installed: {', '.join(installs)}")
    if not d["config"]["changed"]:
        for c in d["config"]["overrides"]:
            lines.append(f"--set {c['name']}: {json.dumps(c['a'])} → {json.dumps(c['b'])}")
    kc = s["kernel_changes"]
    if s["kernels"]["a"] != s["kernels"]["b"] or any(kc[k] for k in ("changed", "added", "removed")):
        lines.append(f"kernels: {_arrow(s['kernels'])} ({kc['changed']} changed, "
                     f"{kc['added']} added, {kc['removed']} removed, {kc['unchanged']} unchanged)")
        threads = threads_line(d.get("machine"), sum(
            1 for g in d["graphs"] for k in g["kernels"]
            if k["status"] == "changed" and k.get("kind") == "cpp"))
        if threads:  # the code differs for the thread count --profile chose, not for a change
            lines.append(threads)
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
        names = sorted({p["name"] for g in d["graphs"] if g["in"] == "both"
                         for p in g["passes"]})
        lines.append(f"passes with a different effect: {', '.join(names[:8])}"
                     + (" …" if len(names) > 8 else ""))
    one_sided = len(s["graphs_only_a"]) + len(s["graphs_only_b"])
    for k, v in s["wrapper_markers"].items():
        if v["a"] == v["b"]:  # one graph's more, another's fewer: the same in all
            continue
        lines.append(f"wrapper {k}: {_arrow(v)}" + (
            f" (over the graphs both traces have: {one_sided} graph(s) only one has left out)"
            if one_sided else ""))
    for n, v in s["cache"].items():
        if v["a"] != v["b"]:
            lines.append(f"{n}: {_arrow(v)}")
    if s["accuracy_close"]["a"] != s["accuracy_close"]["b"]:
        lines.append(f"matches eager: {_arrow(s['accuracy_close'])}")
    if s["graphs_only_a"] or s["graphs_only_b"]:
        lines.append(f"graphs only in A: {', '.join(s['graphs_only_a']) or 'none'}; "
                     f"only in B: {', '.join(s['graphs_only_b']) or 'none'} (counted in the "
                     "kernel, extern call, node and fusion totals; not in the wrapper markers, "
                     "compared over the graphs both have)")
    compile_line = _compile_time_line(d, s, same=not lines)
    if compile_line:
        lines.append(compile_line)
    lines += _kernel_time_lines(d, s)
    if not lines:
        lines.append("no difference found")
    return lines
