"""Modal screens: the help screen (every key) and a one-of-many picker (graph, kernel)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from tuidebug.trace.format import safefile
from tuidebug.tui import keymap

def _key(screen: str) -> str:
    return keymap.screen_key(keymap.SCREENS.index(screen))


SCOPE_TITLES = {"app": "Everywhere", "screen": "Every screen",
                "overview": f"Overview ({_key('overview')})", "passes": "Pass stepper (2)",
                "ir": "IR & fusion (3)", "code": "Code (4)",
                "autotune": f"Autotune ({_key('autotune')})", "errors": "Errors (6)",
                "flags": "Flags (7)", "compare": "Compare (8)",
                "shapes": f"Shapes ({_key('shapes')})",
                "profile": f"Profile ({keymap.screen_key(keymap.SCREENS.index('profile'))})",
                "ranks": "Ranks (R)"}


# What a screen shows and what enter does there, for the screens whose keys alone do not say
SCREEN_ABOUT: dict[str, list[tuple[str, str]]] = {
    "overview": [("", "the trace at a glance: graphs, Dynamo compiles, graph breaks (each with "
                      "its cause, line and fix), frames not compiled, the eager check"),
                 ("enter", "on a graph: open it in the pass stepper; on a compile: its "
                           "guards, graph breaks, recompile reasons and cache events")],
    "autotune": [("", "per tuned op (max-autotune), every choice with its config and time or "
                      "error, and the one chosen"),
                 ("up/down", "the op in the list: its choices are shown beside it")],
    "shapes": [("", "the graph's compile: its symbols and ranges, the dimensions it "
                    "specialized, its guards grouped by input, and its function's recompile "
                    "chain (the guard that failed, what would avoid it)"),
               ("enter", "on a symbol: mark the FX nodes that use it (pass stepper); on a guard "
                         "or specialization: the user line that added it, then its FX nodes")],
}


def help_table() -> Group:
    """One heading and one table per scope; the tables share their column widths, and a
    heading spans the whole width (in the 16-column key column it would be cut)."""
    id_width = max(len(k.id) for k in keymap.KEYS)
    sections: list[tuple[str, list[tuple[str, str, str]]]] = [
        (title, [(key, what, "") for key, what in SCREEN_ABOUT.get(scope, [])]
         + [(keymap.display_keys(k.keys), k.help or k.description, k.id)
            for k in keymap.keys_for(scope)])
        for scope, title in SCOPE_TITLES.items()]
    sections.append(("In every list and text view",
                     [(keys, what, "") for keys, what in keymap.VIEW_KEYS]))
    parts: list[Text | Table] = []
    for title, rows in sections:
        parts.append(Text(title, style="bold underline"))
        t = Table(box=None, show_header=False, padding=(0, 2), expand=True)
        t.add_column("key", style="bold cyan", no_wrap=True, width=16)
        t.add_column("what", ratio=1)
        t.add_column("id", style="dim", no_wrap=True, width=id_width)
        for row in rows:
            t.add_row(*row)
        parts.append(t)
        parts.append(Text(""))
    return Group(*parts[:-1])


def dialog_css(screen: str, color: str) -> str:
    """The CSS of a centred dialog ``screen``: a box of 110 columns at most with a thick
    ``color`` border, a bold title label on a tint of it, a body scrolling past 30 lines."""
    return f"""
    {screen} {{ align: center middle; }}
    {screen} > Vertical {{ width: 110; max-width: 100%; height: auto; max-height: 90%;
                          border: thick {color}; background: $surface; }}
    {screen} Label {{ width: 100%; padding: 0 1; background: {color} 30%; text-style: bold; }}
    {screen} VerticalScroll {{ height: auto; max-height: 30; padding: 0 1; }}
    """


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical { width: 110; max-width: 100%; height: 90%; border: thick $primary;
                            background: $surface; }
    HelpScreen Label { width: 100%; padding: 0 1; background: $primary 30%; text-style: bold; }
    HelpScreen VerticalScroll { padding: 0 1; }
    """
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close", id="help.close")]

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Keys  (escape closes; remap any of them by its id with App.set_keymap)")
            with VerticalScroll():
                yield Static(help_table(), id="help-keys")

    def action_dismiss(self, result: None = None) -> None:  # type: ignore[override]
        self.dismiss(None)


class PickScreen(ModalScreen[str | None]):
    """Choose one of ``items`` ((id, label) pairs); dismisses with the id, or None."""

    DEFAULT_CSS = """
    PickScreen { align: center middle; }
    PickScreen > Vertical { width: 90; max-width: 100%; height: auto; max-height: 80%;
                            border: thick $primary; background: $surface; }
    PickScreen Label { width: 100%; padding: 0 1; background: $primary 30%; text-style: bold; }
    PickScreen OptionList { height: auto; max-height: 30; border: none; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="pick.cancel")]

    def __init__(self, title: str, items: list[tuple[str, str]],
                 current: str | None = None) -> None:
        super().__init__()
        self.title_text = title
        self.items = items
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.title_text)
            yield OptionList(*[Option(label, id=i) for i, label in self.items])

    def on_mount(self) -> None:
        ol = self.query_one(OptionList)
        ids = [i for i, _ in self.items]
        if self.current in ids:
            ol.highlighted = ids.index(self.current)
        ol.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


class InputScreen(ModalScreen[str | None]):
    """Ask for one line of text; ``validate(text)`` returns an error to show inline, or None.

    Dismisses with the text once it validates, or None on escape.
    """

    DEFAULT_CSS = """
    InputScreen { align: center middle; }
    InputScreen > Vertical { width: 100; max-width: 100%; height: auto; border: thick $primary;
                             background: $surface; padding: 0 1; }
    InputScreen Label { width: 100%; }
    InputScreen #input-title { background: $primary 30%; text-style: bold; padding: 0 1; }
    InputScreen #input-error { color: $error; text-style: bold; }
    InputScreen #input-hint { color: $text-muted; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="input.cancel")]

    def __init__(self, title: str, value: str = "", hint: str = "",
                 validate: Callable[[str], str | None] | None = None) -> None:
        super().__init__()
        self.title_text = title
        self.value = value
        self.hint = hint
        self.validate = validate

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.title_text, id="input-title")
            if self.hint:
                yield Label(Text(self.hint), id="input-hint")
            yield Input(self.value, id="input-value")
            yield Label("", id="input-error")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        error = self.validate(text) if self.validate else None
        if error:
            self.query_one("#input-error", Label).update(Text(error))
            return
        self.dismiss(text)

    def action_cancel(self) -> None:
        self.dismiss(None)


class TextScreen(ModalScreen[None]):
    """Show a long text (a repro.py, a compile's guards) in a TextView; escape closes."""

    DEFAULT_CSS = """
    TextScreen { align: center middle; }
    TextScreen > Vertical { width: 95%; height: 90%; border: thick $primary;
                            background: $surface; }
    TextScreen Label { width: 100%; padding: 0 1; background: $primary 30%; text-style: bold; }
    TextScreen TextView { height: 1fr; }
    """
    BINDINGS = [Binding("escape,q", "close", "Close", id="file.close")]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text = title
        self.text = text

    @classmethod
    def of_file(cls, path: Path) -> "TextScreen":
        try:  # minify's repro.py: a file of ours, read as any file shown (capped, regular)
            text = safefile.read_text(Path(path))
        except (OSError, safefile.Refused) as e:
            text = f"cannot read {path}: {e}"
        return cls(str(path), text)

    def compose(self) -> ComposeResult:
        from tuidebug.tui.widgets.textview import TextLines, TextView

        with Vertical():
            yield Label(Text(f"{self.title_text}   (escape closes)"))
            yield TextView(TextLines(self.text), gutter=True, id="file-view")

    def on_mount(self) -> None:
        self.query_one("#file-view").focus()

    def action_close(self) -> None:
        self.dismiss(None)
