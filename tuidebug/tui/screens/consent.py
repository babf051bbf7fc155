"""The question asked before anything a trace recorded runs (docs/security.md).

``ConfirmScreen(plan_lines, title, confirm)`` shows exactly what will run
(``tuidebug.compiler.consent.Plan``: program, arguments, directory, config overrides,
environment, where the trace was made) and dismisses with an ``Answer``: true only on ``y`` (or
enter in a name field); ``n`` and escape cancel.

``confirm`` ({flag: value}, ``Plan.confirm``) holds the trace's flags that name a program, path,
module or callable. Each gets a field: the flag is applied only when the user types its name
there (``Answer.names``); otherwise it is left out and the run goes on without it. The fields
are not focused at first, so ``y`` never types into one (tab reaches them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from tuidebug.compiler.trace_config import describe
from tuidebug.inert import inert, inert_text
from tuidebug.tui.screens.modals import dialog_css


@dataclass
class Answer:
    """The user's answer: ``yes`` (also its truth value) and the risky flags confirmed by
    typing their names ({name: value})."""

    yes: bool
    names: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.yes


class ConfirmScreen(ModalScreen[Answer]):
    DEFAULT_CSS = dialog_css("ConfirmScreen", "$warning") + """
    ConfirmScreen .confirm-flag { padding: 0 1; color: $warning; }
    ConfirmScreen Input { margin: 0 1; }
    """
    AUTO_FOCUS = None  # y must answer, not type into a name field
    BINDINGS: ClassVar[list[Binding]] = [
        Binding("y", "answer(True)", "Run it", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "Cancel", id="confirm.no")]

    def __init__(self, lines: list[str], title: str = "Run this?",
                 confirm: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self.lines = lines
        self.title_text = title
        self.confirm = dict(confirm or {})

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(inert_text(self.title_text))
            with VerticalScroll():
                yield Static(inert_text("\n".join(self.lines), multiline=True), id="confirm-plan")
            for i, (name, value) in enumerate(self.confirm.items()):
                shown = inert(name, multiline=False)
                yield Static(inert_text(
                    f"The trace sets {shown}={inert(describe(value), multiline=False)}, which "
                    f"names a program, path, module or callable: type {shown} below to apply "
                    "it, or leave it empty to leave it out."), classes="confirm-flag")
                yield Input(placeholder=f"type {shown} to apply it", id=f"confirm-name-{i}")
            keys = [("y", "bold"), ": run it    ", ("n", "bold"), " / ", ("escape", "bold"),
                    ": cancel"]
            if self.confirm:
                keys += ["    ", ("tab", "bold"), ": a name field (", ("enter", "bold"),
                         " there runs it)"]
            yield Static(Text.assemble(*keys), id="confirm-keys")

    def typed(self) -> dict[str, Any]:
        """The flags whose names were typed exactly in their fields ({name: value})."""
        out = {}
        for i, (name, value) in enumerate(self.confirm.items()):
            if self.query_one(f"#confirm-name-{i}", Input).value.strip() == name:
                out[name] = value
        return out

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_answer(True)

    def action_answer(self, yes: bool) -> None:
        self.dismiss(Answer(yes, self.typed() if yes else {}))
