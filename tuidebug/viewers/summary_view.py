"""The pieces of a trace's summary that both `info` (viewers/info.py) and the TUI's overview
(tui/screens/overview.py) show, rendered once: the error line, where an imported trace came from,
and each eager accuracy check with its table of outputs. Every string from the trace goes through
the inert renderer."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from tuidebug.inert import inert_text
from tuidebug.trace.format import schema
from tuidebug.trace.queries.verdict import format_duration
from tuidebug.viewers.summary_text import (
    ACCURACY_COLUMNS, accuracy_notes, accuracy_rows, accuracy_verdict,
)

VERDICT_STYLE = {"match": "green", "MISMATCH": "bold red"}
# beside the compiled first call's one time: what it is not, and where the comparison is
FIRST_CALL_NOTE = "timed once (--profile compares compiled with eager)"


def error_line(kind: Any, message: Any, *, where: str = "") -> Text:
    """``error  WHERE: TYPE: the message's first line`` (at most 300 characters of it)."""
    first = (str(message or "").strip().splitlines() or [""])[0][:300]
    return Text.assemble(("error  ", "bold red"), inert_text(f"{where}: " if where else ""),
                         inert_text(kind, "red"), ": " if first else "", inert_text(first))


def imported_renderables(imp: dict[str, Any] | None) -> list[Text]:
    """``imported from KIND: PATH   rank R of 0, 1`` and a line for each thing its source does
    not hold; nothing for a captured trace."""
    if not imp:
        return []
    head = Text.assemble(("imported from ", "dim"), inert_text(f"{imp.get('kind')}: "),
                         inert_text(imp.get("path"), "bold"))
    ranks = imp.get("ranks") if isinstance(imp.get("ranks"), list) else []
    if imp.get("rank") is not None:
        head.append_text(inert_text(f"   rank {imp['rank']}"))
        if len(ranks) > 1:
            head.append_text(inert_text(f" of {', '.join(map(str, ranks))}"))
    return [head] + [inert_text(f"  {what}: {schema.NOT_IN_LOG}", "dim")
                     for what in imp.get("missing") or []]


def accuracy_renderables(cid: str, check: dict[str, Any]) -> list[RenderableType]:
    """One eager check of runtime.json: ``  eager check CID: VERDICT  why   compiled first
    call T, timed once (--profile compares compiled with eager)``, then (when compared) its
    outputs, failing first, indented under it. The check's eager re-run is not shown beside it:
    both are one cold call each, no spread (on a GPU not even synchronized), and the eager one
    pays its one-time warm-up, so side by side they read as a speed-up that was never
    measured; whether compiled is faster is the whole call's verdict (``--profile``)."""
    verdict, why = accuracy_verdict(check)
    times = (f"   compiled first call {format_duration(check.get('first_call_s'))}, "
             f"{FIRST_CALL_NOTE}" if check.get("eager_s") is not None else "")
    out: list[RenderableType] = [Text.assemble(
        inert_text(f"  eager check {cid}: "), (verdict, VERDICT_STYLE.get(verdict, "dim")),
        inert_text(f"  {why}{times}"))]
    rows = accuracy_rows(check)
    if rows and verdict != "not compared":
        t = Table(box=None, padding=(0, 1), header_style="dim", pad_edge=False)
        for i, col in enumerate(ACCURACY_COLUMNS):
            # only the name folds (a cache entry's path is long); a number, a shape or a
            # header split over two lines (``compiled↔fp6`` / ``4``) cannot be read
            t.add_column(col, overflow="fold", no_wrap=i > 0)
        for r in rows:
            t.add_row(*map(inert_text, r), style="red" if r[-1] == "FAIL" else None)
        out.append(Padding(t, (0, 0, 0, 4)))
        out += [inert_text(f"    —{mark} no float64 reference: {why}", "dim")
                for mark, why in accuracy_notes(check)]
    return out
