"""Where the time went in two profiled traces (``trace --profile``): per-call totals, and time
per kernel, source line and module side by side with its change. No torch.

Kernels are matched by name without their number (``normalize_kernel_name``) and summed over
their calls (a recompile renumbers kernels and handles); lines by file name and line number (two
traces of one script from two checkouts name it by two paths; the full path where one trace has
two files of that name); modules by path; each within its phase (a backward row's key ends in
`` (bwd)``). Rows are sorted by the size of their change.
"""

from __future__ import annotations

from typing import Any

from tuidebug.trace.diff.common import pair
from tuidebug.trace.diff.kernels import normalize_kernel_name
from tuidebug.trace.queries.graph_times import changed, too_few, too_few_text
from tuidebug.trace.queries.profile import ProfileView, Row, profile_view
from tuidebug.trace.format.reader import Trace

TOTALS = ("compiled_wall_s", "eager_wall_s", "generated_s", "extern_s", "overhead_s")
MAX_ROWS = 50


def _phased(key: str, r: Row) -> str:
    """A row's key in the diff: a backward row's is marked, so it is matched with the other
    trace's backward row of the same kernel, line or module, not with the forward's."""
    return key if r.phase == "fwd" else f"{key} (bwd)"


def _sums(rows: list[Row], key: Any) -> dict[str, tuple[float, Row]]:
    out: dict[str, tuple[float, Row]] = {}
    for r in rows:
        k = key(r)
        t, first = out.get(k, (0.0, r))
        out[k] = (t + (r.compiled_s or 0.0), first)
    return out


def _rows(a: ProfileView | None, b: ProfileView | None, table: str,
          key: Any) -> list[dict[str, Any]]:
    sa = _sums(a.table(table) if a else [], key)
    sb = _sums(b.table(table) if b else [], key)
    out = []
    for k in list(sa) + [x for x in sb if x not in sa]:
        ta, ra = sa.get(k, (None, None))
        tb, rb = sb.get(k, (None, None))
        row = ra or rb
        entry: dict[str, Any] = {"key": k, **pair(ta, tb),
                                 "delta": (tb or 0.0) - (ta or 0.0),
                                 "phase": row.phase if row is not None else "fwd"}
        if table == "lines" and row is not None and row.file:
            entry.update(file=row.file, line=row.line, code=row.code)
        if table == "kernels" and row is not None:
            entry["kind"] = row.kind
        out.append(entry)
    out.sort(key=lambda e: (-abs(e["delta"]), e["key"]))
    return out[:MAX_ROWS]


def _short(r: Row) -> str:
    return f"{str(r.file).replace(chr(92), '/').rsplit('/', 1)[-1]}:{r.line}"


def _line_key(a: ProfileView | None, b: ProfileView | None) -> Any:
    """A source line's key for matching A's with B's: its file name and line, or its full
    path and line where one trace has two files of that name."""
    ambiguous: set[str] = set()
    for v in (a, b):
        files: dict[str, str] = {}
        for r in v.lines if v else []:
            if r.file and files.setdefault(_short(r), r.file) != r.file:
                ambiguous.add(_short(r))
    return lambda r: r.key if not r.file or _short(r) in ambiguous else _short(r)


def profile_diff(a: Trace, b: Trace) -> dict[str, Any] | None:
    """``{"totals": {NAME: {"a","b"}}, "totals_changed": {"compiled_wall_s", "eager_wall_s":
    True (spreads apart), False (they overlap: not told apart), None (a spread not recorded, or
    of too few runs)}, "totals_few_runs": {the same keys: the fewest runs where below
    ``graph_times.MIN_RUNS``, else None}, "kernels", "lines", "modules": [{"key", "a", "b",
    "delta", …}]}``; None when neither trace was profiled."""
    va, vb = profile_view(a), profile_view(b)
    if va is None and vb is None:
        return None
    verdict = pair(va.calls[0].verdict_json() if va and va.calls else None,
                   vb.calls[0].verdict_json() if vb and vb.calls else None)
    return {
        "profiled": pair(va is not None, vb is not None),
        "verdict": verdict, "calls_same": calls_same(verdict["a"], verdict["b"]),
        "totals": {k: pair(va.totals.get(k) if va else None, vb.totals.get(k) if vb else None)
                   for k in TOTALS},
        # the graphs' own times, A against B: a change only where their spreads are apart
        "totals_changed": {f"{side}_wall_s": changed(
            va.totals.get(f"{side}_spread") if va else None,
            vb.totals.get(f"{side}_spread") if vb else None) for side in ("compiled", "eager")},
        "totals_few_runs": {f"{side}_wall_s": too_few(
            va.totals.get(f"{side}_spread") if va else None,
            vb.totals.get(f"{side}_spread") if vb else None) for side in ("compiled", "eager")},
        "kernels": _rows(va, vb, "kernels", lambda r: _phased(normalize_kernel_name(r.kernel),
                                                                r)),
        "lines": _rows(va, vb, "lines", lambda r, line=_line_key(va, vb): _phased(line(r), r)),
        "modules": _rows(va, vb, "modules", lambda r: _phased(r.key, r)),
    }


def machine(t: Trace) -> dict[str, Any] | None:
    """What ``--profile`` recorded of the machine as the script started: ``threads`` (torch's
    intra-op threads it set before anything compiled), ``user_threads``, ``load1``."""
    m = t.profile.get("machine")
    return m if isinstance(m, dict) else None


def threads_line(machines: dict[str, Any] | None, cpp_changed: int) -> str | None:
    """Two profiled traces compiled for other thread counts (``machines``: ``machine`` of each,
    ``{"a", "b"}``): Inductor's C++ kernels are generated for the count (``#pragma omp
    parallel``), so identical code traced twice differs there. None when the counts agree or
    are not known, or when no C++ kernel's code changed (``cpp_changed``: Triton and other
    device kernels do not depend on torch's CPU threads)."""
    ma, mb = (machines or {}).get("a"), (machines or {}).get("b")
    ta, tb = ((m or {}).get("threads") for m in (ma, mb))
    if not isinstance(ta, int) or not isinstance(tb, int) or ta == tb or cpp_changed <= 0:
        return None
    load = [(m or {}).get("load1") for m in (ma, mb)]
    said = (f" (load {load[0]} → {load[1]})"
            if all(isinstance(x, (int, float)) for x in load) else "")
    return (f"threads: A compiled and timed with {ta}, B with {tb} — --profile sets torch's "
            f"threads to the cores free when the script starts{said}, and Inductor generates "
            f"its C++ kernels for that count (#pragma omp parallel): the {cpp_changed} changed "
            "C++ kernel(s) may differ for that alone, not for a change of yours")


def calls_same(va: dict[str, Any] | None, vb: dict[str, Any] | None) -> bool | None:
    """Whether two traces' whole calls are the same as far as can be told: each trace timed
    compiled against eager side by side (eager is the control for the machine each ran on),
    so their eager/compiled ratios compare where the raw times would not. But the two traces
    were timed in two processes (other threads, another moment of a busy machine), which the
    interval of each one's median does not cover: a change only when the rounds' own ratios
    are apart too (p10–p90 of one side's rounds clear of the other's), as for kernels' run times
    timed in two processes. Overlapping intervals, or overlapping rounds: no change. None when
    either trace has no whole call."""
    if not va or not vb:
        return None
    if va["ratio_low"] <= vb["ratio_high"] and vb["ratio_low"] <= va["ratio_high"]:
        return True
    ra, rb = (va.get("ratio_p10"), va.get("ratio_p90")), (vb.get("ratio_p10"), vb.get("ratio_p90"))
    if None in ra or None in rb:
        return False
    return bool(ra[0] <= rb[1] and rb[0] <= ra[1])


def _rounds(v: dict[str, Any]) -> str:
    """``; rounds 0.61–0.98``: the p10–p90 of a trace's per-round ratios, when recorded."""
    lo, hi = v.get("ratio_p10"), v.get("ratio_p90")
    return f"; rounds {lo:.2f}–{hi:.2f}" if isinstance(lo, float) and isinstance(hi, float) \
        else ""


def profile_findings(p: dict[str, Any] | None, fmt: Any, top: int = 3) -> list[str]:
    """One-line findings: the compiled call's change, then the lines that changed most
    (``fmt``: seconds as text)."""
    if p is None:
        return []
    if not all(p["profiled"].values()):
        which = "A" if p["profiled"]["a"] else "B"
        return [f"profile: only trace {which} was profiled (trace --profile)"]
    va, vb = (p.get("verdict") or {}).get("a"), (p.get("verdict") or {}).get("b")
    same = p.get("calls_same")
    out: list[str] = []  # (threads_line: with the kernels, in finding_lines)
    if va and vb:
        out += [f"compiled vs eager (eager/compiled, each trace interleaved): "
               f"{va['ratio']:.2f} ({va['ratio_low']:.2f}–{va['ratio_high']:.2f}{_rounds(va)}) → "
               f"{vb['ratio']:.2f} ({vb['ratio_low']:.2f}–{vb['ratio_high']:.2f}{_rounds(vb)})"
               + (": no change (timed in two processes: the rounds' ratios overlap)" if same else
                  f": B's compiled call is {'faster' if vb['ratio'] > va['ratio'] else 'slower'}"
                  " relative to eager")]
        if same:
            return out  # per-line differences of a call that did not change are noise
    else:
        wall = p["totals"]["compiled_wall_s"]
        noise = (p.get("totals_changed") or {}).get("compiled_wall_s") is False
        few = (p.get("totals_few_runs") or {}).get("compiled_wall_s")
        out += [f"profiled compiled call (timed in two processes, not side by side): "
               f"{fmt(wall['a'])} → {fmt(wall['b'])}"
                + (": not told apart from the noise (their runs' p10–p90 overlap)" if noise else
                   f": {too_few_text(few)}" if few is not None else "")]
        if noise or few is not None:
            return out  # per-line differences, with no spread, of a call not told apart
    for e in p["lines"][:top]:
        if e["delta"] and e.get("file"):
            name = str(e["file"]).replace("\\", "/").rsplit("/", 1)[-1]
            sign = "+" if e["delta"] > 0 else "−"
            bwd = " (backward)" if e.get("phase") == "bwd" else ""
            out.append(f"line {name}:{e.get('line')}{bwd}: {sign}{fmt(abs(e['delta']))} "
                       f"({fmt(e['a'])} → {fmt(e['b'])})")
    return out
