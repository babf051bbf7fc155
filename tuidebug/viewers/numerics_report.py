"""What ``tuidebug numerics`` prints: the testing-only banner, then per compile its kernels
judged (``numerics_view``, as ``info`` shows them) and the classification of its difference
(``trace.queries.numerics_classes``). No torch."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from tuidebug.inert import inert_text
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.numerics import numerics_summary, testing_only_banner, \
    testing_only_flags
from tuidebug.trace.queries.numerics_classes import CASTS_VERDICT, NONE_DIVERGES, \
    RANDOM_VERDICT, classified
from tuidebug.viewers.numerics_view import numerics_lines

VERDICT_STYLE = {NONE_DIVERGES: "bold green", CASTS_VERDICT: "bold yellow",
                 RANDOM_VERDICT: "bold yellow"}


def numerics_report(trace: Trace) -> list[RenderableType]:
    """The report's lines for a trace made by ``tuidebug numerics`` (or ``trace --numerics``)."""
    out: list[RenderableType] = []
    banner = testing_only_banner(testing_only_flags(trace))
    if banner:
        out.append(inert_text(banner, "bold reverse yellow"))
    classes = classified(trace)
    summary = numerics_summary(trace)
    for cid, entry in summary.items():
        out.append(Text.assemble(("compile ", "dim"), inert_text(cid, "bold")))
        out.extend(numerics_lines(entry))
        c = classes.get(cid)
        if c is None:
            continue
        out.append(Text.assemble(("    classified: ", "bold"),
                                 inert_text(c.verdict, VERDICT_STYLE.get(c.verdict, "bold red")),
                                 inert_text(f" — {c.why}" if c.why else "")))
        for r in c.reruns:
            where = f" ({r.trace})" if r.trace else ""
            out.append(inert_text(f"      {r.flag}=True: {r.outcome}: {r.detail}{where}", "dim"))
    if not summary:
        out.append(Text("no compile's kernels were judged (no accuracy check ran)"))
    return out
