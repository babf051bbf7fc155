"""Dynamo compiles (times, Inductor counters, cache) and runtime checks of two traces."""

from __future__ import annotations

from typing import Any

from tuidebug.trace.diff.common import pair
from tuidebug.trace.format.reader import Trace

_TIME_KEYS = (("compile_time_s", "entire_frame_compile_time_s"),
              ("inductor_time_s", "inductor_compile_time_s"),
              ("code_gen_time_s", "code_gen_time_s"))


def counter_deltas(t: Trace) -> dict[str, dict[str, int]]:
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


def compile_diffs(a: Trace, b: Trace) -> list[dict[str, Any]]:
    ca, cb = a.compiles, b.compiles
    da, db = counter_deltas(a), counter_deltas(b)
    out = []
    for cid in list(ca) + [x for x in cb if x not in ca]:
        x, y = ca.get(cid) or {}, cb.get(cid) or {}
        mx, my = x.get("metrics") or {}, y.get("metrics") or {}
        entry: dict[str, Any] = {"id": cid, "in": "both" if x and y else ("a" if x else "b")}
        for key, metric in _TIME_KEYS:
            entry[key] = pair(mx.get(metric), my.get(metric))
        kx, ky = da.get(cid) or {}, db.get(cid) or {}
        entry["counters"] = {n: pair(kx.get(n, 0), ky.get(n, 0))
                             for n in sorted(set(kx) | set(ky)) if kx.get(n, 0) != ky.get(n, 0)}
        entry["cache"] = {n: pair(kx.get(n, 0), ky.get(n, 0))
                          for n in ("fxgraph_cache_hit", "fxgraph_cache_miss", "fxgraph_cache_bypass")}
        out.append(entry)
    return out


def runtime_diffs(a: Trace, b: Trace) -> list[dict[str, Any]]:
    ra = (a.runtime.get("checks") or {}) if isinstance(a.runtime, dict) else {}
    rb = (b.runtime.get("checks") or {}) if isinstance(b.runtime, dict) else {}
    out = []
    for cid in list(ra) + [x for x in rb if x not in ra]:
        x, y = ra.get(cid) or {}, rb.get(cid) or {}
        out.append({"compile_id": cid,
                    **{k: pair(x.get(k), y.get(k))
                       for k in ("first_call_s", "eager_s", "close", "max_abs", "max_rel")}})
    return out
