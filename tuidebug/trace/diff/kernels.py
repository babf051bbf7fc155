"""Generated kernels and the wrapper of two graphs: matched by name without the numeric suffix,
code compared with the kernel's own name normalised; wrapper markers and calls."""

from __future__ import annotations

import collections
import re
from typing import Any, Iterable

from tuidebug.trace.format import kernels as kernel_text
from tuidebug.trace.diff.common import kept, pair, same_file
from tuidebug.trace.format.kernel_entry import KernelEntry
from tuidebug.trace.format import schema
from tuidebug.trace.format.reader import GraphRecord

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


def _kernel_code(g: GraphRecord, k: KernelEntry) -> str:
    if not k.file:
        return ""
    text = g.code(k.file) or ""
    return _normalize_code(text, k.name)


def _sources(g: GraphRecord, index: list[KernelEntry]) -> dict[str, str]:
    """The code of each generated kernel of ``index`` by name, normalised: kept with ``g``
    where ``index`` is its own."""
    def make() -> dict[str, str]:
        return {k.name: _kernel_code(g, k) for k in index if not k.extern}
    return kept(g, "kernel_code", make) if index is g.kernels else make()


def _normalize_code(text: str, name: str) -> str:
    if name:
        text = re.sub(rf"\b{re.escape(name)}\b", "KERNEL", text)
    return _TMP_PATH.sub("<tmp>", text)


def kernel_diffs(ga: GraphRecord | None, gb: GraphRecord | None, index_a: list[KernelEntry],
                 index_b: list[KernelEntry], *, code: bool, context: int,
                 max_diff_lines: int) -> list[dict[str, Any]]:
    """The generated kernels of ``ga`` and ``gb`` (their kernel indexes ``index_a``,
    ``index_b``) matched and compared."""
    ka = [k for k in index_a if not k.extern]
    kb = [k for k in index_b if not k.extern]
    src_a = _sources(ga, index_a) if ga else {}
    # a kernel of the same name and file, the file held in the same bytes by both: read once
    file_a = {k.name: k.file for k in ka}
    src_b = {k.name: src_a[k.name] if k.file and file_a.get(k.name) == k.file
             and same_file(ga, gb, k.file) else _kernel_code(gb, k) for k in kb} if gb else {}
    groups_a: dict[str, list[KernelEntry]] = collections.defaultdict(list)
    groups_b: dict[str, list[KernelEntry]] = collections.defaultdict(list)
    for k in ka:
        groups_a[normalize_kernel_name(k.name)].append(k)
    for k in kb:
        groups_b[normalize_kernel_name(k.name)].append(k)
    out: list[dict[str, Any]] = []
    removed: list[dict[str, Any]] = []
    added: list[dict[str, Any]] = []
    for base in list(groups_a) + [x for x in groups_b if x not in groups_a]:
        la, lb = list(groups_a.get(base, [])), list(groups_b.get(base, []))
        # identical code first, then in order
        for x in list(la):
            y = next((y for y in lb if src_b.get(y.name) == src_a.get(x.name)), None)
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
        y = next((y for y in added if src_b.get(y.name) == src_a.get(x.name)
                  and src_a.get(x.name)), None)
        if y is not None:
            removed.remove(x)
            added.remove(y)
            out.append(_kernel_entry("renamed", x, y, src_a, src_b, code, context, max_diff_lines))
    out += [_kernel_entry("removed", x, None, src_a, src_b, code, context, max_diff_lines) for x in removed]
    out += [_kernel_entry("added", None, y, src_a, src_b, code, context, max_diff_lines) for y in added]
    order = {"changed": 0, "removed": 1, "added": 2, "renamed": 3, "unchanged": 4}
    out.sort(key=lambda e: order[e["status"]])
    times_a, times_b = (ga.timings if ga else {}), (gb.timings if gb else {})
    runs = (ga.timed_runs if ga else None, gb.timed_runs if gb else None)
    for e in out:
        e.update(_kernel_times(times_a.get(e["a"] or ""), times_b.get(e["b"] or ""), runs))
    return out


def _timed(t: dict[str, Any], runs: int | None) -> int | None:
    """How many calls of a kernel were timed: its calls per run times the graph's runs."""
    calls = t.get("calls")
    ok = all(isinstance(v, int) and not isinstance(v, bool) for v in (calls, runs))
    return calls * runs if ok else None  # type: ignore[operator]


def _kernel_times(x: dict[str, Any] | None, y: dict[str, Any] | None,
                  runs: tuple[int | None, int | None] = (None, None)) -> dict[str, Any]:
    """One kernel's compile and run times in A and B (``code/timings.json``), how many of its
    calls were timed (``timed``), and B/A of the run time."""
    x, y = x or {}, y or {}
    run = pair(x.get("run_s"), y.get("run_s"))
    return {"compile_s": pair(x.get("compile_s"), y.get("compile_s")),
            "compiled": pair(x.get("compile"), y.get("compile")),
            "run_s": run, "run_min_s": pair(x.get("run_min_s"), y.get("run_min_s")),
            "calls": pair(x.get("calls"), y.get("calls")),
            "timed": pair(_timed(x, runs[0]) if x else None, _timed(y, runs[1]) if y else None),
            "run_ratio": time_ratio(run)}


def time_ratio(p: dict[str, Any]) -> float | None:
    a, b = p["a"], p["b"]
    ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
    return float(f"{b / a:.4g}") if ok and a > 0 else None


def _kernel_entry(status: str, x: KernelEntry | None, y: KernelEntry | None,
                  src_a: dict[str, str], src_b: dict[str, str], code: bool, context: int,
                  max_diff_lines: int) -> dict[str, Any]:
    either = x or y
    e: dict[str, Any] = {
        "status": status, "a": x.name if x else None, "b": y.name if y else None,
        "kind": either.kind if either else None,
        "lines": pair(x.lines if x else None, y.lines if y else None),
        "source_nodes": pair(x.source_nodes if x else None, y.source_nodes if y else None),
        "diff": None, "diff_stats": None,
    }
    if status == "changed":
        a_lines = src_a.get(x.name, "").splitlines(keepends=True) if x else []
        b_lines = src_b.get(y.name, "").splitlines(keepends=True) if y else []
        import difflib  # only where a code diff is shown

        diff = list(difflib.unified_diff(a_lines, b_lines, fromfile=f"a/{x.name if x else ''}",
                                         tofile=f"b/{y.name if y else ''}", n=context))
        plus = sum(1 for d in diff if d.startswith("+") and not d.startswith("+++"))
        minus = sum(1 for d in diff if d.startswith("-") and not d.startswith("---"))
        e["diff_stats"] = {"added": plus, "removed": minus}
        if code:
            text = "".join(d if d.endswith("\n") else d + "\n" for d in diff[:max_diff_lines])
            if len(diff) > max_diff_lines:
                text += f"… {len(diff) - max_diff_lines} more diff lines\n"
            e["diff"] = text
    return e


def extern_diffs(index_a: list[KernelEntry], index_b: list[KernelEntry]
                 ) -> list[dict[str, Any]]:
    """The extern calls of two kernel indexes, counted by call."""
    def count(index: list[KernelEntry]) -> collections.Counter[str]:
        return collections.Counter(k.call or normalize_kernel_name(k.name)
                                   for k in index if k.extern)
    ca = count(index_a)
    cb = ca if index_b is index_a else count(index_b)
    return [{"name": n, "a": ca.get(n, 0), "b": cb.get(n, 0)}
            for n in sorted(set(ca) | set(cb))]


def wrapper_calls(code: str | None) -> str:
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


def _folded(g: GraphRecord | None) -> str:
    """``g``'s wrapper with its kernel definitions folded (``wrapper_calls``), kept with it."""
    return kept(g, "wrapper", lambda: wrapper_calls(g.wrapper_code())) if g else ""


def _own_markers(g: GraphRecord) -> dict[str, int]:
    """The markers of ``g``'s folded wrapper with its own kernels' calls, kept with it."""
    return kept(g, "markers", lambda: _markers(
        _folded(g), [k.name for k in g.kernels if not k.extern]))


_LINE_CALL = re.compile(r"^\s*(\w+)\(", re.M)  # a call at the start of a line: NAME(


def _markers(text: str, kernels: Iterable[str]) -> dict[str, int]:
    res = {}
    for key, needle in WRAPPER_MARKERS.items():
        if needle:
            res[key] = text.count(needle)
    # the calls of each kernel, ``^\s*NAME(``: one pass over the wrapper for every name (a
    # pass per name cost 200 ms on a 24-layer wrapper); a name that is not a word, looked for
    # alone
    calls = collections.Counter(_LINE_CALL.findall(text))
    res["cpp_kernel_calls"] = sum(
        calls[n] if re.fullmatch(r"\w+", n)
        else len(re.findall(rf"^\s*{re.escape(n)}\(", text, re.M)) for n in kernels)
    return res


def wrapper_diff(ga: GraphRecord | None, gb: GraphRecord | None, index_a: list[KernelEntry],
                 index_b: list[KernelEntry], *, code: bool, context: int,
                 max_diff_lines: int) -> dict[str, Any]:
    """The wrappers of ``ga`` and ``gb`` (kernel definitions folded) compared: line counts,
    markers and a diff. A wrapper held in the same bytes by both is read and folded once."""
    same = same_file(ga, gb, schema.WRAPPER)
    wa = _folded(ga)
    wb = wa if same else _folded(gb)
    names_a = [k.name for k in index_a if not k.extern]
    names_b = names_a if index_b is index_a else [k.name for k in index_b if not k.extern]
    ma = _own_markers(ga) if ga and index_a is ga.kernels else _markers(wa, names_a)
    mb = ma if same and names_b == names_a else _markers(wb, names_b)
    out: dict[str, Any] = {
        "lines": pair(wa.count("\n") if wa else None, wb.count("\n") if wb else None),
        "markers": {k: pair(ma.get(k), mb.get(k)) for k in ma if ma.get(k) != mb.get(k)},
        "changed": wa != wb, "diff": None,
    }
    if code and wa and wb and wa != wb:
        import difflib  # only where a code diff is shown

        diff = list(difflib.unified_diff(wa.splitlines(keepends=True), wb.splitlines(keepends=True),
                                         fromfile="a/wrapper.py", tofile="b/wrapper.py", n=context))
        text = "".join(d if d.endswith("\n") else d + "\n" for d in diff[:max_diff_lines])
        if len(diff) > max_diff_lines:
            text += f"… {len(diff) - max_diff_lines} more diff lines\n"
        out["diff"] = text
    return out
