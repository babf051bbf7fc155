"""The answer to "is compiled faster, and where does the time go?" as text: the verdict's one
line and the ledger of one compiled call, its parts grouped (a graph called four times is one
row, ×4) with their share of the measured wall time. Shared by ``info`` and the TUI's profile
screen. No torch, no Textual."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.table import Table
from rich.text import Text

from tuidebug.trace.queries.verdict import format_duration as duration
from tuidebug.trace.queries.graph_breaks import SourceLine
from tuidebug.inert import inert_text

_STYLE = {"faster": "bold green", "slower": "bold red", "same": "bold"}
_PART = {"dynamo": "Dynamo", "graph": "graph", "eager_island": "eager island",
         "cudagraph": "CUDA graph", "other": "other"}


@dataclass
class LedgerRow:
    part: str
    what: str
    seconds: float
    count: int
    share: float | None


def verdict_line(v: dict[str, Any]) -> Text:
    """``compiled 1.40× faster than eager (1.35–1.44)`` with its times, spreads and the machine
    (an oversubscribed CPU is said)."""
    c, e = v.get("compiled") or {}, v.get("eager") or {}
    text = Text.assemble(inert_text(str(v.get("text") or ""), _STYLE.get(
        str(v.get("outcome")), "bold")))
    text.append("\n")
    text.append(inert_text(
        f"whole call of {v.get('callable')}{' (forward + backward)' if v.get('training') else ''}"
        f", {v.get('rounds')} rounds interleaved on {v.get('device') or '?'}: compiled "
        f"{duration(c.get('median_s'))} (p10 {duration(c.get('p10_s'))}, p90 "
        f"{duration(c.get('p90_s'))}), eager {duration(e.get('median_s'))} (p10 "
        f"{duration(e.get('p10_s'))}, p90 {duration(e.get('p90_s'))})", "dim"))
    m = v.get("machine") or {}
    if m.get("oversubscribed"):
        text.append("\n")
        text.append(inert_text(
            f"the CPU was oversubscribed (load {m.get('load1')} on {m.get('cores')} cores): "
            f"timed with {m.get('threads')} thread(s) of torch's {m.get('user_threads')}",
            "yellow"))
    return text


def ledger_rows(ledger: list[dict[str, Any]], wall: Any = None) -> list[LedgerRow]:
    """The parts grouped by what they are (a part, its graph or its break), in call order."""
    groups: dict[tuple[str, str], LedgerRow] = {}
    total = sum(float(p.get("seconds") or 0.0) for p in ledger)
    whole = wall if isinstance(wall, (int, float)) and wall > 0 else total
    for p in ledger:
        part = str(p.get("part"))
        bwd = " (backward)" if p.get("phase") == "bwd" else ""
        if part == "eager_island" and p.get("reason") and p.get("line"):
            where = SourceLine(str(p.get("file") or "?"), p.get("line") or 0, "", "").where
            what = f"{p.get('reason')} at {where}{bwd}"
        elif part == "eager_island" and p.get("reason"):
            what = f"{p.get('reason')}{bwd}"
        elif part in ("graph", "cudagraph"):
            # a part whose graph the trace does not hold (a backward compiled past the
            # capture) is named by its compile, never left blank
            what = str(p.get("graph") or (f"compile {p.get('compile_id')}, its graph not "
                                          "recorded" if p.get("compile_id") else "?")) + bwd
        else:
            what = bwd.strip()
        row = groups.setdefault((part, what), LedgerRow(part, what, 0.0, 0, None))
        row.seconds += float(p.get("seconds") or 0.0)
        row.count += 1
    for row in groups.values():
        row.share = row.seconds / whole if whole else None
    return list(groups.values())


def ledger_table(ledger: list[dict[str, Any]], wall: Any = None) -> Table:
    t = Table(title="where one compiled call's time goes", title_justify="left", box=None,
              padding=(0, 1), header_style="dim", pad_edge=False)
    for col in ("part", "what", "calls", "time", "share"):
        t.add_column(col, justify="left" if col in ("part", "what") else "right",
                     no_wrap=col != "what")
    for r in ledger_rows(ledger, wall):
        t.add_row(_PART.get(r.part, r.part), inert_text(r.what), str(r.count),
                  duration(r.seconds), f"{r.share * 100:.0f}%" if r.share is not None else "–")
    return t


def ledger_lines(ledger: list[dict[str, Any]], wall: Any = None) -> list[str]:
    """The grouped ledger as plain lines (the TUI's totals pane)."""
    return [f"{_PART.get(r.part, r.part)}{' ' + r.what if r.what else ''}"
            f"{f' ×{r.count}' if r.count > 1 else ''}: {duration(r.seconds)}"
            + (f" ({r.share * 100:.0f}%)" if r.share is not None else "")
            for r in ledger_rows(ledger, wall)]
