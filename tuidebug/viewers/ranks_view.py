"""Rich rendering of a job directory's cross-rank report (``tuidebug info JOBDIR``).

No torch, no Textual. Everything from the traces is shown as plain ``Text`` (never markup).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tuidebug.inert import inert, inert_text
from tuidebug.trace.jobs.unlogged import NOTE as NOT_LOGGED, note_text
from tuidebug.trace.queries.verdict import format_duration
from tuidebug.viewers.dynamic_view import where as where_line
from tuidebug.viewers.info import STATUS_STYLE, collective_text


def _ranks(rs: list[int]) -> str:
    """``[0, 1, 2, 5]`` as ``0-2,5``."""
    out: list[str] = []
    for r in sorted(rs):
        if out and out[-1].split("-")[-1] == str(r - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{r}"
        else:
            out.append(str(r))
    return ",".join(out)


def _not_compared(notes: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    return [f for n in notes or [] if n.get("kind") == "not_compared" for f in n.get("files") or []]


def not_compared_lines(notes: list[dict[str, Any]] | None) -> list[str]:
    """The files of the ranks' traces not read to be compared (a ``not_compared`` note): per
    file ``not compared: FILE on rank(s) R: WHY``, or with a reason per rank (two sizes over
    the cap) each reason on a line of its own below it."""
    out: list[str] = []
    for f in _not_compared(notes):
        reasons = f.get("reasons") or []
        head = f"  not compared: {f['file']} on rank(s) {_ranks(f['ranks'])}:"
        if len(reasons) == 1:
            out.append(f"{head} {reasons[0]['why']}")
        else:
            out += [head] + [f"    rank(s) {_ranks(r['ranks'])}: {r['why']}" for r in reasons]
    return out


def divergence_lines(d: dict[str, Any] | None,
                     ranks: list[dict[str, Any]] | None = None,
                     notes: list[dict[str, Any]] | None = None) -> list[str]:
    """The first divergence in a few plain lines; ``["ranks agree"]`` when there is none (with
    the status they share when it is not ``ok``: ranks that all failed alike agree, but the job
    did not succeed; and how they ended when that differs — ``ranks`` is the report's per-rank
    list). Files not compared (``notes``: the report's) are listed after it; with none found
    to differ, the ranks agree only "in what was compared". Ranks whose collectives were not
    logged (a ``not_logged`` note) are said last: where they wait is not known."""
    unread = not_compared_lines(notes)
    lines = _divergence_lines(d, ranks)
    if unread and d is None:
        n = len(_not_compared(notes))
        lines[0] = (lines[0].replace("ranks agree", "ranks agree in what was compared", 1)
                    .replace("compiles agree", "compiles agree in what was compared", 1)
                    + f"; {n} file{'s' if n > 1 else ''} not compared")
    # a rank whose collectives were not logged: what the logs tell is not known of it
    blind = [note_text(n) for n in notes or [] if n.get("kind") == NOT_LOGGED]
    return lines + unread + blind


def _divergence_lines(d: dict[str, Any] | None,
                      ranks: list[dict[str, Any]] | None = None) -> list[str]:
    if d is None:
        by_status: dict[str, list[int]] = {}
        for r in ranks or []:
            by_status.setdefault(str(r.get("status") or "?"), []).append(int(r["rank"]))
        if len(by_status) > 1:
            return ["the ranks' compiles agree, but the ranks ended differently: " + ", ".join(
                f"{st} on rank(s) {_ranks(rs)}" for st, rs in sorted(by_status.items()))]
        if by_status and "ok" not in by_status:
            return [f"ranks agree, and every rank ended {next(iter(by_status))}"]
        return ["ranks agree"]
    kind = d["kind"]
    if kind == "no_trace":
        return [f"no trace from rank(s) {_ranks(d['ranks'])}" if d["ranks"]
                else "no rank wrote a trace"]
    ref, odd = _ranks(d["reference_ranks"]), _ranks(d["diverging_ranks"])
    cid = d.get("compile_id")
    if kind == "config":
        return [f"Inductor config differs between ranks {ref} and {odd}: "
                + ", ".join(d["keys"])]
    if kind == "compile_only_on_some_ranks":
        on = ref if d["on_reference"] else odd
        off = odd if d["on_reference"] else ref
        r = d["reason"]
        at = where_line({"file": r.get("file"), "line": r.get("line")}) or "?"
        where = f" ({r.get('function')} {at})" if r.get("function") else ""
        lines = [f"compile {cid} on rank(s) {on} only, not on {off}{where}"]
        called = r.get("called_at")
        if isinstance(called, dict) and where_line(called):
            lines.append(f"  called at {where_line(called)}  {str(called.get('code') or '')[:160]}"
                         .rstrip())
        after = r.get("resumed_after")
        if isinstance(after, dict):
            lines.append(f"  resumed after the graph break at {after.get('where')}: "
                         f"{after.get('summary')}")
            lines.append(_resumed_line(after, on, off))
        for x in r.get("recompile_reasons") or []:  # whole, each of its lines on a line
            parts = str(x).splitlines() or [""]
            lines.append(f"  recompiled: {parts[0]}")
            lines += [f"    {p}" for p in parts[1:]]
        for b in r.get("graph_break_reasons") or []:
            lines.append(f"  graph break{' at ' + b['where'] if b.get('where') else ''}: "
                         + b["summary"])
        if not r.get("graph_break_reasons"):
            lines += [f"  restarted: {b['summary']}" for b in r.get("restart_reasons") or []]
        return lines
    if kind == "graph":
        if d.get("stage") is None:
            return [f"compile {cid}: {d.get('detail')} (ranks {ref} vs {odd})"]
        n = d["nodes"]
        lines = [f"graph {d['graph']} first differs at stage {d['stage']} (ranks {ref} vs {odd}): "
                 f"{len(n['added'])} added, {len(n['removed'])} removed, "
                 f"{len(n['changed'])} changed nodes"]
        lines += [f"  {x}" for x in n["lines"]]
        if n.get("more_lines"):
            lines.append(f"  … {n['more_lines']} more")
        return lines
    if kind == "collectives":
        what = ("collective order across groups differs" if d.get("note")
                else "collective sequence differs")
        lines = [f"graph {d['graph']}: {what} at collective "
                 f"#{d['position']} (ranks {ref} vs {odd}: {d['counts'][0]} vs "
                 f"{d['counts'][1]} collectives; differs in {', '.join(d['differs_in'])})"]
        if d.get("note"):
            lines.append(f"  {d['note']}")
        lines.append(f"  ranks {ref}: {collective_text(d['reference'])}")
        lines.append(f"  ranks {odd}: {collective_text(d['diverging'])}")
        if d.get("line"):
            lines.append(f"  issued at {d['line']}" + (f": {d['code']}" if d.get("code") else ""))
        return lines
    if kind == "status":
        return [f"graph {d['graph']}: {d['statuses'][0]} on ranks {ref}, "
                f"{d['statuses'][1]} on ranks {odd}"]
    return [f"{kind} (ranks {ref} vs {odd})"]


def _resumed_line(after: dict[str, Any], on: str, off: str) -> str:
    """Whether the other ranks resumed after that break too, and in other code only where the
    traces show it (never by Dynamo's frame ids: each process numbers its own)."""
    if not after.get("other_resumed"):
        return f"    rank(s) {off} never resumed there"
    if not after.get("other_path"):
        return f"    rank(s) {off} resumed there too"
    counts = after.get("code_objects")
    if isinstance(counts, list) and len(counts) == 2:
        return (f"    rank(s) {off} resumed there too, in other code (another branch taken, or another call path to it): "
                f"rank(s) {on} compiled {counts[0]} resume functions there, rank(s) {off} "
                f"{counts[1]}")
    lines = ", ".join(map(str, after.get("other_lines") or []))
    return (f"    rank(s) {off} resumed there too, in other code (another branch taken, or another call path to it): "
            f"theirs starts at line {lines}")


def stopped_text(waits: dict[str, Any]) -> str:
    """What a job that stopped with no mismatch of collectives found says above where each
    rank is."""
    if waits.get("hung") and not _ended(waits, "collective_timeout"):  # --timeout
        if waits.get("waiting"):
            return "ranks stopped while in collectives"
        return "ranks stopped, none in a collective the progress log records; where each rank is:"
    return "; ".join(_end_texts(waits)) + "; where each rank was:"


def _ended(waits: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e for e in waits.get("ends") or [] if isinstance(e, dict) and e.get("kind") == kind]


def _end_texts(waits: dict[str, Any]) -> list[str]:
    """How the ranks ended, as each rank's record and error say: a collective that timed out,
    a rank that raised, ranks stopped by the launcher, records left running, ranks with no
    record (never "no rank timed out": a rank the NCCL watchdog aborted may have said
    nothing)."""
    texts = [str(e.get("text") or "") for e in waits.get("ends") or []
             if isinstance(e, dict) and e.get("kind") != "timed_out"]
    return [t for t in texts if t] or ["how the ranks ended is not recorded"]


def wait_headings(waits: dict[str, Any]) -> tuple[str, str, list[str]]:
    """The label, its style and the headings said above where each unfinished rank is:
    ``hung:`` in red only when some rank ran out of time (``--timeout``, or a collective
    timed out: its error says so, and no rank raised before it); ``interrupted:`` when ranks
    ended on SIGINT or left their records running with no other rank's end to explain it
    (Ctrl-C), and none raised; else ``stopped:`` — a job whose ranks were stopped because one
    raised is no hang, nor are collectives that timed out waiting for a rank that raised.
    With a mismatch of collectives found, how the ranks ended comes first (but for
    ``--timeout``, which the label says)."""
    mismatches = [m["text"] for m in waits["mismatches"]]
    if not mismatches:
        texts = [stopped_text(waits)]
    elif waits.get("hung") and not _ended(waits, "collective_timeout"):
        texts = mismatches
    else:
        texts = ["; ".join(_end_texts(waits))] + mismatches
    if waits.get("hung"):
        return "hung: ", "bold red", texts
    if _ended(waits, "interrupted") and not _ended(waits, "raised"):  # one raised: stopped
        return "interrupted: ", "bold yellow", texts
    return "stopped: ", "bold", texts


def slow_rank_lines(slow: list[dict[str, Any]] | None,
                    late: dict[str, Any] | None = None) -> list[str]:
    """A rank far slower than every other (outside their spread), and where its time went; the
    rank the others waited for at every collective (``late``)."""
    out: list[str] = []
    for x in [*(slow or []), *([late] if isinstance(late, dict) else [])]:
        out.append(f"slow rank: {x.get('text')}")
        out += [f"  {w}" for w in x.get("where") or []]
    return out


def compiled_elsewhere_line(d: dict[str, Any] | None, rank: int, command: str) -> str | None:
    """For a command that read the trace of ``rank`` of a job: where the job's first divergence
    (``d``) is a compile that rank did not make (a recompile on another rank only, as a ragged
    last batch makes), which ranks made it and the ``command`` that reads one of theirs; None
    unless ``rank`` is one of the ranks that lack it (with three groups or more, the two groups
    compared may both be others), or where the ranks parted otherwise."""
    if not isinstance(d, dict) or d.get("kind") != "compile_only_on_some_ranks":
        return None
    having, lacking = (d.get("reference_ranks"), d.get("diverging_ranks"))
    if not d.get("on_reference"):
        having, lacking = lacking, having
    having = [r for r in having or [] if type(r) is int]
    if not having or rank not in (lacking or []):
        return None
    return (f"rank(s) {_ranks(having)} compiled {d.get('compile_id')}, which rank {rank} did "
            f"not (where the ranks first diverge): {command} --rank {min(having)}")


def note_line(n: dict[str, Any], job: str = "JOB") -> str:
    """A difference between ranks that is no divergence, in one line."""
    if n.get("kind") == "code":
        why = ("autotuning chose differently: " + "; ".join(
            f"{a[0]}: {a[1]} vs {b[1]}" for a, b in n.get("autotune") or [])
               if n.get("autotune_differs") else "same graphs and collectives")
        return (f"note: graph {n['graph']}: generated code differs between ranks "
                f"{n['ranks'][0]} and {n['ranks'][1]} ({why}); not a divergence")
    if n.get("kind") == "constants":
        lines = "".join(f"\n    {x}" for x in n.get("lines") or [])
        return (f"note: graph {n['graph']}: ranks {n['ranks'][0]} and {n['ranks'][1]} differ "
                f"only in the offsets of views (as_strided, slice, narrow, select; from stage "
                f"{n['stage']}): each rank's shard lies elsewhere in its buffer; same ops, "
                f"values, dtypes and shapes, not a divergence{lines}")
    if n.get("kind") == "cache":
        a, b = n["cache"]
        return (f"note: compile {n.get('compile_id')}: cache hits differ between ranks "
                f"{n['ranks'][0]} and {n['ranks'][1]} ({_cache_text(a)} vs {_cache_text(b)}); "
                "same graphs and collectives, not a divergence")
    if n.get("kind") == "no_graph":
        rs = n.get("ranks") or []
        counts = sorted({c for c in (n.get("compiles") or {}).values() if isinstance(c, int)})
        dyn = (f" ({'/'.join(map(str, counts))} Dynamo compiles, none with a graph)"
               if counts and counts != [0] else "")
        return (f"note: rank(s) {_ranks(rs)}: no Inductor graph{dyn}; the script ran eagerly, "
                f"not a failure (why: tuidebug info {job} --rank {min(rs)})"
                if rs else "note: no Inductor graph")
    return f"note: {n.get('kind')}"


def _cache_text(c: Any) -> str:
    if not isinstance(c, dict) or not c:
        return "no cache used"
    return ", ".join(f"{k} {v.get('hit', 0)} hit / {v.get('miss', 0)} miss"
                     if isinstance(v, dict) else str(k) for k, v in c.items())


def render_job(report: dict[str, Any], console: Console) -> None:
    nodes = inert(", ".join(str(n["hostname"]) for n in report["nodes"]) or "?", multiline=False)
    launcher = inert(report.get("launcher") or "?", multiline=False)
    console.print(Text.assemble(("job ", "dim"), (inert(report["job"], multiline=False), "bold"),
                                f"   world size {report['world_size']}",
                                (f"   launcher {launcher}   nodes {nodes}", "dim")))
    t = Table(title="ranks", title_justify="left", box=None, header_style="bold")
    for col in ("rank", "host", "status", "compiles", "graphs", "compile", "group"):
        t.add_column(col)
    group_of = {r: i for i, g in enumerate(report["groups"]) for r in g["ranks"]}
    for r in report["ranks"]:
        status = str(r.get("status") or "?")
        t.add_row(str(r["rank"]), inert_text(r.get("hostname") or "?"),
                  inert_text(status, STATUS_STYLE.get(status, "")),
                  str(r.get("compiles", "–")), str(r.get("graphs", "–")),
                  format_duration(r.get("compile_time_s")),
                  chr(ord("A") + group_of[r["rank"]] % 26) if r["rank"] in group_of else "–")
    console.print(t)
    d = report["divergence"]
    lines = divergence_lines(d, report["ranks"], report.get("notes"))
    style = ("bold red" if d is not None else "bold green" if lines == ["ranks agree"]
             else "bold yellow")
    console.print(Text("first divergence: " if d else "", style=style)
                  + inert_text(lines[0], style))
    for line in lines[1:]:
        console.print(inert_text(line))
    for n in report.get("notes") or []:
        if n.get("kind") in ("not_compared", NOT_LOGGED):  # among the divergence's lines
            continue
        for part in note_line(n, str(report["job"])).split("\n"):
            console.print(inert_text(part, "dim"))
    imp = report.get("imported_from")
    if imp:
        console.print(inert_text("imported from TORCH_TRACE logs; not in these logs (trace "
                                 "with tuidebug to get them): " + (", ".join(imp["missing"])
                                                                   or "nothing"), "dim"))
    waits = report.get("waits")
    if waits:
        label, style, texts = wait_headings(waits)
        for text in texts:
            console.print(Text(label, style=style) + inert_text(text, style))
        for line in waits["lines"]:
            console.print(inert_text(f"  {line}"))
    judged = report.get("compile_time") or {}
    if judged.get("text"):  # over every compile the ranks share: never a slow rank on one sample
        console.print(inert_text(f"compile time: {judged['text']}",
                                 "yellow" if judged.get("slow") else "dim"))
    for line in slow_rank_lines(report.get("slow_ranks"), report.get("late_rank")):
        console.print(inert_text(line, "yellow" if not line.startswith(" ") else ""))
    problems = report.get("problems") or []
    if problems:
        console.print(Text(f"problems reading the job folder ({len(problems)})", style="bold"))
        for p in problems[:50]:
            console.print(inert_text(f"  {p}", "yellow"))
