"""The MCP tools' answers about a whole trace: what was opened, its summary, its recompiles
with their advice, the first divergence of a job, the profile, the numerics.

Each is the answer ``info`` / ``info --json`` / the TUI give (``tuidebug.trace`` queries),
trimmed to what an agent reads first, with evidence references into the trace and the calls
worth making next. The sentences (``Answer.answer``, ``Next.why``) are this module's own words:
only counts and identifiers go into them, never text read from a trace.
"""

from __future__ import annotations

from typing import Any

from tuidebug.mcp.bounded import Answer, Next, next_call
from tuidebug.mcp.evidence import compile_file, graph_file, ref
from tuidebug.mcp.traces import Opened1
from tuidebug.trace.queries import recompiles as rc
from tuidebug.trace.format import schema
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.summary import compile_place, trace_summary
from tuidebug.viewers.summary_text import accuracy_verdict

_GRAPH_KEYS = ("id", "kind", "status", "nodes", "stages", "passes_changed", "kernels",
               "kernel_kinds", "extern_calls", "fused", "from_cache", "cudagraphs", "error")


def _nexts(*calls: Next | None) -> list[Next]:
    return [c for c in calls if c is not None]


def recompile_items(trace: Trace) -> list[dict[str, Any]]:
    """Every recompile explained (``recompiles.explain_compile``) with where its frame is."""
    compiles = trace.compiles
    out = []
    for cid in compiles:
        why = rc.explain_compile(trace, cid)
        if why is None:
            continue
        place = compile_place(compiles, cid)
        out.append({"compile_id": cid, "function": place["function"], "file": place["file"],
                    "line": place["line"], **{k: why.get(k) for k in (
                        "previous", "failed_guard", "guard_at", "source", "expected",
                        "failing_value", "suggestion", "limit_hit", "limit", "resumed")},
                    "ref": ref(compile_file(cid), "recompile_reasons")})
    return out


def _break_count(trace: Trace) -> int:
    return sum(len(c.get("dynamo_graph_break_reason") or []) for c in trace.compiles.values())


def open_answer(o: Opened1, trace: Trace | None) -> Answer:
    """What was opened: its kind, the counts that say what to ask next, and those calls."""
    h = o.handle
    data: dict[str, Any] = {"named": str(o.opened.named), "kind": o.opened.kind,
                            "trace_dir": str(o.opened.trace) if o.opened.trace else None,
                            "notes": o.notes}
    if o.job is not None:
        from tuidebug.trace.jobs.job import rank_dirs

        data.update(job=str(o.job), rank_opened=o.opened.rank, ranks=sorted(rank_dirs(o.job)))
    if trace is None:
        return Answer("open_trace", "opened a distributed job in which no rank has a trace",
                      h, data, next=_nexts(next_call("divergence", "what the job's ranks did",
                                                     trace=h)))
    breaks = _break_count(trace)
    recompiled = len(recompile_items(trace))
    has_profile = bool(trace.profile)
    checks = trace.runtime.get("checks") or {}
    data.update(status=trace.status, phase=trace.phase, graphs=len(trace.graphs),
                compiles=len(trace.compiles), graph_breaks=breaks, recompiles=recompiled,
                profiled=has_profile, accuracy_checked=bool(checks),
                error=trace.error and {"phase": trace.error.phase, "type": trace.error.type,
                                       "message": trace.error.message})
    sentence = (f"opened {'a rank of a distributed job' if o.job else 'a trace'} as {h}: "
                f"{len(trace.graphs)} graph(s) from {len(trace.compiles)} compile(s), "
                f"{breaks} graph break(s), {recompiled} recompile(s)"
                + ("; compilation or the run failed (see data.error)" if trace.error else ""))
    return Answer("open_trace", sentence, h, data, next=_nexts(
        next_call("graph_breaks", "each graph break, its user line and advice", trace=h)
        if breaks else None,
        next_call("recompiles", "why each recompile happened and what avoids it", trace=h)
        if recompiled else None,
        next_call("divergence", "where the job's ranks part", trace=h) if o.job else None,
        next_call("summary", "every compile and graph", trace=h),
        next_call("profile", "where the time goes", trace=h) if has_profile else None,
        next_call("numerics", "outputs compared with eager", trace=h) if checks else None))


def summary_answer(h: str, trace: Trace) -> Answer:
    """``info --json``'s summary: the trace's status, error, versions in ``data``; each Dynamo
    compile (where, its breaks and recompile, its graphs) as an item."""
    s = trace_summary(trace)
    graphs = {g["id"]: g for g in s["graphs"]}

    def graph_row(gid: str) -> dict[str, Any]:
        return {k: graphs[gid].get(k) for k in _GRAPH_KEYS} | {
            "ref": graph_file(gid, schema.META)}

    items = []
    listed: set[str] = set()
    for c in s["compiles"]:
        # a compile's graphs: those its record lists, and those naming it (a recompile's
        # record may list none)
        own = list(dict.fromkeys([*c["graphs"], *(gid for gid, g in graphs.items()
                                                  if g.get("compile_id") == c["id"])]))
        own = [gid for gid in own if gid in graphs]
        listed.update(own)
        items.append({
            "compile_id": c["id"], "function": c["function"], "file": c["file"],
            "line": c["line"], "graph_breaks": c["graph_breaks"],
            "recompile": bool(c.get("recompile")), "compile_time_s": c["compile_time_s"],
            "cache": c["cache"], "graphs": [graph_row(gid) for gid in own],
            "ref": compile_file(c["id"])})
    orphans = [gid for gid in graphs if gid not in listed]  # no compile record (imports)
    if orphans:
        items.append({"compile_id": None, "graphs": [graph_row(gid) for gid in orphans],
                      "ref": "manifest.json#/graphs"})
    data = {k: s.get(k) for k in ("trace", "status", "phase", "versions", "command", "error",
                                  "script_error", "config_changed", "warnings", "problems",
                                  "imported_from", "vllm") if s.get(k) not in (None, [], {})}
    if s.get("accuracy"):
        data["accuracy"] = {cid: accuracy_verdict(c)[0] for cid, c in s["accuracy"].items()}
    if s.get("profile"):
        data["profile_totals"] = s["profile"].get("totals")
    first = next((g for c in items for g in c.get("graphs") or []), None)
    return Answer("summary", f"{len(s['compiles'])} compile(s) and {len(s['graphs'])} graph(s)"
                  f"; status in data.status", h, data, items, "compiles",
                  refs=[schema.MANIFEST], next=_nexts(
                      next_call("stage", "a graph's stages, then one stage's nodes", trace=h,
                                graph=first["id"]) if first else None,
                      next_call("graph_breaks", "each graph break explained", trace=h)))


def recompiles_answer(h: str, trace: Trace) -> Answer:
    items = recompile_items(trace)
    return Answer("recompiles", f"{len(items)} recompile(s), each with the guard that failed "
                  "and what would avoid it" if items else "no recompile in this trace", h,
                  items=items, item_name="recompiles",
                  next=_nexts(next_call("expand", "the failed guards as Dynamo wrote them",
                                        trace=h, ref=items[0]["ref"]) if items else None))


def profile_answer(h: str, trace: Trace, by: str) -> Answer:
    """The profile (``trace --profile``): totals in ``data``; one table (``by``: kernels,
    nodes, lines or modules) as the items, in the order ``info`` shows them (by time)."""
    from tuidebug.trace.queries.profile import profile_view

    view = profile_view(trace)
    if view is None:
        return Answer("profile", "not recorded: this trace has no profile (make one with "
                      "`tuidebug trace --profile N SCRIPT`)", h)
    tables = ("kernels", "nodes", "lines", "modules")
    if by not in tables:
        by = "lines"
    rows = [r.as_json() for r in view.table(by)]
    # is compiled faster: the whole call's verdict and ledger (their text holds the trace's
    # break reasons and paths: data, never the answer's own sentence)
    whole = ({"verdict": view.calls[0].verdict_json(),
              "ledger": [p.as_json() for p in view.calls[0].ledger]} if view.calls else {})
    return Answer("profile", f"the profile by {by} ({len(rows)} rows, by time); totals "
                  "in data.totals" + ("; compiled against eager, the whole call, in "
                                      "data.verdict and data.ledger" if whole else ""), h,
                  {**whole, "compiles": view.compiles, "totals": view.totals,
                   "notes": view.notes}, rows, by, refs=[schema.PROFILE],
                  next=_nexts(*(next_call("profile", f"the profile by {t}", trace=h, by=t)
                                for t in tables if t != by)))


def numerics_answer(h: str, trace: Trace) -> Answer:
    """The eager comparisons of the run (``runtime.json`` checks): a verdict per compile, each
    output's errors and, for a training compile, each gradient's; on a mismatch, the first
    kernel whose output departs from eager by more than eager's own error
    (``queries.numerics``: the kernel, its graph, the wrong buffer's FX node and line), and
    the classification ``tuidebug numerics`` made of it (numerics.json), as ``info`` shows it."""
    from tuidebug.trace.queries.numerics import numerics_summary

    checks = trace.runtime.get("checks") or {}
    if not checks:
        return Answer("numerics", "not recorded: this trace has no comparison with eager", h)
    judged = numerics_summary(trace)
    items = []
    for cid, c in checks.items():
        if not isinstance(c, dict):
            continue
        verdict, why = accuracy_verdict(c)
        kernels = judged.get(str(cid)) or {}
        items.append({"compile_id": cid, "verdict": verdict, "why": why,
                      **{k: c.get(k) for k in ("max_abs", "max_rel", "rule", "tol",
                                               "reference", "outputs", "gradients")},
                      "kernels_judged": len(kernels.get("kernels") or []) if kernels else None,
                      "first_diverging_kernel": kernels.get("first"),
                      "kernels_note": kernels.get("note"),
                      "classified": kernels.get("classified"),
                      "ref": ref(schema.RUNTIME, "checks", cid)})
    bad = sum(1 for i in items if i["verdict"] == "MISMATCH")
    first = next((i["first_diverging_kernel"] for i in items if i["first_diverging_kernel"]),
                 None)
    sentence = f"{len(items)} comparison(s) with eager, {bad} mismatch(es)"
    if bad:
        sentence += ("; the first diverging kernel is named (first_diverging_kernel)" if first
                     else "; no kernel named as the first to diverge (kernels_note says why)")
    return Answer("numerics", sentence, h, items=items, item_name="checks", next=_nexts(
        next_call("lines_for_kernel", "the first diverging kernel's lines and code", trace=h,
                  kernel=first.get("kernel"), graph=first.get("graph")) if first else None))


def divergence_answer(o: Opened1) -> Answer:
    """Where a job's ranks part (``ranks.analyze_job``): the first divergence and the notes
    in ``data``, each rank as an item."""
    if o.job is None:
        return Answer("divergence", "not a distributed job: open a job folder (or a "
                      "multi-rank TORCH_TRACE folder) to compare its ranks", o.handle)
    from tuidebug.trace.jobs.ranks import analyze_job

    report = analyze_job(o.job)
    ranks = [{k: r.get(k) for k in ("rank", "status", "exit_code", "hostname", "compiles",
                                    "graphs", "compile_time_s", "progress", "trace")}
             for r in report["ranks"]]
    d = report["divergence"]
    data = {"world_size": report["world_size"], "divergence": d,
            "groups": report["groups"][:20], "notes": report["notes"][:20],
            "waits": report["waits"], "compile_time": report["compile_time"],
            "slow_ranks": report["slow_ranks"], "late_rank": report["late_rank"],
            "problems": report["problems"]}
    sentence = ("the ranks agree" if d is None else
                "no trace of some ranks (data.divergence.ranks)" if d.get("kind") == "no_trace"
                else f"the ranks part: the first divergence is of kind "
                     f"{d.get('kind') if str(d.get('kind', '')).isidentifier() else '?'} "
                     "(data.divergence)")
    diverging = (d or {}).get("diverging_ranks") or []
    return Answer("divergence", sentence, o.handle, data, ranks, "ranks", next=_nexts(
        next_call("summary", "the diverging rank's compiles", trace=o.handle,
                  rank=int(diverging[0])) if diverging else None))
