"""Rich rendering of a trace summary (``tuidebug info``). No torch, no Textual."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tuidebug.trace.format.schema import STATUS_SCRIPT_FAILED
from tuidebug.trace.queries.verdict import format_duration
from tuidebug.viewers.summary_text import cache_text, phase_text
from tuidebug.viewers.summary_view import accuracy_renderables, error_line, imported_renderables
from tuidebug.viewers.advice_view import advice_section
from tuidebug.viewers.breaks_view import break_notes, skipped_notes, summary_breaks
from tuidebug.viewers.dynamic_view import dynamic_notes
from tuidebug.inert import inert, inert_text
from tuidebug.viewers.numerics_view import numerics_lines
from tuidebug.trace.queries.numerics import testing_only_banner
from tuidebug.viewers.profile_view import render_profile
from tuidebug.viewers.vllm_view import vllm_renderables

MAX_ROWS = 200  # graphs and compiles listed (info --json lists every one)
MAX_COLLECTIVES = 8  # collectives listed per graph
MAX_PROBLEMS = 50  # problems listed

# a trace's status, wherever it is shown (info, the ranks table, the TUI; its title bar
# shows it reversed, as a badge)
STATUS_STYLE = {"ok": "bold green", "failed": "bold red", "crashed": "bold magenta",
                "running": "bold yellow", "stopped": "bold yellow", "unknown": "bold",
                "script_failed": "bold yellow"}


def status_word(status: str) -> str:
    """A status as ``info`` and the TUI head it: ``OK``, ``SCRIPT FAILED``…"""
    return status.upper().replace("_", " ")


def collective_text(c: dict[str, Any] | None) -> str:
    """A described collective (``trace.collectives.describe``) in one line:
    ``all_reduce group 0 [0, 1] float32[4] (reduce_op=sum) at job.py:13``."""
    if c is None:
        return "nothing (its sequence ends here)"
    group = f"{c.get('group')}" + (f" {c['group_ranks']}" if c.get("group_ranks") else "")
    args = ", ".join(f"{k}={v}" for k, v in (c.get("args") or {}).items())
    out = f"{c['op']} group {group} {' '.join(c.get('tensors') or [])}"
    return out + (f" ({args})" if args else "") + (f" at {c['line']}" if c.get("line") else "")


def render_summary(s: dict[str, Any], console: Console) -> None:
    status = s["status"]
    head = Text.assemble(("trace ", "dim"), inert_text(s["trace"], "bold"), "  ",
                         inert_text(status_word(status), STATUS_STYLE.get(status, "bold")))
    script = script_outcome_text(s)
    if script:  # the status says the script failed; the compile's own outcome beside it
        # "compiled OK" only where something compiled: a fullgraph=True break raises before
        # any graph (Dynamo's Unsupported), and the head said COMPILED OK above "script
        # raised Unsupported before compiling anything"
        failed = (s.get("script_error") or {}).get("in_compile")
        # a graph compiled, then Dynamo refused its frame (a constraint violated while it
        # built the guards): the compile failed, its graph never ran
        compiled = ("COMPILED OK" if s.get("graphs") else "NOTHING COMPILED") if (
            not failed or not (s.get("script_error") or {}).get("in_compile_graphs")) \
            else f"DYNAMO'S COMPILE {failed} FAILED"
        what = (f" ({compiled}; THE SCRIPT {script[0].upper()})"
                if status == STATUS_SCRIPT_FAILED else f", AND THE SCRIPT {script[0].upper()}")
        head.append(inert(what, multiline=False), style="bold yellow")
    versions = s.get("versions") or {}
    head.append(inert(f"   torch {versions.get('torch', '?')}", multiline=False), style="dim")
    if versions.get("triton"):
        head.append(inert(f"  triton {versions['triton']}", multiline=False), style="dim")
    console.print(head)
    banner = testing_only_banner([(f["flag"], f["value"]) for f in s.get("testing_only") or []])
    if banner:
        console.print(inert_text(banner, "bold reverse yellow"))
    if script:
        console.print(Text.assemble(("script ", "bold yellow"), inert_text(script[1])))
    err = s.get("error")
    if err:
        console.print(error_line(err.get("type"), err.get("message"),
                                 where=phase_text(err.get("phase"))))
        if err.get("kernel"):
            console.print(Text.assemble(
                ("  in kernel ", "dim"), inert_text(err["kernel"], "bold"),
                inert_text(f" ({err.get('kernel_graph')}), line {err.get('kernel_line')}: "),
                inert_text(str(err.get("code") or "")[:300], "bold")))
        if err.get("first_error"):
            console.print(Text.assemble(("  compiler: ", "dim"),
                                        inert_text(str(err["first_error"])[:300], "red")))
    # ten columns: on 80 (a pipe, a small terminal) one space between them, or rich cuts the
    # graph ids ("0_0-inferen…"), which are what the other commands take
    t = Table(title="compiled graphs", title_justify="left", show_lines=False, box=None,
              padding=(0, 1), header_style="bold", collapse_padding=console.width < 100,
              pad_edge=console.width >= 100)
    for col in ("graph", "kind", "status", "nodes", "passes±", "kernels", "extern",
                "fused", "→src", "time"):
        t.add_column(col, justify="right" if col not in ("graph", "kind", "status") else "left",
                     no_wrap=True, min_width=max((len(str(g["id"])) for g in s["graphs"]),
                                                 default=5) if col == "graph" else None)
    for g in s["graphs"][:MAX_ROWS]:
        phase_times = g.get("phase_times_s") or {}
        total = sum(phase_times.values()) if phase_times else None
        t.add_row(inert_text(g["id"]), inert_text(g["kind"]),
                  inert_text(g["status"], STATUS_STYLE.get(g["status"], "")),
                  str(g["nodes"] if g["nodes"] is not None else "–"),
                  "cache" if g.get("from_cache") else
                  f"{_unknown(g['passes_changed'])}/{g['passes_run']}", str(g["kernels"]),
                  str(g["extern_calls"]), _unknown(g["fused"]),
                  f"{g['kernels_with_source']}/{g['kernels']}", format_duration(total))
    console.print(t)
    _more(console, len(s["graphs"]), "graphs")
    cache_by_compile = {c["id"]: cache_text(c.get("cache") or {}) for c in s.get("compiles") or []}
    for g in s["graphs"][:MAX_ROWS]:
        if g.get("from_cache"):
            console.print(Text.assemble(
                inert_text(f"  {g['id']} ", "bold"),
                inert_text(f"from cache ({cache_by_compile.get(g.get('compile_id'), '?')}): "
                           "passes not observed (they ran when the cache entry was made; trace "
                           "without --use-cache to see them)")))
        if g.get("cudagraphs") not in (None, "off"):
            console.print(Text.assemble(inert_text(f"  {g['id']} ", "bold"),
                                        ("CUDA graphs: ", "dim"), inert_text(g["cudagraphs"])))
        for i, c in enumerate((g.get("collectives") or [])[:MAX_COLLECTIVES]):
            console.print(Text.assemble(inert_text(f"  {g['id']} ", "bold"),
                                        (f"collective #{i}: ", "dim"),
                                        inert_text(collective_text(c))))
        if len(g.get("collectives") or []) > MAX_COLLECTIVES:
            console.print(inert_text(f"  … {len(g['collectives']) - MAX_COLLECTIVES} more "
                                     "collectives (collectives.json)", "dim"))
        if g.get("ddp_bucket"):
            b = g["ddp_bucket"]
            console.print(Text.assemble(inert_text(f"  {g['id']} ", "bold"), ("DDP bucket ", "dim"),
                                        inert_text(f"{b.get('index', 0) + 1} of {b.get('buckets')}: "
                                                   f"{b.get('bytes')} bytes, "
                                                   f"{len(b.get('params') or [])} parameters")))
        if g["changed_passes"]:
            console.print(Text.assemble(inert_text(f"  {g['id']} ", "bold"),
                                        ("passes that changed it: ", "dim"),
                                        inert_text(", ".join(map(str, g["changed_passes"])))))
    if s.get("compiles"):
        ct = Table(title="Dynamo compiles", title_justify="left", box=None, padding=(0, 1),
                   header_style="bold")
        for col in ("id", "function", "where", "compile", "inductor", "breaks"):
            wraps = col in ("function", "where")  # the others are short: never cut
            ct.add_column(col, no_wrap=not wraps, overflow="fold" if wraps else "ellipsis",
                          min_width=None if wraps else len(col))
        notes: list[Text] = []
        for c in s["compiles"][:MAX_ROWS]:
            where = f"{Path(str(c.get('file') or '?')).name}:{c.get('line') or '?'}"
            compile_s = format_duration(c.get("compile_time_s"))
            if c.get("restarted_as") and c.get("compile_time_s") is None:
                compile_s = "restart"
            ct.add_row(inert_text(c["id"]), inert_text(c.get("function") or "?"),
                       inert_text(where[-50:]), compile_s, format_duration(c.get("inductor_time_s")),
                       inert_text(len(c.get("graph_breaks") or [])))
            dyn = dynamic_notes(c, {str(t.get("id")): t for t in
                                    (s.get("advice") or {}).get("tried") or []})
            notes.extend(dyn)
            for r in [] if c.get("recompile") else c.get("recompile_reasons") or []:
                notes.append(Text.assemble(inert_text(f"  {c['id']} ", "bold"),
                                           ("recompiled: ", "dim"), inert_text(str(r)[:300])))
        console.print(ct)
        _more(console, len(s["compiles"]), "compiles")
        for n in notes[:MAX_PROBLEMS]:
            console.print(n)
        for c in s["compiles"][:MAX_ROWS]:
            if c.get("cache"):  # none looked up: a capture turns the graph caches off
                console.print(Text.assemble(inert_text(f"  {c['id']} ", "bold"),
                                            ("graph caches: ", "dim"),
                                            inert_text(cache_text(c["cache"]))))
            for lk in c.get("cache_lookups") or []:
                for why in lk.get("miss_reason") or []:
                    kind = f" {lk['graph_kind']}" if lk.get("graph_kind") else ""
                    console.print(Text.assemble(
                        inert_text(f"    {lk.get('cache')}{kind} {lk.get('result')}: ", "dim"),
                        inert_text(str(why)[:300])))
    for n in break_notes(str((s.get("graph_break_summary") or {}).get("headline") or ""),
                         summary_breaks(s)) + skipped_notes(s.get("skipped_frames") or []):
        console.print(n)
    adv = s.get("advice") or {}
    for line in advice_section(adv.get("suggestions") or [],
                               {str(t.get("id")): t for t in adv.get("tried") or []}):
        console.print(line)
    acc = s.get("accuracy") or {}
    for cid, a in acc.items():
        for part in accuracy_renderables(cid, a):
            console.print(part)
        numerics = (s.get("numerics") or {}).get(cid)
        if isinstance(numerics, dict):
            for line in numerics_lines(numerics):
                console.print(line)
    if s.get("profile"):
        render_profile(s["profile"], console)
    if s.get("vllm"):
        for line in vllm_renderables(s["vllm"]):
            console.print(line)
    if s.get("config_changed"):
        console.print(Text.assemble(("config differs from defaults: ", "dim"),
                                    inert_text(", ".join(map(str, s["config_changed"])))))
    for line in imported_renderables(s.get("imported_from")):
        console.print(line)
    for w in s.get("warnings") or []:
        console.print(inert_text(f"warning: {w}", "yellow"))
    problems = s.get("problems") or []
    for p in problems[:MAX_PROBLEMS]:
        console.print(inert_text(f"problem: {p}", "red"))
    if len(problems) > MAX_PROBLEMS:
        console.print(f"… and {len(problems) - MAX_PROBLEMS} more problems "
                      "(tuidebug info --json lists them all)", style="red")


def script_outcome_text(s: dict[str, Any]) -> tuple[str, str] | None:
    """(``raised`` | ``exited with code N``, what happened) when the traced script itself ended
    badly (its exception or exit code), else None."""
    se = s.get("script_error")
    if se:
        when = "after compiling" if se.get("after_compiling") else "before compiling anything"
        if se.get("in_compile"):  # torch.compile raised it: Dynamo refused a frame
            when = (f"in torch.compile: Dynamo's compile {se['in_compile']} "
                    f"({se.get('in_compile_at')}) failed"
                    + (" after its graph compiled, and the graph never ran"
                       if se.get("in_compile_graphs") else ""))
        message = str(se.get("message") or "").strip().splitlines()
        return "raised", f"raised {se.get('type')} {when}: {message[0][:300] if message else ''}"
    if s.get("script_exit_code"):
        return (f"exited with code {s['script_exit_code']}",
                f"exited with code {s['script_exit_code']} (sys.exit)")
    return None


def _more(console: Console, n: int, what: str) -> None:
    if n > MAX_ROWS:
        console.print(f"  … {n - MAX_ROWS} more {what} (tuidebug info --json lists them all)",
                      style="dim")


def _num(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, (int, float)) else "?"


def _unknown(v: Any) -> str:
    """A count, or "?" where the trace does not know it (imports)."""
    return "?" if v is None else str(v)
