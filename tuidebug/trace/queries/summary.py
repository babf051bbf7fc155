"""The summary of a trace that ``tuidebug info`` prints (and ``--json`` emits for scripts)."""

from __future__ import annotations

import re
from typing import Any

from tuidebug.trace.queries import cache_keys
from tuidebug.trace.queries import collectives as coll
from tuidebug.trace.queries.dynamic import compile_dynamic
from tuidebug.trace.queries.failure import died_text, error_report
from tuidebug.trace.queries.kernel_sizes import graph_kernel_sizes
from tuidebug.trace.queries.profile import profile_summary, profile_view
from tuidebug.trace.format import schema
from tuidebug.trace.queries.provenance import generated_kernels
from tuidebug.trace.format.manifest import Manifest, ScriptError
from tuidebug.trace.format.reader import GraphRecord, StageInfo, Trace
from tuidebug.trace.queries import advice, graph_breaks
from tuidebug.trace.queries.attempts import restarts
from tuidebug.trace.queries.frames import skipped_frames
from tuidebug.trace.queries.vllm import vllm_summary
from tuidebug.trace.queries.numerics import numerics_summary, testing_only_flags


def cudagraphs_state(g: GraphRecord) -> str | None:
    """Whether a graph runs under CUDA graphs: ``on``, ``off``, ``skipped: <Inductor's reason>``,
    ``requested, but no CUDA kernels``; None for a trace that does not record it (imports)."""
    cg = g.meta.cudagraphs
    if cg is None:
        return None
    skipped = [r.strip() for r in cg.skipped if r.strip()]
    if skipped:
        return "skipped: " + "; ".join(dict.fromkeys(skipped))
    if not cg.enabled:
        return "off"
    kinds = {k.kind for k in g.kernels}
    if kinds and "triton" not in kinds and kinds <= {"cpp", "extern"}:
        return "requested, but no CUDA kernels"
    return "on"


# Graph caches in a capture's compile metrics: (name, metrics key prefix). An imported log's
# cache events use the same names.
_CACHE_METRICS = (("fx_graph", "inductor_fx_local_cache"),
                  ("aotautograd", "aotautograd_local_cache"),
                  ("fx_graph remote", "inductor_fx_remote_cache"),
                  ("aotautograd remote", "aotautograd_remote_cache"))


_LOOKUP_KEYS = ("cache", "result", "graph", "graph_kind", "key", "miss_reason", "compared_with")


def cache_counts(c: dict[str, Any]) -> dict[str, dict[str, int]]:
    """A Dynamo compile's graph-cache lookups, ``{cache: {"hit": n, "miss": n}}``: from the
    cache events of an imported log, or from a capture's compile metrics (forward and
    backward); empty when no cache was looked up (a capture turns them off)."""
    out: dict[str, dict[str, int]] = {}
    events = [e for e in c.get("cache") or [] if isinstance(e, dict)]
    for e in events:
        counts = out.setdefault(str(e.get("cache", "?")), {"hit": 0, "miss": 0})
        result = str(e.get("result", "?"))
        counts[result] = counts.get(result, 0) + 1
    if events:
        return out
    for key in ("metrics", "backward_metrics"):
        m = c.get(key) or {}
        for name, prefix in _CACHE_METRICS:
            for result in ("hit", "miss"):
                v = m.get(f"{prefix}_{result}_count")
                if isinstance(v, int) and v:
                    out.setdefault(name, {"hit": 0, "miss": 0})[result] += v
    return out


def from_cache(g: GraphRecord, c: dict[str, Any] | None) -> bool:
    """Whether a graph's compiled code came from the FX graph / AOTAutograd cache (``c``: its
    Dynamo compile), so that its passes, IR and fusion ran in an earlier process, unobserved."""
    cache = g.meta.cache
    if cache is not None:  # an imported log says per graph
        return "hit" in cache.values()
    hit = any(counts.get("hit") for counts in cache_counts(c or {}).values())
    return hit and not any(s.kind == "pass" for s in g.stages)


def changed_passes(stages: list[StageInfo]) -> list[str] | None:
    """The passes that changed the graph, in order; None when that is not known (a trace
    imported from a log, which times passes but never snapshots them)."""
    passes = [s for s in stages if s.kind == "pass"]
    if passes and all(s.changed is None for s in passes):
        return None
    return [s.name for s in passes if s.changed and s.file]


def final_nodes(g: GraphRecord) -> int | None:
    """The node count of the graph's last snapshot: the count its stage list records (the
    snapshot is not read), else the snapshot's own; None without a readable snapshot."""
    snaps = g.snapshots()
    if not snaps:
        return None
    n = snaps[-1].nodes
    if isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2**53:
        return n
    final = g.stage_graph(snaps[-1])
    return len(final) if final is not None else None


def graph_summary(g: GraphRecord, compile_record: dict[str, Any] | None = None, *,
                  kernel_sizes: bool = True) -> dict[str, Any]:
    """One graph's line of ``tuidebug info``; ``compile_record``: its Dynamo compile (from
    ``Trace.compiles``), which says whether the graph came from a cache; ``kernel_sizes``:
    False leaves out each kernel's sizes and buffer accesses (``info --json`` has them; the
    table does not show them, and reading them is most of the cost on a large graph: the IR
    and every kernel's file)."""
    meta = g.meta
    g.check_files()
    stages = g.stages
    nodes = final_nodes(g)
    kernels = [k for k in g.kernels if not k.extern]
    externs = [k for k in g.kernels if k.extern]
    prov = g.provenance.get("kernels") or {}
    with_source = [k.name for k in kernels if (prov.get(k.name) or {}).get("source")]
    files: set[str] = set()
    for p in prov.values():
        for s in p.get("source") or []:
            if s.get("file"):
                files.add(s["file"])
    fusion = meta.fusion
    recorded = fusion.recorded
    cached = from_cache(g, compile_record)
    changed = None if cached else changed_passes(stages)  # a cache hit ran no pass here
    return {
        "id": g.id,
        "kind": g.kind,
        "compile_id": g.compile_id,
        "status": g.status,
        "nodes": nodes,
        "stages": len(stages),
        "passes_run": sum(1 for s in stages if s.kind == "pass"),
        "passes_changed": len(changed) if changed is not None else None,
        "changed_passes": changed,
        "kernels": generated_kernels(g) or 0,
        "kernel_kinds": sorted({str(k.kind) for k in kernels}),
        "extern_calls": len(externs),
        "kernels_with_source": len(with_source),
        "source_files": sorted(files),
        "fused": (fusion.fused or 0) if recorded else None,
        "rejected_fusions": (fusion.rejected or 0) if recorded else None,
        "autotuned_ops": len(g.autotune),
        "cudagraphs": cudagraphs_state(g),
        "collectives": [coll.describe(c) for c in coll.issued(g)],
        "ddp_bucket": meta.ddp_bucket,
        "from_cache": cached,
        "kernel_sizes": graph_kernel_sizes(g) if kernel_sizes else None,
        "phase_times_s": meta.phase_times_s,
        "error": g.error.to_json() if g.error is not None else None,
    }


def summary_status(trace: Trace, exit_code: int | None = None) -> str:
    """The status ``info`` gives: the trace's own (``Trace.status``), except ``script_failed``
    where the compile was fine (ok) but the traced script raised or exited non-zero (as its
    manifest says, or ``exit_code``: the script's exit code where the caller saw the process
    end, as a launcher's rank does)."""
    status = trace.status
    m = trace.manifest
    if status == schema.STATUS_OK and (m.script_error is not None or m.script_exit_code
                                       or exit_code):
        return schema.STATUS_SCRIPT_FAILED
    return status


def failed_compile(compiles: dict[str, dict[str, Any]], error: ScriptError | None
                   ) -> dict[str, Any] | None:
    """The Dynamo compile that raised the script's ``error`` into it, if one did: of the
    compiles that failed and installed no code (Dynamo refused the frame: a ``fullgraph=True``
    break, a backend that raised, or a ConstraintViolationError while building the guards of a
    graph Inductor had compiled), the last whose error is the script's (``_raised``): the same
    error (torch appends the user's stack and a hint to the message, a script may put a prefix
    before it), the error the script raised it from (``raise … from e``: the cause its
    traceback prints), or the error it wrapped (``BackendCompilerFailed`` holds the backend's
    error as ``RuntimeError: …``, which the script raised). A compile error the script caught
    (it ran eagerly) is not the one when it later raised the same type for another reason;
    two compiles that failed are told apart by their errors, and none is named where none is
    the script's. ``{in_compile, in_compile_at, in_compile_graphs}`` (``f at mark.py:3``; the
    graphs it compiled, which never ran), or None."""
    if error is None or not error.type:
        return None
    ids = list(compiles)
    causes = _causes(error.traceback or "")
    for at in range(len(ids) - 1, -1, -1):
        cid = ids[at]
        c = compiles[cid]
        m = c.get("metrics") or c.get("summary") or {}
        if not m.get("fail_type") or m.get("has_guarded_code") is True:
            continue
        if not _raised(m, error, causes, at == len(ids) - 1):
            continue
        place = compile_place(compiles, cid)
        where = str(place["file"] or "?").replace("\\", "/").rsplit("/", 1)[-1]
        return {"in_compile": cid,
                "in_compile_at": f"{place['function'] or '?'} at {where}:{place['line'] or '?'}",
                "in_compile_graphs": list(c.get("graphs") or [])}
    return None


_TEXT = 1000  # characters of an error's text compared
_CAUSE = "The above exception was the direct cause of the following exception:"
_CONTEXT = "During handling of the above exception, another exception occurred:"
_LINKS = re.compile(f"^({re.escape(_CAUSE)}|{re.escape(_CONTEXT)})$", re.M)


def _raised(m: dict[str, Any], error: ScriptError, causes: list[str], last: bool) -> bool:
    """Whether the compile whose metrics are ``m`` failed with the script's ``error`` (see
    ``failed_compile``); where the error or the compile's failure has no text, only the last
    compile of all is taken, and only of the error's type."""
    kind = str(m.get("fail_type"))
    full = str(m.get("fail_reason") or "")
    reason = full.strip()[:_TEXT]
    message = str(error.message or "")
    said = _paragraph(message)
    if error.type == kind:
        if not reason or not said:
            return last
        if reason in message or reason.startswith(said):
            return True
    if reason and any(f"{kind}: {reason}" in c for c in causes):
        return True  # raise … from the compile's error
    inner = _first_line(message)
    return bool(inner) and f"{error.type}: {inner}" in (ln.strip() for ln in full.splitlines())


def _causes(traceback: str) -> list[str]:
    """The printed exceptions the script's error was raised from (``raise … from e``), nearest
    first, from its traceback text; one it was raised while handling is not a cause."""
    parts = _LINKS.split(traceback)  # [first, link, second, link, …, the script's error]
    out, i = [], len(parts) - 1
    while i >= 2 and parts[i - 1] == _CAUSE:
        out.append(parts[i - 2])
        i -= 2
    return out


def _paragraph(text: str) -> str:
    """An error's text up to its first blank line (torch appends its hints after one)."""
    return re.split(r"\n\s*\n", text.strip(), maxsplit=1)[0].strip()[:_TEXT]


def _first_line(text: Any) -> str:
    """The first line of an error's text with words in it ("": none)."""
    return next((ln.strip() for ln in str(text or "").splitlines() if ln.strip()), "")


def script_outcome(manifest: Manifest, compiles: dict[str, dict[str, Any]] | None = None
                   ) -> dict[str, Any]:
    """How the traced script itself ended, when not well: ``script_error`` (``type``,
    ``message``, ``after_compiling``; where torch.compile raised it, the compile that failed:
    :func:`failed_compile`, from ``compiles``) and/or ``script_exit_code``; {} otherwise."""
    out: dict[str, Any] = {}
    se = manifest.script_error
    if se is not None:
        out["script_error"] = {"type": se.type, "message": se.message,
                               "after_compiling": se.after_compiling,
                               **(failed_compile(compiles or {}, se) or {})}
    if manifest.script_exit_code:
        out["script_exit_code"] = manifest.script_exit_code
    return out


def compile_place(compiles: dict[str, dict[str, Any]], cid: str) -> dict[str, Any]:
    """``{function, file, line, restarted}`` of a Dynamo compile. A frame whose analysis restarted
    (``0/0``, then ``0/0_1``) has no metrics of its own: it is the same frame as its restart, so
    its function and place are the restart's, and ``restarted`` names it; one with no place of
    its own otherwise takes its frame's (``3/2`` that hit the recompile limit: ``3/0``'s)."""
    def place(c: dict[str, Any]) -> dict[str, Any]:
        m = c.get("metrics") or c.get("summary") or {}
        return {"function": m.get("co_name"), "file": m.get("co_filename"),
                "line": m.get("co_firstlineno")}

    own = place(compiles.get(cid) or {})
    if own["function"]:
        return {**own, "restarted": None}
    later = restarts(compiles, cid)
    for k in later:
        p = place(compiles[k])
        if p["function"]:
            return {**p, "restarted": k}
    # a compile Dynamo gave up on (the recompile limit) has no metrics of its own either: its
    # frame (the id before the slash) is the same function as the frame's other compiles
    frame = cid.split("/")[0] + "/"
    for k in compiles:
        p = place(compiles[k])
        if k.startswith(frame) and p["function"]:
            return {**p, "restarted": later[0] if later else None}
    return {**own, "restarted": later[0] if later else None}


def compile_error_site(trace: Trace) -> dict[str, Any]:
    """Where a failed compile's error points, as the Errors screen shows it
    (``failure.error_report``): ``kernel``, ``kernel_graph``, ``kernel_line`` and ``code`` (the
    generated line the compiler quotes), ``first_error`` (the compiler's first error line)."""
    r = error_report(trace)
    site = r.site
    return {"kernel": site.kernel if site else None, "kernel_graph": site.graph if site else None,
            "kernel_line": site.line if site else None, "code": site.code if site else None,
            "first_error": re.sub(r"^\S*/(?=[^/\s]+:\d+)", "", r.first_error)
            if r.first_error else None}


def trace_summary(trace: Trace, *, kernel_sizes: bool = True) -> dict[str, Any]:
    """What ``info`` shows of a trace (``kernel_sizes``: see ``graph_summary``)."""
    m = trace.manifest
    err = trace.error
    compiles = trace.compiles
    out: dict[str, Any] = {
        "trace": str(trace.root),
        "status": summary_status(trace),
        "phase": trace.phase,
        "format_version": m.format_version,
        "versions": m.versions,
        "command": m.command,
        "graphs": [graph_summary(g, compiles.get(g.compile_id), kernel_sizes=kernel_sizes)
                   for g in trace.graphs],
        "compiles": [],
        "config_changed": sorted((trace.config.get("changed") or {}).keys()),
        "warnings": list(m.warnings),
        # what this torch lacks for a part of the capture: a fact, not a warning (info --json)
        "not_available": list(m.not_available),
    }
    if m.imported_from:
        out["imported_from"] = m.imported_from
    if err is not None:
        out["error"] = {**err.brief(), **compile_error_site(trace)}
    out.update(script_outcome(m, compiles))
    by_graph: dict[Any, list[dict[str, Any]]] = {}
    by_compile: dict[Any, list[dict[str, Any]]] = {}
    for lk in cache_keys.explain(trace.cache_lookups()):  # grouped once: no scan per graph
        shown = {k: lk.get(k) for k in _LOOKUP_KEYS if k in lk}
        by_graph.setdefault(lk.get("graph"), []).append(shown)
        by_compile.setdefault(lk.get("compile_id"), []).append(shown)
    for g in out["graphs"]:
        g["cache"] = by_graph.get(g["id"], [])
    breaks = graph_breaks.trace_breaks(trace)
    out["skipped_frames"] = [f.to_json() for f in skipped_frames(m.skipped_frames)]
    out["advice"] = {"suggestions": [a.to_json() for a in advice.suggestions(trace)],
                     "tried": [t.to_json() for t in advice.rank(list(
                         advice.verdicts(trace).values()))]}
    out["graph_break_summary"] = graph_breaks.summarize(
        [b for bs in breaks.values() for b in bs]).to_json()
    for cid, c in compiles.items():
        metrics = c.get("metrics") or {}
        place = compile_place(compiles, cid)
        out["compiles"].append({
            "id": cid, "graphs": c.get("graphs", []),
            "function": place["function"], "file": place["file"], "line": place["line"],
            "restarted_as": place["restarted"],
            "compile_time_s": metrics.get("entire_frame_compile_time_s"),
            "inductor_time_s": metrics.get("inductor_compile_time_s"),
            "graph_breaks": [b.to_json() for b in breaks.get(cid, [])],
            "recompile_reasons": c.get("recompile_reasons") or [],
            "cache": cache_counts(c),
            "cache_lookups": by_compile.get(cid, []),
            **compile_dynamic(trace, cid),
        })
    checks = (trace.runtime.get("checks") or {})
    out["accuracy"] = {cid: {k: c.get(k) for k in ("max_abs", "max_rel", "close", "skipped",
                                                   "rule", "detail", "reference", "tol",
                                                   "outputs", "gradients", "first_call_s",
                                                   "eager_s")}
                       for cid, c in checks.items() if isinstance(c, dict)}
    out["numerics"] = numerics_summary(trace)
    out["testing_only"] = [{"flag": n, "value": v} for n, v in testing_only_flags(trace)]

    view = profile_view(trace)
    if view is not None:
        out["profile"] = profile_summary(view)
    if trace.status == "crashed":
        out["error"] = out.get("error") or {
            "phase": trace.phase, "type": "crashed", "message": died_text(trace.phase)}
    vllm = vllm_summary(trace)
    if vllm is not None:
        out["vllm"] = vllm
    out["problems"] = [str(p) for p in trace.problems]
    return out
