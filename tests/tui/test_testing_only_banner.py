"""A trace whose config sets a ``*_TESTING_ONLY`` flag (a planted bug) says so at the top of
every view: ``info``, every screen of the TUI (its title bar; the served page is this app),
``tuidebug numerics``'s report — and a trace without one says nothing of the kind. The SVG's
title is checked with a real compile in tests/compiler/test_numerics.py."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console
from rich.text import Text

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.summary import trace_summary
from tuidebug.tui.keymap import SCREENS, screen_key
from tuidebug.viewers.info import render_summary
from tuidebug.viewers.numerics_report import numerics_report


def _info(trace: Path) -> list[str]:
    out = io.StringIO()
    render_summary(trace_summary(Trace(trace)), Console(file=out, width=200, color_system=None))
    return out.getvalue().splitlines()


def test_info_and_the_numerics_report_say_it_first(accuracy_trace: Path,
                                                   mlp_trace: Path) -> None:
    banner = "TESTING-ONLY flag set: cpp.inject_relu_bug_TESTING_ONLY='accuracy'"
    assert _info(accuracy_trace)[1].startswith(banner), _info(accuracy_trace)[:3]
    first = numerics_report(Trace(accuracy_trace))[0]
    assert isinstance(first, Text) and first.plain.startswith(banner)
    assert not any("TESTING-ONLY" in line for line in _info(mlp_trace))


async def test_every_tui_screen_says_it_in_its_title_bar(open_ui, accuracy_trace: Path,
                                                         mlp_trace: Path) -> None:
    seen = []
    async with open_ui(accuracy_trace, size=(220, 40)) as ui:
        for i, name in enumerate(SCREENS):
            await ui.press(screen_key(i))
            await ui.settle()
            title = ui.text().splitlines()[0]
            assert "TESTING-ONLY FLAG" in title, (name, title)
            seen.append(name)
    assert seen == list(SCREENS)
    async with open_ui(mlp_trace, size=(220, 40)) as ui:
        assert "TESTING-ONLY" not in ui.text().splitlines()[0]
