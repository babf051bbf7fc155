"""The error-site hint the overview and the errors screen show: how far compilation got, the
"compiler error is in kernel K" line, and enter on it opening that kernel."""

from __future__ import annotations

from rich.style import Style
from rich.table import Table
from rich.text import Text

from tuidebug.trace.format import schema
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries import failure
from tuidebug.tui.messages import ShowKernel
from tuidebug.tui.screens.base import TraceScreen
from tuidebug.tui.widgets.textview import TextView


def progress_line(trace: Trace, report: failure.ErrorReport) -> Text:
    """``dynamo ✓ → pre_grad ✓ → … → kernel_compile ✗ → runtime ·`` (an accuracy failure:
    every phase ✓, then ``accuracy ✗``)"""
    t = Text()
    failed = report.status in (schema.STATUS_FAILED, schema.STATUS_CRASHED)
    for i, ph in enumerate(report.phases):
        if i:
            t.append(" → ", style="dim")
        if ph in report.phases_done or (ph == report.phase and report.status == schema.STATUS_OK):
            t.append(f"{ph} ✓", style="green")
        elif ph == report.phase and failed:
            t.append(f"{ph} ✗", style="bold red")
        elif ph == report.phase:
            t.append(f"{ph} …", style="yellow")
        else:
            t.append(f"{ph} ·", style="dim")
    return t


SITE_META = "tuidebug_error_site"  # marks the lines of the error-site hint, however it wraps


def hint(text: Text | str, style: str = "") -> Table:
    """``  → TEXT``, a long text wrapping under itself, not under the arrow."""
    t = Table.grid()
    t.add_column(no_wrap=True)
    t.add_column()
    t.add_row(Text("  → ", style="bold yellow"),
              text if isinstance(text, Text) else Text(text, style=style))
    return t


def site_hint(report: failure.ErrorReport) -> Table:
    """``  → the compiler error is in kernel K (graph), line N: CODE   — enter opens it``; every
    line it wraps to is marked (enter on any of them opens the kernel)."""
    s = report.site
    text = (f"the compiler error is in kernel {s.kernel} ({s.graph}), line {s.line}: "
            f"{s.code}   — enter opens it" if s else "")
    return hint(Text(text, style=Style(bold=True, meta={SITE_META: True})))


def is_site_line(line: Text) -> bool:
    return any(isinstance(s.style, Style) and s.style.meta.get(SITE_META) for s in line.spans)


def site_cursor(lines: list[Text]) -> int:
    """Where a view of these lines starts its cursor: on the error-site hint, if there is one
    (enter opens the kernel), else on the first line."""
    return next((i for i, line in enumerate(lines) if is_site_line(line)), 0)


def open_error_site(screen: TraceScreen, event: TextView.Activated) -> bool:
    """Enter on any line of the "compiler error is in kernel …" hint opens that kernel there."""
    line = event.view.source.rich(event.index)
    if not is_site_line(line):
        return False
    site = failure.error_report(screen.trace).site
    if site is None:
        return False
    screen.app.post_message(ShowKernel(site.graph, site.kernel, site.line))
    return True
