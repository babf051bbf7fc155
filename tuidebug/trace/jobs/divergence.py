"""Where two ranks' traces first differ, and the first divergence of a job's ranks alone
(``first_divergence``: the ranks' fingerprints grouped and one rank of each group compared, no
progress log, collective or run time read). ``ranks.analyze_job`` builds on it; the kinds of
divergence are described there."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from tuidebug.trace.queries import collectives as coll
from tuidebug.trace.jobs import job as joblayout
from tuidebug.trace.jobs import rank_digest, rank_groups
from tuidebug.trace.jobs.rank_reasons import why_only_here
from tuidebug.trace.jobs.rank_digest import (UNREAD, Hashes, RankDigest, RankPrint,
                                             normalise_text)
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


def read_digests(root: Path, job: dict[str, Any], hashes: Hashes) -> dict[int, RankDigest]:
    """Each rank's fingerprint (``rank_digest.read_rank``), in the order ``job`` lists the
    ranks; a rank with no trace, or none read, is left out."""
    out: dict[int, RankDigest] = {}
    for rec in job["ranks"]:
        r = int(rec["rank"])
        d = joblayout.rank_trace(root, r)
        dg = rank_digest.read_rank(r, d, hashes) if d is not None else None
        if dg is not None:
            out[r] = dg
    return out


@dataclass(frozen=True)
class Compared:
    """The ranks compared: ``divergence`` (None where the groups agree), the groups of alike
    ranks (``groups``: ``(hash, ranks)``, the largest first; ties: the lowest rank), each
    rank's keys (``keys``: ``rank_groups.rank_keys``) and the differences that are no
    divergence (``notes``)."""
    divergence: dict[str, Any] | None
    groups: list[tuple[str, list[int]]]
    keys: dict[int, Any]
    notes: list[dict[str, Any]]


def compare(root: Path, digests: dict[int, RankDigest]) -> Compared:
    """The ranks of job ``root`` grouped by their fingerprints (``digests``), and the earliest
    point where a group differs from the reference (the largest)."""
    traces: dict[int, Trace] = {}  # opened only for the ranks compared

    def trace(r: int) -> Trace:
        if r not in traces:
            traces[r] = Trace(joblayout.rank_dir(root, r))
        return traces[r]

    # a file refused on some rank is compared on none (UNREAD in every rank's key), unless the
    # ranks that read it differ in it: then they are not alike
    covered = rank_groups.Covered(rank_groups.refused([dg.print for dg in digests.values()]))
    contested = rank_groups.contested({r: dg.print for r, dg in digests.items()}, covered)
    keep = frozenset(contested)
    keys = {r: rank_groups.rank_keys(dg.print, covered, keep) for r, dg in digests.items()}
    groups: dict[str, list[int]] = {}
    for r, (h, _) in keys.items():
        groups.setdefault(h, []).append(r)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), min(kv[1])))
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
    divergence = None
    if best is not None:
        (_, dv), ref_ranks, rs = best
        divergence = {**dv, "reference_ranks": ref_ranks, "diverging_ranks": rs}
    return Compared(divergence, ordered, keys, notes)


def no_trace(divergence: dict[str, Any] | None, missing: list[int],
             digests: dict[int, RankDigest]) -> dict[str, Any] | None:
    """``divergence``, or where the traced ranks agree but a rank has no trace (or none has
    one): ``{"kind": "no_trace", "ranks"}`` (no trace at all never "agrees")."""
    if divergence is None and (missing or not digests):
        return {"kind": "no_trace", "ranks": sorted(missing)}
    return divergence


def first_divergence(root: str | Path) -> dict[str, Any] | None:
    """``analyze_job(root)["divergence"]`` alone: what a command that reads one rank says of
    the job (``advise JOB``), without reading the ranks' progress logs, collectives and run
    times that the rest of the analysis needs."""
    root = Path(root)
    job = joblayout.read_job(root)
    digests = read_digests(root, job, Hashes())
    missing = [int(rec["rank"]) for rec in job["ranks"]
               if int(rec["rank"]) not in digests] + list(job["missing_ranks"])
    return no_trace(compare(root, digests).divergence, missing, digests)
