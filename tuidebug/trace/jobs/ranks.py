"""Cross-rank analysis of a job directory: where the ranks of a distributed job first diverge.

No torch. Each rank's trace is reduced to a fingerprint (``rank_digest.py``: per Dynamo compile
id, in the order the rank compiled them, its graphs, the content hash of every graph snapshot
normalised for what legitimately differs per rank, the hash of the generated code, cache hits),
read without opening the trace, and the ranks are grouped by it: one rank of each group is
opened and compared, so the cost of a job grows with its ranks' files, never with pairs of
ranks. The largest group (ties: the one
with the lowest rank) is the reference; the first divergence is the earliest point, in compile
order, where another group differs from it, with its cause:

- ``config``: Inductor config values differ;
- ``compile_only_on_some_ranks``: a compile id present on some ranks only (a recompile or a
  graph break), with the recompile reasons and graph-break reasons recorded for it;
- ``collectives``: a graph's collective sequence differs (trace/collectives.py): the first
  differing collective on each side and the line that issued it — checked before the graph's
  snapshots, since it is what makes a job hang;
- ``graph``: a graph's snapshots differ, at the first stage where they do, with a node diff;
- ``status``: a graph compiled on some ranks and failed on others.

Snapshots that differ only in integers of node arguments — constants, or a constant on one rank
that is a symbolic input on another (the same nodes otherwise, ops, dtypes and shapes: FSDP's
shard offsets, computed from the rank) — are a note too, with the nodes.
Same graphs and collectives with different generated code is not a divergence (autotuning
benchmarks each rank's own device and may pick another kernel): it is a note (``notes``). So is
a compile that hit a cache on some ranks only (ranks of one node sharing a cache folder: the
first to compile writes what the others read), with the same graphs and collectives.

Compile time is judged alongside, over every compile the ranks share (``skew.judge_skew``: no
rank is called slow on one sample). A file refused by the safe reader (over 64 MiB, a symbolic
link) is not compared, on whichever ranks it is refused: a ``not_compared`` note names it and
why, and it makes no divergence.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path, PurePosixPath
from typing import Any

from tuidebug.trace.queries import collectives as coll
from tuidebug.trace.jobs import job as joblayout
from tuidebug.trace.jobs import progress as rank_progress
from tuidebug.trace.jobs import rank_digest, rank_groups
from tuidebug.trace.jobs.ends import collective_timeout_text, where_it_was
from tuidebug.trace.jobs.rank_reasons import compile_keys, why_only_here
from tuidebug.trace.jobs.rank_digest import (UNREAD, Hashes, RankDigest, RankPrint,
                                             normalise_text)
from tuidebug.trace.jobs.lateness import first_return, late_rank
from tuidebug.trace.jobs import unlogged
from tuidebug.trace.jobs.skew import judge_skew, slow_ranks
from tuidebug.trace.format.graph import node_line
from tuidebug.trace.format.layout import diff_fingerprints
from tuidebug.trace.format.reader import GraphRecord, Trace

MAX_NODE_LINES = 12
_COLLECTIVE_TARGET = rank_digest.COLLECTIVE_TARGET


def _stage_name(g: GraphRecord | None, file: str) -> str:
    """The name of the stage whose snapshot is ``stages/<file>`` (its meta.json says)."""
    for st in g.snapshots() if g is not None else []:
        if st.file and PurePosixPath(st.file).name == file:
            return st.name
    return file.removesuffix(".json").split("-", 1)[-1]


def _config_values(t: Trace) -> dict[str, Any]:
    values = t.config.get("values")
    return values if isinstance(values, dict) else {}


def _compile_seconds(c: dict[str, Any]) -> float | None:
    s = (c.get("metrics") or {}).get("entire_frame_compile_time_s")
    return float(s) if isinstance(s, (int, float)) else None


def _signature(n: Any, groups: frozenset[str]) -> str:
    """A node as two ranks compare it: its device index and (a collective's) process-group
    name left out, as in the snapshots' hashes."""
    op, target, args, kwargs, tensor = n.signature()
    if groups and str(target).startswith(_COLLECTIVE_TARGET):
        def plain(x: Any) -> Any:
            return "<group>" if isinstance(x, str) and x in groups else x
        args = tuple(plain(x) for x in args) if isinstance(args, tuple) else args
        kwargs = tuple((k, plain(v)) for k, v in kwargs) if isinstance(kwargs, tuple) else kwargs
    return normalise_text(repr((op, target, args, kwargs, tensor)))


def _ints_out(x: Any, syms: frozenset[str]) -> Any:
    """``x`` (a node's arguments) with its integers as ``<int>``: constants, and references to
    the graph's symbolic-integer inputs."""
    if isinstance(x, bool):
        return x
    if isinstance(x, int):
        return "<int>"
    if x in _node_refs(syms):  # a reference to a node, ``(("node", name),)`` in a signature
        return "<int>"
    if isinstance(x, (list, tuple)):
        return type(x)(_ints_out(v, syms) for v in x)
    return x


# ops whose integer arguments place a view in a buffer (offsets, starts, indices): where SPMD
# code puts each rank's shard; an integer anywhere else is a value and is compared
_OFFSET_OPS = frozenset(f"aten.{op}" for op in (
    "as_strided", "as_strided_scatter", "as_strided_", "slice.Tensor", "slice_scatter",
    "narrow", "select.int", "select_scatter"))


def _node_refs(syms: frozenset[str]) -> frozenset[Any]:
    return frozenset((("node", n),) for n in syms)


def _symint_inputs(g: Any) -> frozenset[str]:
    return frozenset(n.name for n in g if n.op == "placeholder"
                     and dict(n.signature()[4] or ()).get("dtype") == "symint")


def _constants_only(a: GraphRecord, b: GraphRecord, stage: str) -> bool:
    """Whether two ranks' snapshots ``stage`` of a graph differ only in the integers that place
    views (offsets, starts, indices of ``as_strided``, ``slice``, ``narrow``, ``select``):
    constants, or a constant on one rank and a symbolic input on the other (FSDP's shard
    offsets: ``as_strided(x, [n], [1], 0)`` on rank 0, ``…, 1024)`` or ``…, s5)`` on rank 1 — 0
    is never made dynamic). The same nodes otherwise, ops and tensors (dtypes and shapes): SPMD
    code computes where its shard lies from the rank; a difference of values (``x * 2`` vs
    ``x * 3``), shapes, ops or structure is not this."""
    sa, sb = a.find_stage(stage), b.find_stage(stage)
    ga = a.stage_graph(sa) if sa else None
    gb = b.stage_graph(sb) if sb else None
    if ga is None or gb is None:
        return False
    groups = frozenset(coll.group_names(a) + coll.group_names(b))

    def sigs(g: Any) -> dict[str, str]:
        syms = _symint_inputs(g)
        out = {}
        for n in g:
            if n.name in syms:
                continue
            op, target, args, kwargs, tensor = n.signature()
            if str(target).split(".default")[0] not in _OFFSET_OPS:
                out[n.name] = _signature(n, groups)  # a value (x * 2 vs x * 3) stays compared
            else:
                out[n.name] = normalise_text(repr((op, target, _ints_out(args, syms),
                                                   _ints_out(kwargs, syms), tensor)))
        return out
    fa, fb = sigs(ga), sigs(gb)
    return bool(fa) and fa == fb


def _node_diff(a: GraphRecord, b: GraphRecord, stage: str) -> dict[str, Any]:
    sa, sb = a.find_stage(stage), b.find_stage(stage)
    ga = a.stage_graph(sa) if sa else None
    gb = b.stage_graph(sb) if sb else None
    if ga is None or gb is None:
        return {"added": [], "removed": [], "changed": [], "lines": []}
    groups = frozenset(coll.group_names(a) + coll.group_names(b))
    d = diff_fingerprints({n.name: _signature(n, groups) for n in ga},
                          {n.name: _signature(n, groups) for n in gb})
    na, nb = ga.by_name, gb.by_name
    lines = ([f"- {node_line(na[k])}" for k in d["removed"]]
             + [f"+ {node_line(nb[k])}" for k in d["added"]]
             + [x for k in d["changed"] for x in (f"- {node_line(na[k])}",
                                                  f"+ {node_line(nb[k])}")])
    return {**d, "lines": lines[:MAX_NODE_LINES], "more_lines": max(0, len(lines) - MAX_NODE_LINES)}


def _first_difference(ra: int, ta: Trace, fa: RankPrint,
                      rb: int, tb: Trace, fb: RankPrint,
                      notes: list[dict[str, Any]]) -> tuple[int, dict[str, Any]] | None:
    """Where rank ``rb``'s trace first differs from reference rank ``ra``'s: (position in compile
    order, the divergence without its rank lists), or None when they agree. Differences that
    are no divergence (generated code) are appended to ``notes``."""
    # a rank that never reached Inductor (its script failed in Dynamo) wrote no config: that is
    # no config of its own to differ, not every key differing (how it ended says why)
    if fa["config"] != fb["config"] and not {UNREAD, None} & {fa["config"], fb["config"]}:
        va, vb = _config_values(ta), _config_values(tb)
        keys = sorted(k for k in set(va) | set(vb)
                      if normalise_text(repr(va.get(k))) != normalise_text(repr(vb.get(k))))
        if keys:  # else the files differ in what is not compared (paths, the defaults' record)
            return -1, {"kind": "config", "keys": keys[:20],
                        "values": {k: [va.get(k), vb.get(k)] for k in keys[:20]}}
    ca = {c["id"]: c for c in fa["compiles"]}
    cb = {c["id"]: c for c in fb["compiles"]}
    order = [c["id"] for c in fa["compiles"]]
    order += [c["id"] for c in fb["compiles"] if c["id"] not in ca]
    pending: tuple[int, dict[str, Any]] | None = None  # a graph one side restarted away
    for pos, cid in enumerate(order):
        if (cid in ca) != (cid in cb):
            t, other, r = (tb, ta, rb) if cid in cb else (ta, tb, ra)
            return (pending[0] if pending else pos), {
                "kind": "compile_only_on_some_ranks", "compile_id": cid,
                "on_reference": cid in ca, "reason": why_only_here(t, cid, other), "reason_rank": r}
        x, y = ca[cid], cb[cid]
        # by graph id (compile id, kind and piece: the same on every rank), never by kind alone:
        # a compile split in pieces has several graphs of one kind
        gx = {g["id"]: g for g in x["graphs"]}
        gy = {g["id"]: g for g in y["graphs"]}
        if bool(gx) != bool(gy):  # one side's attempt restarted (a graph break): what follows says why
            pending = pending or (pos, {"kind": "graph", "compile_id": cid, "stage": None,
                                        "detail": "a graph on some ranks only"})
            continue
        for gid in list(gx) + [k for k in gy if k not in gx]:
            a, b = gx.get(gid), gy.get(gid)
            if a is None or b is None:
                kind = (a or b or {}).get("kind", "?")
                return pos, {"kind": "graph", "compile_id": cid, "graph": gid, "graph_kind": kind,
                             "stage": None, "detail": f"a {kind} graph ({gid}) on some ranks only"}
            if a["status"] != b["status"]:
                return pos, {"kind": "status", "compile_id": cid, "graph": a["id"],
                             "statuses": [a["status"], b["status"]]}
            if a.get("unreadable") or b.get("unreadable"):  # not compared (a note says so)
                continue
            if a.get("collectives") != b.get("collectives") and UNREAD not in (
                    a.get("collectives"), b.get("collectives")):
                d = coll.first_difference(ta.graph(a["id"]), tb.graph(b["id"]), (ra, rb))
                if d is not None:
                    return pos, {"kind": "collectives", "compile_id": cid, "graph": a["id"], **d}
            noted = False
            for (file_a, ha), (file_b, hb) in zip(a["stages"], b["stages"]):
                if UNREAD in (ha, hb):  # refused on a side: not compared (a note says so)
                    continue
                if file_a != file_b or ha != hb:
                    name_a = _stage_name(ta.graph(a["id"]), file_a)
                    ga_, gb_ = ta.graph(a["id"]), tb.graph(b["id"])
                    nodes = _node_diff(ga_, gb_, name_a)
                    if file_a == file_b and _constants_only(ga_, gb_, name_a):
                        if not noted:  # rank-dependent constants: no divergence, said once
                            notes.append({"kind": "constants", "compile_id": cid,
                                          "graph": a["id"], "stage": name_a,
                                          "ranks": [ra, rb], "lines": nodes["lines"][:6]})
                            noted = True
                        continue
                    return pos, {"kind": "graph", "compile_id": cid, "graph": a["id"],
                                 "stage": name_a, "nodes": nodes}
            if len(a["stages"]) != len(b["stages"]):
                return pos, {"kind": "graph", "compile_id": cid, "graph": a["id"],
                             "stage": None, "detail": "different numbers of snapshots"}
            code_unread = any(f.startswith("code" + os.sep)
                              for f in (a.get("unread") or []) + (b.get("unread") or []))
            if a["code"] != b["code"] and not code_unread:
                ga, gb = ta.graph(a["id"]), tb.graph(b["id"])
                wa, wb = coll.autotune_winners(ga), coll.autotune_winners(gb)
                notes.append({"kind": "code", "compile_id": cid, "graph": a["id"],
                              "ranks": [ra, rb], "autotune_differs": wa != wb,
                              "autotune": [[x, y] for x, y in zip(wa, wb) if x != y][:5]})
        if x["cache"] != y["cache"]:  # the same graphs, read from a cache on one side only
            notes.append({"kind": "cache", "compile_id": cid, "ranks": [ra, rb],
                          "cache": [x["cache"], y["cache"]]})
    return pending


def _by_code(digests: dict[int, RankDigest]) -> tuple[dict[int, dict[str, float]],
                                                     dict[int, dict[str, float]]]:
    """Per rank, its compile seconds and Inductor's part of them, by the compile as ranks
    compare it (``rank_reasons.compile_keys``: its function and which of its compiles; never
    its id, which each process numbers its own way), and only the compiles every rank that
    made them read from the caches alike (ranks of one node sharing a cache folder: one
    compiles, the others read what it wrote, and are quicker for it, not for being faster)."""
    keys = {r: compile_keys(d.manifest.compiles) for r, d in digests.items()}
    caches: dict[str, set[str]] = {}
    for r, d in digests.items():
        for c in d.print.get("compiles") or []:
            if (k := keys[r].get(str(c.get("id")))) is not None:
                caches.setdefault(k, set()).add(json.dumps(c.get("cache"), sort_keys=True,
                                                           default=str))
    seconds = {r: {keys[r][cid]: sec for cid, sec in d.compile_seconds.items()
                   if cid in keys[r] and len(caches.get(keys[r][cid], ())) <= 1}
               for r, d in digests.items()}
    inductor = {r: {keys[r][cid]: sec for cid, sec in d.inductor_seconds.items()
                    if cid in keys[r]} for r, d in digests.items()}
    return seconds, inductor


def _how_it_ended(dg: RankDigest | None, words: Any) -> dict[str, Any] | None:
    """The error that ended a rank: its script's exception; else a line it wrote last that
    says a collective timed out (the NCCL watchdog aborts the process: no exception recorded);
    else a compile's error — which is not how the process ended, so it never hides the other
    two (a rank whose compile failed earlier, then aborted by the watchdog, hung)."""
    def of(err: Any) -> dict[str, Any] | None:
        return ({"type": err.type, "message": (err.message or "")[:2000]}
                if err is not None and (err.type or err.message) else None)

    said = next((w for w in reversed(words or []) if collective_timeout_text(w)), None)
    m = dg.manifest if dg is not None else None
    return (of(m.script_error if m else None)
            or ({"type": None, "message": said} if said else None)
            or of(m.error if m else None))


def _run_seconds(root: Path, records: list[dict[str, Any]]) -> dict[int, float]:
    """Per rank that finished ``ok``, its seconds from its first collective's return (its
    progress log; before it a rank waits for the others to start, so the first to start
    would look slowest) to its record's end, both of its host's clock; a rank whose log or
    record lacks either, or gives no sane span, is left out."""
    out: dict[int, float] = {}
    for rec in records:
        end = rec.get("finished_at")
        if rec.get("status") != "ok" or type(end) not in (int, float) or not math.isfinite(end):
            continue
        start = first_return(root, int(rec["rank"]))
        if start is not None and 0 < end - start < 1e7:
            out[int(rec["rank"])] = float(end - start)
    return out


def _not_compared(digests: dict[int, RankDigest]) -> list[dict[str, Any]]:
    """The files of the ranks' traces that were not read to be compared: ``{file, ranks,
    reasons}`` per file, ``reasons`` ``[{why, ranks}]`` (one file over the cap on two ranks
    names two sizes); a file refused on every rank is neither the same nor different."""
    by: dict[str, dict[str, list[int]]] = {}
    for r, d in sorted(digests.items()):
        for u in d.print.get("unread") or []:
            by.setdefault(u["file"], {}).setdefault(u["why"], []).append(r)
    return [{"file": f, "ranks": sorted({r for rs in whys.values() for r in rs}),
             "reasons": [{"why": why, "ranks": rs} for why, rs in whys.items()]}
            for f, whys in by.items()]


def analyze_job(root: str | Path) -> dict[str, Any]:
    """Per-rank status, identical-rank groups, the first divergence (None when the traced ranks
    agree and none is missing) and compile-time skew of job directory ``root``."""
    root = Path(root)
    job = joblayout.read_job(root)
    hashes = Hashes()
    digests: dict[int, RankDigest] = {}
    traces: dict[int, Trace] = {}  # opened only for the ranks compared

    def trace(r: int) -> Trace:
        if r not in traces:
            traces[r] = Trace(joblayout.rank_dir(root, r))
        return traces[r]

    ranks = []
    for rec in job["ranks"]:
        r = int(rec["rank"])
        d = joblayout.rank_trace(root, r)
        dg = rank_digest.read_rank(r, d, hashes) if d is not None else None
        row = {"rank": r, "hostname": rec.get("hostname"), "node_rank": rec.get("node_rank"),
               "local_rank": rec.get("local_rank"), "status": rec.get("status"),
               "exit_code": rec.get("exit_code"), "trace": rec.get("trace"),
               "finished_at": rec.get("finished_at")}
        if rec.get("no_record"):  # a trace folder without a record: how it ended is not known
            row["no_record"] = True
        if dg is not None:
            digests[r] = dg
            row.update(status=dg.status if rec.get("status") in (None, "unknown") else row["status"],
                       compiles=len(dg.print["compiles"]), graphs=dg.graphs,
                       compile_time_s=round(sum(dg.compile_seconds.values()), 6),
                       trace_status=dg.status)
        if dg is not None and (why := unlogged.not_logged(dg.manifest)):
            row["collectives_not_logged"] = why  # what its progress log would have told
        row["error"] = _how_it_ended(dg, rec.get("last_words"))
        if row["error"] is None:
            del row["error"]
        # ended before it finished, or failed because a collective timed out: where it was
        if where_it_was(row):
            row["progress"] = rank_progress.rank_progress(root, r, dg.manifest if dg else None)
        ranks.append(row)
    # a file refused on some rank is compared on none (UNREAD in every rank's key), unless the
    # ranks that read it differ in it: then they are not alike
    covered = rank_groups.Covered(rank_groups.refused([dg.print for dg in digests.values()]))
    contested = rank_groups.contested({r: dg.print for r, dg in digests.items()}, covered)
    keep = frozenset(contested)
    groups: dict[str, list[int]] = {}
    for row in ranks:
        dg = digests.get(row["rank"])
        if dg is not None:
            row["hash"], row["compile_hashes"] = rank_groups.rank_keys(dg.print, covered, keep)
            groups.setdefault(row["hash"], []).append(row["rank"])
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), min(kv[1])))
    divergence = None
    notes: list[dict[str, Any]] = []
    pairs = [(ordered[0][1], rs) for _, rs in ordered[1:]]
    # ranks that read a file another rank could not, and differ in it: compared with each other
    # (the reference's group may be the one that could not read it)
    pairs += [(by[0], rs) for by in contested.values() for rs in by[1:]]  # each content apart
    best = None
    for ref_ranks, rs in pairs:
        ra = ref_ranks[0]
        found = _first_difference(ra, trace(ra), digests[ra].print,
                                  rs[0], trace(rs[0]), digests[rs[0]].print, notes)
        if found is not None and (best is None or found[0] < best[0][0]):
            best = (found, ref_ranks, rs)
    if best is not None:
        (_, dv), ref_ranks, rs = best
        divergence = {**dv, "reference_ranks": ref_ranks, "diverging_ranks": rs}
    unread = _not_compared(digests)
    if unread:  # refused on some ranks or all: neither the same nor different
        notes.append({"kind": "not_compared", "files": unread})
    # Dynamo ran (or not) and reached no Inductor graph on a rank that ended ok: the script ran
    # eagerly; a rank that failed or was stopped says so itself (its end), no "ran eagerly"
    no_graph = sorted(r for r, dg in digests.items() if not dg.graphs and dg.status == "ok")
    if no_graph:
        notes.append({"kind": "no_graph", "ranks": no_graph,
                      "compiles": {str(r): len(digests[r].print["compiles"]) for r in no_graph}})
    notes += unlogged.note(ranks)  # also a stopped rank whose progress log told nothing
    missing = [r["rank"] for r in ranks if r["rank"] not in digests] + job["missing_ranks"]
    same_cache, inductor = _by_code(digests)
    # the rank the others waited for, step after step: judged once every rank ended ok
    late = late_rank(root, ranks) if ranks and all(r.get("status") == "ok" for r in ranks) \
        else None
    if divergence is None and (missing or not digests):  # no trace at all never "agrees"
        divergence = {"kind": "no_trace", "ranks": sorted(missing)}
    return {"job": str(root), "world_size": job["world_size"], "launcher": job.get("launcher"),
            "nodes": job["nodes"], "ranks": ranks,
            "groups": [{"hash": h, "ranks": rs} for h, rs in ordered],
            "divergence": divergence, "notes": notes,
            "compile_time": judge_skew(same_cache).to_json(),
            "slow_ranks": [x.to_json() for x in slow_ranks(
                same_cache, inductor, _run_seconds(root, job["ranks"]))],
            "late_rank": late.to_json() if late else None,
            "problems": list(job.get("problems") or []),  # what of the job folder was not read
            "waits": rank_progress.waits(ranks, job["missing_ranks"])}
