"""Cross-rank analysis of a job directory: where the ranks of a distributed job first diverge.

No torch. Each rank's trace is reduced to a fingerprint — per Dynamo compile id (in the order the
rank compiled them): its graphs, the content hash of every graph snapshot (normalised for what
legitimately differs per rank: file paths), the hash of the generated code, cache hits — and the
ranks are grouped by it, so identical ranks are compared once. The largest group (ties: the one
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

Compile-time skew per compile (slowest vs fastest rank) is reported alongside.
"""

from __future__ import annotations

import hashlib
import json
import re
import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from tuidebug.trace.queries import collectives as coll
from tuidebug.trace.jobs import job as joblayout
from tuidebug.trace.jobs import progress as rank_progress
from tuidebug.trace.format.graph import node_line
from tuidebug.trace.format.layout import diff_fingerprints
from tuidebug.trace.format.reader import GraphRecord, Trace
from tuidebug.trace.queries.recompiles import reasons_of
from tuidebug.trace.queries.summary import cache_counts
from tuidebug.trace.format import safefile

# An absolute path (POSIX) inside code or a snapshot: the part that differs between ranks and
# nodes (checkouts, cache and temporary folders); only its last component is kept.
_PATH_RE = re.compile(r"(?:/[^\s'\"/:,()\[\]]+)+/([^\s'\"/:,()\[\]]+)")
# A rank's own accelerator: rank r of a node computes on cuda:<local rank>, so every snapshot's
# tensor devices and the wrapper's device(type='cuda', index=r), set_device(r) and
# get_raw_stream(r) name it; the index is not compared (the device type is).
_DEVICE_RE = re.compile(r"\b(cuda|xpu|hpu|mtia|npu|mps):\d+\b")
_DEVICE_INDEX_RE = re.compile(r"(device\(type='\w+', index=)\d+(\))")
_DEVICE_CALL_RE = re.compile(r"\b((?:set_device|get_raw_stream|device_guard|DeviceGuard|"
                             r"_DeviceGuard)\()\d+(\))")
MAX_NODE_LINES = 12
_HARNESS = re.compile(r"\n(?:def get_args\(|def benchmark_compiled_module\(|if __name__ == )")
_WHERE_RE = re.compile(r"Graph break in user code at (.+?):(\d+)")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def normalise_text(text: str) -> str:
    """``text`` with every absolute path reduced to its file name and every accelerator's
    index left out (``cuda:1`` -> ``cuda:N``): what differs between ranks that agree."""
    text = _DEVICE_RE.sub(r"\1:N", _PATH_RE.sub(r"\1", text))
    return _DEVICE_CALL_RE.sub(r"\1N\2", _DEVICE_INDEX_RE.sub(r"\1N\2", text))


def _safe_rel(rel: str) -> bool:
    """A relative path from a trace that stays inside it, lexically (no ``..``, not absolute)."""
    p = PurePosixPath(rel)
    return bool(rel) and not p.is_absolute() and ".." not in p.parts and "\\" not in rel


def _no_links(path: Path, root: Path) -> bool:
    """No component of ``path`` below ``root`` is a symbolic link."""
    while path != root and path != path.parent:
        if path.is_symlink():
            return False
        path = path.parent
    return path == root


# the normalised hash per raw content: identical ranks normalise each distinct file once
# (and per hard-linked file: device, inode, size, mtime, name, groups)
_normalised: dict[Any, str] = {}


_COLLECTIVE_TARGET = ("_c10d_functional", "c10d", "_c10d_functional_autograd")


def _without_groups(text: str, groups: frozenset[str]) -> str:
    """A snapshot with the process-group names its collective nodes pass (``"0"`` in
    ``all_reduce(y, "sum", "0")``) as ``<group>``: ranks of two tensor-parallel groups issue the
    same graph on their own groups (which groups, and who is in them, collectives.json
    compares, per pair of ranks)."""
    try:
        data = safefile.loads(text)
    except ValueError:
        return text
    nodes = data.get("nodes") if isinstance(data, dict) else None
    for n in nodes if isinstance(nodes, list) else []:
        if isinstance(n, dict) and str(n.get("target") or "").startswith(_COLLECTIVE_TARGET):
            for key in ("args", "kwargs"):
                v = n.get(key)
                if isinstance(v, list):
                    n[key] = ["<group>" if isinstance(x, str) and x in groups else x for x in v]
                elif isinstance(v, dict):
                    n[key] = {k: "<group>" if isinstance(x, str) and x in groups else x
                              for k, x in v.items()}
    return json.dumps(data, sort_keys=True)


def _file_hash(path: Path, groups: frozenset[str] = frozenset()) -> str | None:
    """The normalised content hash of a file of a rank's trace (``groups``: the process-group
    names of the graph's collectives, left out of a snapshot's collective nodes)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    # one file stored once for many ranks (hard links: the launcher's dedup) is read once
    same = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, path.name, groups)
    if st.st_nlink > 1 and stat.S_ISREG(st.st_mode) and same in _normalised:
        return _normalised[same]
    try:  # a FIFO never blocks, a huge (sparse) file is not read
        raw, _ = safefile.read_bytes(path, safefile.MAX_JSON_BYTES, no_link=True)
    except safefile.Refused as e:
        return f"not read: {e}"
    except OSError:
        return None
    key = hashlib.sha256(path.name.encode() + b"\0" + "\0".join(sorted(groups)).encode()
                         + b"\0" + raw).digest()
    if key not in _normalised:
        text = raw.decode("utf-8", errors="replace")
        if path.name == "wrapper.py":  # its benchmark harness uses this rank's size hints
            text = _HARNESS.split(text, 1)[0]
        if groups:
            text = _without_groups(text, groups)
        _normalised[key] = _digest(normalise_text(text).encode())
    if st.st_nlink > 1 and stat.S_ISREG(st.st_mode):
        _normalised[same] = _normalised[key]
    return _normalised[key]


def _graph_fingerprint(g: GraphRecord) -> dict[str, Any]:
    fp: dict[str, Any] = {"id": g.id, "kind": g.kind, "status": g.status, "stages": [],
                          "code": None, "collectives": None}
    if not _safe_rel(g.id) or not _no_links(g.dir, g.trace.root):
        fp["unreadable"] = True  # never read outside the rank's trace
        return fp
    fp["collectives"] = coll.sequence_hash(g)
    groups = frozenset(coll.group_names(g)) if fp["collectives"] else frozenset()
    # the snapshot files in order (stages/NNN-<name>.json), listed rather than read from
    # meta.json: that file holds this rank's phase times, and parsing it for every rank of a
    # large job was half the time; the stage's name is looked up for the two ranks compared
    stages = g.dir / "stages"
    if stages.is_dir() and not stages.is_symlink():
        for name in sorted(n for n in os.listdir(stages) if n.endswith(".json")):
            fp["stages"].append([name, _file_hash(stages / name, groups)])
    code = g.dir / "code"
    if code.is_dir() and not code.is_symlink():
        parts = sorted(p for p in code.iterdir() if p.suffix != ".json")
        fp["code"] = _digest("".join(f"{p.name}:{_file_hash(p)};" for p in parts).encode())
    return fp


def _stage_name(g: GraphRecord | None, file: str) -> str:
    """The name of the stage whose snapshot is ``stages/<file>`` (its meta.json says)."""
    for st in g.snapshots() if g is not None else []:
        if st.file and PurePosixPath(st.file).name == file:
            return st.name
    return file.removesuffix(".json").split("-", 1)[-1]


def _config_values(t: Trace) -> dict[str, Any]:
    values = t.config.get("values")
    return values if isinstance(values, dict) else {}


def rank_fingerprint(t: Trace) -> dict[str, Any]:
    """What is compared between ranks, for one rank's trace."""
    by_compile: dict[str, list[GraphRecord]] = {}
    for g in t.graphs:
        by_compile.setdefault(g.compile_id, []).append(g)
    compiles = []
    for cid, c in t.compiles.items():
        compiles.append({"id": cid, "cache": cache_counts(c),
                         "graphs": [_graph_fingerprint(g) for g in by_compile.get(cid, [])]})
    config = _file_hash(t.root / "config.json")  # its values are compared only when it differs
    fp = {"config": config, "compiles": compiles}
    fp["hash"] = _digest(json.dumps(fp, sort_keys=True).encode())
    return fp


def _compile_seconds(c: dict[str, Any]) -> float | None:
    s = (c.get("metrics") or {}).get("entire_frame_compile_time_s")
    return float(s) if isinstance(s, (int, float)) else None


def _short_reason(text: str) -> dict[str, Any]:
    """A recorded break/restart reason: its first lines (without Dynamo's tracebacks) and the
    user line it names (``Graph break in user code at FILE:LINE``)."""
    head = text.split("User code traceback:")[0].split("Traceback (most recent call last)")[0]
    lines = [ln.rstrip() for ln in head.strip().splitlines() if ln.strip()]
    m = _WHERE_RE.search(text)
    said = [ln.strip() for ln in lines if not ln.startswith(("Graph break in user code",
                                                              "Graph Break Reason"))]
    return {"text": "\n".join(lines[:6]), "summary": (said or lines or [""])[0][:300],
            "where": f"{m.group(1)}:{m.group(2)}" if m else None}


def _breaks(t: Trace) -> dict[str, list[str]]:
    return {cid: [str(x) for x in c.get("dynamo_graph_break_reason") or []]
            for cid, c in t.compiles.items()}


def _reasons(t: Trace, cid: str, other: Trace) -> dict[str, Any]:
    """Why compile ``cid`` happened on rank trace ``t`` and not on ``other``: its recompile
    reasons, its restart reasons, the graph breaks of earlier compiles that ``other`` did not
    have (a break ends one graph and starts another compile) and its own graph breaks (a
    recompile that breaks where the first compile did not); where the function is."""
    compiles = t.compiles
    c = compiles.get(cid) or {}
    ids = list(compiles)
    m = c.get("metrics") or next(  # a restarted compile: its last attempt holds the metrics
        ((compiles[p].get("metrics") or {}) for p in reversed(ids) if p.startswith(cid + "_")),
        {})
    before = ids[:ids.index(cid)] if cid in ids else []
    mine, theirs = _breaks(t), _breaks(other)
    breaks = [_short_reason(b) for p in before for b in mine.get(p, [])
              if b not in theirs.get(p, [])]
    # the compile's own breaks (and its restarted attempts'): only this rank compiled it
    breaks += [_short_reason(b) for p in ids if p == cid or p.startswith(cid + "_")
               for b in mine.get(p, [])]
    restarts = [_short_reason(str(r)) for r in m.get("restart_reasons") or []]
    return {"recompile_reasons": reasons_of(c),
            "graph_break_reasons": breaks, "restart_reasons": restarts,
            "function": m.get("co_name"), "file": m.get("co_filename"),
            "line": m.get("co_firstlineno")}


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


def _first_difference(ra: int, ta: Trace, fa: dict[str, Any],
                      rb: int, tb: Trace, fb: dict[str, Any],
                      notes: list[dict[str, Any]]) -> tuple[int, dict[str, Any]] | None:
    """Where rank ``rb``'s trace first differs from reference rank ``ra``'s: (position in compile
    order, the divergence without its rank lists), or None when they agree. Differences that
    are no divergence (generated code) are appended to ``notes``."""
    if fa["config"] != fb["config"]:
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
                "on_reference": cid in ca, "reason": _reasons(t, cid, other), "reason_rank": r}
        x, y = ca[cid], cb[cid]
        gx = {g["kind"]: g for g in x["graphs"]}
        gy = {g["kind"]: g for g in y["graphs"]}
        if bool(gx) != bool(gy):  # one side's attempt restarted (a graph break): what follows says why
            pending = pending or (pos, {"kind": "graph", "compile_id": cid, "stage": None,
                                        "detail": "a graph on some ranks only"})
            continue
        for kind in list(gx) + [k for k in gy if k not in gx]:
            a, b = gx.get(kind), gy.get(kind)
            if a is None or b is None:
                return pos, {"kind": "graph", "compile_id": cid, "graph_kind": kind,
                             "stage": None, "detail": f"a {kind} graph on some ranks only"}
            if a["status"] != b["status"]:
                return pos, {"kind": "status", "compile_id": cid, "graph": a["id"],
                             "statuses": [a["status"], b["status"]]}
            if a.get("collectives") != b.get("collectives"):
                d = coll.first_difference(ta.graph(a["id"]), tb.graph(b["id"]), (ra, rb))
                if d is not None:
                    return pos, {"kind": "collectives", "compile_id": cid, "graph": a["id"], **d}
            noted = False
            for (file_a, ha), (file_b, hb) in zip(a["stages"], b["stages"]):
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
            if a["code"] != b["code"]:
                ga, gb = ta.graph(a["id"]), tb.graph(b["id"])
                wa, wb = coll.autotune_winners(ga), coll.autotune_winners(gb)
                notes.append({"kind": "code", "compile_id": cid, "graph": a["id"],
                              "ranks": [ra, rb], "autotune_differs": wa != wb,
                              "autotune": [[x, y] for x, y in zip(wa, wb) if x != y][:5]})
        if x["cache"] != y["cache"]:  # the same graphs, read from a cache on one side only
            notes.append({"kind": "cache", "compile_id": cid, "ranks": [ra, rb],
                          "cache": [x["cache"], y["cache"]]})
    return pending


def _skew(traces: dict[int, Trace]) -> list[dict[str, Any]]:
    times: dict[str, dict[int, float]] = {}
    for r, t in traces.items():
        for cid, c in t.compiles.items():
            s = _compile_seconds(c)
            if s is not None:
                times.setdefault(cid, {})[r] = s
    out = []
    for cid, per in times.items():
        if len(per) < 2:
            continue
        slow = max(per, key=lambda r: per[r])
        fast = min(per, key=lambda r: per[r])
        out.append({"compile_id": cid, "slowest": {"rank": slow, "s": per[slow]},
                    "fastest": {"rank": fast, "s": per[fast]},
                    "spread_s": round(per[slow] - per[fast], 6)})
    return out


def _open(root: Path, rec: dict[str, Any]) -> Trace | None:
    d = joblayout.rank_trace(root, int(rec["rank"]))
    return Trace(d) if d is not None else None


def analyze_job(root: str | Path) -> dict[str, Any]:
    """Per-rank status, identical-rank groups, the first divergence (None when the traced ranks
    agree and none is missing) and compile-time skew of job directory ``root``."""
    root = Path(root)
    job = joblayout.read_job(root)
    traces: dict[int, Trace] = {}
    fps: dict[int, dict[str, Any]] = {}
    ranks = []
    for rec in job["ranks"]:
        r = int(rec["rank"])
        t = _open(root, rec)
        row = {"rank": r, "hostname": rec.get("hostname"), "node_rank": rec.get("node_rank"),
               "local_rank": rec.get("local_rank"), "status": rec.get("status"),
               "exit_code": rec.get("exit_code"), "trace": rec.get("trace")}
        if t is not None:
            traces[r] = t
            fps[r] = rank_fingerprint(t)
            row.update(status=t.status if rec.get("status") in (None, "unknown") else row["status"],
                       compiles=len(t.compiles), graphs=len(t.graphs), hash=fps[r]["hash"],
                       compile_hashes={c["id"]: _digest(json.dumps(c, sort_keys=True).encode())
                                       for c in fps[r]["compiles"]},
                       compile_time_s=round(sum(_compile_seconds(c) or 0.0
                                                for c in t.compiles.values()), 6))
        if row["status"] not in ("ok", "failed", "script_failed"):  # ended before it finished
            row["progress"] = rank_progress.rank_progress(root, r, t.manifest if t else None)
        ranks.append(row)
    groups: dict[str, list[int]] = {}
    for r, fp in fps.items():
        groups.setdefault(fp["hash"], []).append(r)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), min(kv[1])))
    divergence = None
    notes: list[dict[str, Any]] = []
    if len(ordered) > 1:
        ref_hash, ref_ranks = ordered[0]
        ra = ref_ranks[0]
        best = None
        for h, rs in ordered[1:]:
            found = _first_difference(ra, traces[ra], fps[ra], rs[0], traces[rs[0]], fps[rs[0]],
                                      notes)
            if found is None:  # equal fingerprints hash equal; kept for safety
                continue
            if best is None or found[0] < best[0][0]:
                best = (found, rs)
        if best is not None:
            (_, d), rs = best
            divergence = {**d, "reference_ranks": ref_ranks, "diverging_ranks": rs}
    no_graph = sorted(r for r, t in traces.items() if not t.graphs)
    if no_graph:  # Dynamo ran (or not) and reached no Inductor graph: the script ran eagerly
        notes.append({"kind": "no_graph", "ranks": no_graph,
                      "compiles": {str(r): len(traces[r].compiles) for r in no_graph}})
    missing = [r["rank"] for r in ranks if r["rank"] not in traces] + job["missing_ranks"]
    if divergence is None and (missing or not traces):  # no trace at all never "agrees"
        divergence = {"kind": "no_trace", "ranks": sorted(missing)}
    return {"job": str(root), "world_size": job["world_size"], "launcher": job.get("launcher"),
            "nodes": job["nodes"], "ranks": ranks,
            "groups": [{"hash": h, "ranks": rs} for h, rs in ordered],
            "divergence": divergence, "notes": notes, "compile_skew": _skew(traces),
            "problems": list(job.get("problems") or []),  # what of the job folder was not read
            "waits": rank_progress.waits(ranks)}
