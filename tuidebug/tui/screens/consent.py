"""The question asked before anything a trace recorded runs (docs/security.md).

``ConfirmScreen(plan_lines)`` shows exactly what will run (``tuidebug.compiler.consent.Plan``:
program, arguments, directory, config overrides, environment, where the trace was made) and
dismisses with True only on ``y``; ``n`` and escape cancel.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from tuidebug.viewers.inert import inert_text


class ConfirmScreen(ModalScreen[bool]):
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical { width: 110; max-width: 100%; height: auto; max-height: 90%;
                               border: thick $warning; background: $surface; }
    ConfirmScreen Label { width: 100%; padding: 0 1; background: $warning 30%;
                          text-style: bold; }
    ConfirmScreen VerticalScroll { height: auto; max-height: 30; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[Binding]] = [
        Binding("y", "answer(True)", "Run it", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "Cancel", id="confirm.no")]

    def __init__(self, lines: list[str], title: str = "Run this?") -> None:
        super().__init__()
        self.lines = lines
        self.title_text = title

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(inert_text(self.title_text))
            with VerticalScroll():
                yield Static(inert_text("\n".join(self.lines), multiline=True), id="confirm-plan")
            yield Static(Text.assemble(("y", "bold"), ": run it    ", ("n", "bold"), " / ",
                                       ("escape", "bold"), ": cancel"), id="confirm-keys")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
