"""Rich rendering of a trace comparison (the data of ``tuidebug.trace.diff.diff_traces``)."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console, RenderableType
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from tuidebug.trace.diff import format_duration
from tuidebug.trace.diff.findings import SAME_CODE, process_kind, runs_apart
from tuidebug.viewers.profile_view import profile_diff_tables
from tuidebug.inert import inert, inert_text

__all__ = ["render_diff", "diff_renderables"]

MAX_GRAPHS = 50  # graphs shown one by one


def _v(x: Any) -> str:
    """A value from a trace as one inert line."""
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"
    if isinstance(x, (dict, list)):
        return inert(json.dumps(x, default=str), multiline=False)
    return inert(x, multiline=False)


def _delta(a: Any, b: Any) -> Text:
    """``a → b`` coloured: green when fewer, yellow when more, dim when equal."""
    t = Text(f"{_v(a)} → {_v(b)}")
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        t.stylize("dim" if a == b else ("yellow" if b > a else "green"))
    elif a != b:
        t.stylize("bold")
    return t


def _origin(recompile: dict[str, Any] | None) -> str:
    """How a side was made: recompiled from a trace, or traced fresh in the worker (a flag
    demo's trace A) with these settings."""
    if not recompile:
        return ""
    sets = ", ".join(f"{_v(k)}={_v(json.dumps(v, default=str))}"
                     for k, v in (recompile.get("sets") or {}).items())
    if recompile.get("from"):
        return "  recompiled with " + (sets or "the same flags")
    return "  traced in the recompile worker" + (f" with {sets}" if sets else "")


def _seconds(a: Any, b: Any, like: bool = True) -> Text:
    """Compile seconds A → B; ``like``: both compiled in the same kind of process (else no
    ratio: a fresh process against the warm worker is not a comparison)."""
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return Text(f"{_v(a)} → {_v(b)}")
    if not like:
        return Text(f"{format_duration(a)} → {format_duration(b)} (not like with like)", style="dim")
    ratio = f" (×{b / a:.2f})" if a else ""
    return Text(f"{format_duration(a)} → {format_duration(b)}{ratio}",
                style="green" if b < a else "yellow")


def _once(p: dict[str, Any]) -> Text:
    """One timed call per side (two processes): both values, no ratio, no colour."""
    a, b = p.get("a"), p.get("b")
    f = lambda v: format_duration(v) if isinstance(v, (int, float)) else _v(v)  # noqa: E731
    return Text(f"{f(a)} → {f(b)}")


def diff_renderables(d: dict[str, Any], *, code: bool = True, unchanged: bool = False,
                     max_code_lines: int = 120) -> list[RenderableType]:
    out: list[RenderableType] = []
    a, b = d["a"], d["b"]
    head = Table.grid(padding=(0, 1))
    head.add_column(style="bold")
    head.add_column()
    for label, side in (("A", a), ("B", b)):
        extra = _origin(side.get("recompile"))
        status_style = "green" if side["status"] == "ok" else "red"
        head.add_row(label, Text.assemble(inert_text(side["path"], "cyan"), "  ",
                                          inert_text(str(side["status"]).upper(), status_style),
                                          extra))
    out.append(head)

    findings = Text()
    for line in d.get("lines") or []:
        findings.append("• " + inert(line, multiline=False) + "\n")
    findings.rstrip()
    out.append(Panel(findings, title="what changed", title_align="left", border_style="blue"))

    cfg = d["config"]
    if cfg["changed"] or cfg["overrides"] or cfg.get("note"):
        t = Table(title="config", title_justify="left", show_edge=False)
        t.add_column("flag", style="cyan")
        t.add_column("A")
        t.add_column("B")
        t.add_column("")
        rows = cfg["changed"] or [dict(c, capture=False) for c in cfg["overrides"]]
        for c in sorted(rows, key=lambda c: c.get("capture", False)):
            t.add_row(inert_text(c["name"]), inert_text(_v(c["a"])), inert_text(_v(c["b"])),
                      Text("capture setting", style="dim") if c.get("capture") else "")
        out.append(t)
        if cfg.get("note"):
            out.append(inert_text(cfg["note"], "yellow"))

    for g in d["graphs"][:MAX_GRAPHS]:
        out.extend(_graph(g, code=code, unchanged=unchanged, max_code_lines=max_code_lines,
                          like=process_kind(d["a"]) == process_kind(d["b"])))
    if len(d["graphs"]) > MAX_GRAPHS:
        out.append(Text(f"… {len(d['graphs']) - MAX_GRAPHS} more graphs not shown "
                        "(tuidebug diff --json lists them all)", style="dim"))

    if d["compiles"]:
        t = Table(title="compile time and cache counters per Dynamo compile", title_justify="left",
                  show_edge=False)
        t.add_column("compile")
        t.add_column("whole frame")
        t.add_column("inductor")
        t.add_column("counters that differ")
        like = process_kind(d["a"]) == process_kind(d["b"])
        if not like:
            out.append(Text(f"compile times: A compiled in {process_kind(d['a'])}, B in "
                            f"{process_kind(d['b'])}: not compared", style="dim"))
        for c in d["compiles"]:
            counters = ", ".join(f"{_v(k)} {_v(v['a'])}→{_v(v['b'])}"
                                 for k, v in c["counters"].items())
            t.add_row(inert_text(c["id"]), _seconds(c["compile_time_s"]["a"],
                                                    c["compile_time_s"]["b"], like),
                      _seconds(c["inductor_time_s"]["a"], c["inductor_time_s"]["b"], like),
                      Text(counters or "none", style="" if counters else "dim"))
        out.append(t)
    if d["runtime"]:
        t = Table(title="compiled first calls, per compile: each timed once, warm-up included "
                  "(not a speed comparison: --profile measures one)", title_justify="left",
                  show_edge=False)
        for col in ("compile", "compiled first call", "matches eager", "max abs err"):
            t.add_column(col)
        for r in d["runtime"]:
            # one call each, in two processes: shown, not judged (no ratio); the eager call's
            # time is not set beside it (two cold calls read as a speed-up: as info, the
            # overview); --json keeps eager_s
            t.add_row(inert_text(r["compile_id"]), _once(r["first_call_s"]),
                      _delta(r["close"]["a"], r["close"]["b"]),
                      Text(f"{_v(r['max_abs']['a'])} → {_v(r['max_abs']['b'])}"))
        out.append(t)
    if d.get("profile") and all(d["profile"]["profiled"].values()):
        out.extend(profile_diff_tables(d["profile"]))
    out.append(Text(_KERNEL_TIMES_NOTE if _has_kernel_times(d) else
                    "Per-kernel times: not in these traces (traced before tuidebug measured "
                    "them); run times also need the eager check (no --no-check).", style="dim"))
    return out


def _graph(g: dict[str, Any], *, code: bool, unchanged: bool,
           max_code_lines: int, like: bool = True) -> list[RenderableType]:
    out: list[RenderableType] = []
    where = {"both": "", "a": "  (only in A)", "b": "  (only in B)"}[g["in"]]
    if g.get("id_b"):  # the same compile's graph, made by another attempt in B
        where = f" (B: {g['id_b']})" + where
    out.append(inert_text(f"\ngraph {g['id']} ({g['kind']}){where}", "bold magenta",
                          multiline=True))
    t = Table(show_header=False, show_edge=False, box=None, padding=(0, 2))
    t.add_column(style="bold")
    t.add_column()
    t.add_row("status", _delta(g["status"]["a"], g["status"]["b"]))
    t.add_row("FX nodes (last stage)", _delta(g["nodes"]["a"], g["nodes"]["b"]))
    for s in g["stages"]:
        t.add_row(inert_text(f"  stage {s['name']}"), _delta(s["a"], s["b"]))
    post = g["ir"]["post"]
    pre = g["ir"]["pre"]
    t.add_row("IR nodes before fusion", _delta((pre["a"] or {}).get("nodes"), (pre["b"] or {}).get("nodes")))
    t.add_row("IR nodes after fusion", _delta((post["a"] or {}).get("nodes"), (post["b"] or {}).get("nodes")))
    t.add_row("scheduler kernels", _delta((post["a"] or {}).get("kernels"), (post["b"] or {}).get("kernels")))
    t.add_row("reductions", _delta((post["a"] or {}).get("reductions"), (post["b"] or {}).get("reductions")))
    t.add_row("fusions made / rejected",
              Text.assemble(_delta(g["fusion"]["fused"]["a"], g["fusion"]["fused"]["b"]), "  /  ",
                            _delta(g["fusion"]["rejected"]["a"], g["fusion"]["rejected"]["b"])))
    t.add_row("generated kernels", _delta(g["kernel_count"]["a"], g["kernel_count"]["b"]))
    t.add_row("extern calls", _delta(g["extern_count"]["a"], g["extern_count"]["b"]))
    if g["autotune"]["a"] or g["autotune"]["b"]:
        t.add_row("autotuned ops", _delta(g["autotune"]["a"], g["autotune"]["b"]))
    t.add_row("compile (graph)", _seconds(g["compile_s"]["a"], g["compile_s"]["b"], like))
    for k, v in g["wrapper"]["markers"].items():
        t.add_row(inert_text(f"wrapper: {k}"), _delta(v["a"], v["b"]))
    out.append(t)
    for side in ("a", "b"):
        err = g["error"][side]
        if err:
            out.append(inert_text(f"  {side.upper()} failed in {err.get('phase')}: "
                                  f"{err.get('type')}: {str(err.get('message'))[:300]}", "red"))

    if g["passes"]:
        pt = Table(title="passes with a different effect", title_justify="left", show_edge=False)
        pt.add_column("pass", style="cyan")
        pt.add_column("subsystem", style="dim")
        pt.add_column("A")
        pt.add_column("B")
        for p in g["passes"]:
            pt.add_row(inert_text(p["name"]), inert_text(p.get("subsystem") or ""),
                       _effect(p["a"]), _effect(p["b"]))
        out.append(pt)
    for label, key in (("fused groups only in A", "groups_only_a"), ("fused groups only in B", "groups_only_b")):
        groups = g["ir"][key]
        if groups:
            txt = Text(f"{label}:\n", style="bold")
            for grp in groups[:12]:
                names = ", ".join(grp["origins"][:10]) + (" …" if len(grp["origins"]) > 10 else "")
                txt.append(inert(f"  [{names}]", multiline=False)
                           + (f" ×{grp['count']}" if grp["count"] > 1 else "") + "\n")
            out.append(txt)
    if g["fusion"]["reasons"]:
        rt = Table(title="fusion rejections by reason", title_justify="left", show_edge=False)
        rt.add_column("reason")
        rt.add_column("A → B")
        for r in g["fusion"]["reasons"]:
            rt.add_row(inert_text(r["reason"]), _delta(r["a"], r["b"]))
        out.append(rt)
    if g["externs"]:
        et = Table(title="extern calls", title_justify="left", show_edge=False)
        et.add_column("call")
        et.add_column("A → B")
        for e in g["externs"]:
            et.add_row(inert_text(e["name"]), _delta(e["a"], e["b"]))
        out.append(et)

    rows = _kernel_rows(g["kernels"], unchanged)
    if rows:
        out.append(_kernel_table(rows))
    same = sum(1 for k in g["kernels"] if k["status"] == "unchanged")
    hidden = sum(1 for k in g["kernels"] if k["status"] == "unchanged" and k not in rows)
    if hidden:
        out.append(Text(f"{same} kernel{'s' if same != 1 else ''} unchanged"
                        + (f" ({hidden} not listed; --unchanged lists them)" if hidden < same else ""),
                        style="dim"))
    if code:
        for k in g["kernels"]:
            if k["status"] == "changed" and k.get("diff"):
                out.append(_code(k["diff"], f"{_v(k['a'])} → {_v(k['b'])}", max_code_lines))
        if g["wrapper"].get("diff"):
            out.append(_code(g["wrapper"]["diff"], "wrapper (kernel definitions folded)",
                             max_code_lines))
    return out


_KERNEL_TIMES_NOTE = (
    "Kernel times (code/timings.json): compile = that kernel's C++ build or Triton compile "
    "(\"cached\": its binary came from Inductor's kernel cache); run = median seconds per call "
    "over a few re-runs of the compiled graph after the eager check (C++ and Triton kernels; "
    "extern/ATen calls and backward graphs are not timed).")
_MAX_TIMED_UNCHANGED = 20  # unchanged kernels listed for their times (all with --unchanged)


def _has_kernel_times(d: dict[str, Any]) -> bool:
    return any(_timed(k) for g in d["graphs"] for k in g["kernels"])


def _kernel_rows(kernels: list[dict[str, Any]], unchanged: bool) -> list[dict[str, Any]]:
    """Every kernel that differs; unchanged kernels too with ``unchanged``, else those with a
    compile or run time, the largest run-time changes first (at most _MAX_TIMED_UNCHANGED)."""
    rows = [k for k in kernels if k["status"] != "unchanged"]
    same = [k for k in kernels if k["status"] == "unchanged"]
    if unchanged:
        return rows + same
    timed = [k for k in same if _timed(k)]  # identical code: listed for its times, not ranked
    return rows + timed[:_MAX_TIMED_UNCHANGED]


def _timed(k: dict[str, Any]) -> bool:
    return any(v is not None for key in ("compiled", "compile_s", "run_s")
               for v in (k.get(key) or {}).values())


def _kernel_table(rows: list[dict[str, Any]]) -> Table:
    kt = Table(title="kernels", title_justify="left", show_edge=False)
    for col in ("", "A", "B", "lines", "compile A → B", "run per call A → B"):
        kt.add_column(col, overflow="fold")
    style = {"changed": "yellow", "added": "green", "removed": "red", "renamed": "cyan",
             "unchanged": "dim"}
    for k in rows:
        stats = k.get("diff_stats")
        lines = _delta(k["lines"]["a"], k["lines"]["b"])
        if stats:
            lines.append(f"  +{stats['added']} −{stats['removed']}")
        kt.add_row(inert_text(k["status"], style.get(k["status"], "")),
                   inert_text(k["a"] or ""), inert_text(k["b"] or ""), lines,
                   _compile_times(k), _run_times(k))
    return kt


def _compile_time(k: dict[str, Any], side: str) -> str:
    how = (k.get("compiled") or {}).get(side)
    return "cached" if how == "cached" else format_duration((k.get("compile_s") or {}).get(side))


def _compile_times(k: dict[str, Any]) -> Text:
    return Text(f"{_compile_time(k, 'a')} → {_compile_time(k, 'b')}")


def _run_times(k: dict[str, Any]) -> Text:
    run = k.get("run_s") or {}
    t = Text(f"{format_duration(run.get('a'))} → {format_duration(run.get('b'))}")
    ratio = k.get("run_ratio")
    if k["status"] in SAME_CODE:  # identical code is never a change (two processes' noise)
        if run.get("a") is not None and run.get("b") is not None:
            t.append(" same code", style="dim")
    elif ratio and runs_apart(k):
        t.append(f" ×{ratio:.2f}", style="yellow" if ratio > 1.2 else
                 ("green" if ratio < 1 / 1.2 else "dim"))
    elif ratio:
        t.append(" inside the noise", style="dim")
    return t


def _effect(e: dict[str, Any] | None) -> Text:
    if e is None:
        return Text("did not run", style="dim")
    if not e["changed"]:
        return Text("no change", style="dim")
    return Text(f"+{e['added']} −{e['removed']} ~{e['modified']}")


def _code(diff: str, title: str, max_lines: int) -> RenderableType:
    lines = diff.splitlines()
    if len(lines) > max_lines:
        diff = "\n".join(lines[:max_lines]) + f"\n… {len(lines) - max_lines} more lines (--max-lines)"
    return Panel(Syntax(inert(diff), "diff", theme="ansi_dark", word_wrap=False),
                 title=inert_text(title), title_align="left", border_style="dim")


def render_diff(d: dict[str, Any], console: Console | None = None, *, code: bool = True,
                unchanged: bool = False, max_code_lines: int = 120) -> None:
    console = console or Console()
    for part in diff_renderables(d, code=code, unchanged=unchanged,
                                 max_code_lines=max_code_lines):
        console.print(part)  # each its own width on a pipe (cli/pipe_console.py)
