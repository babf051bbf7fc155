"""What ``tuidebug numerics`` prints: the testing-only banner, then per compile its kernels
judged and the classification of its difference (``numerics_view``, as ``info`` shows them).
No torch."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from tuidebug.inert import inert_text
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.numerics import numerics_summary, testing_only_banner, \
    testing_only_flags
from tuidebug.viewers.numerics_view import numerics_lines


def numerics_report(trace: Trace) -> list[RenderableType]:
    """The report's lines for a trace made by ``tuidebug numerics`` (or ``trace --numerics``)."""
    out: list[RenderableType] = []
    banner = testing_only_banner(testing_only_flags(trace))
    if banner:
        out.append(inert_text(banner, "bold reverse yellow"))
    summary = numerics_summary(trace)
    for cid, entry in summary.items():
        out.append(Text.assemble(("compile ", "dim"), inert_text(cid, "bold")))
        out.extend(numerics_lines(entry))
    if not summary:
        out.append(Text("no compile's kernels were judged (no accuracy check ran)"))
    return out
