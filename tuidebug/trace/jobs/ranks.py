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
from pathlib import Path
from typing import Any

from tuidebug.trace.jobs import job as joblayout
from tuidebug.trace.jobs import progress as rank_progress
from tuidebug.trace.jobs.divergence import compare, no_trace, read_digests
from tuidebug.trace.jobs.ends import collective_timeout_text, where_it_was
from tuidebug.trace.jobs.rank_reasons import compile_keys
from tuidebug.trace.jobs.rank_digest import Hashes, RankDigest
from tuidebug.trace.jobs.lateness import first_return, late_rank
from tuidebug.trace.jobs import unlogged
from tuidebug.trace.jobs.skew import judge_skew, slow_ranks


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
    digests = read_digests(root, job, Hashes())
    ranks = []
    for rec in job["ranks"]:
        r = int(rec["rank"])
        dg = digests.get(r)
        row = {"rank": r, "hostname": rec.get("hostname"), "node_rank": rec.get("node_rank"),
               "local_rank": rec.get("local_rank"), "status": rec.get("status"),
               "exit_code": rec.get("exit_code"), "trace": rec.get("trace"),
               "finished_at": rec.get("finished_at")}
        if rec.get("no_record"):  # a trace folder without a record: how it ended is not known
            row["no_record"] = True
        if dg is not None:
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
    compared = compare(root, digests)
    for row in ranks:
        if row["rank"] in compared.keys:
            row["hash"], row["compile_hashes"] = compared.keys[row["rank"]]
    notes = list(compared.notes)
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
    return {"job": str(root), "world_size": job["world_size"], "launcher": job.get("launcher"),
            "nodes": job["nodes"], "ranks": ranks,
            "groups": [{"hash": h, "ranks": rs} for h, rs in compared.groups],
            "divergence": no_trace(compared.divergence, missing, digests), "notes": notes,
            "compile_time": judge_skew(same_cache).to_json(),
            "slow_ranks": [x.to_json() for x in slow_ranks(
                same_cache, inductor, _run_seconds(root, job["ranks"]))],
            "late_rank": late.to_json() if late else None,
            "problems": list(job.get("problems") or []),  # what of the job folder was not read
            "waits": rank_progress.waits(ranks, job["missing_ranks"])}
