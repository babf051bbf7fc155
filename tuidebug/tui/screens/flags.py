"""Flags: every Inductor config flag, its value in this trace, and a recompile with new values.

The registry is read from the installed ``torch/_inductor/config.py`` without importing torch
(in a worker thread). Recompiles run in the app's warm ``RecompileWorker`` (a separate process),
into a new trace directory: the trace on display is never modified.
"""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Static
from textual.widgets.option_list import Option

from tuidebug.trace.format.reader import GraphRecord
from tuidebug.tui import keymap
from tuidebug.tui.messages import Read
from tuidebug.tui.screens.base import TraceScreen
from tuidebug.tui.screens.modals import InputScreen
from tuidebug.tui.widgets.lists import PickList

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_MISSING = object()


def value_text(v: Any) -> str:
    if v is _MISSING:
        return "?"
    if isinstance(v, str):
        return repr(v)
    try:
        return json.dumps(v)
    except (TypeError, ValueError):
        return str(v)


class FlagsScreen(TraceScreen):
    class RegistryRead(Read):
        """Every Inductor flag with its documentation (key: None)."""

        data: Any  # tuidebug.compiler.flags.Registry (imported lazily)

    SCREEN_NAME = "flags"
    BINDINGS = keymap.bindings("flags")
    DEFAULT_CSS = """
    FlagsScreen #flag-filter { height: 3; }
    FlagsScreen #flags-main { height: 1fr; }
    FlagsScreen #flag-list { width: 3fr; }
    FlagsScreen #flag-side { width: 2fr; border-left: solid $primary 40%; }
    FlagsScreen #flag-doc { height: 1fr; padding: 0 1; overflow-y: auto; }
    FlagsScreen #flag-pending { height: auto; max-height: 10; padding: 0 1;
                                border-top: solid $primary 40%; }
    FlagsScreen #flag-status { height: auto; max-height: 8; padding: 0 1; background: $boost; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.registry: Any = None
        self.shown: list[Any] = []
        self._loaded = False
        self._spin = 0
        self._timer: Any = None

    def compose_body(self) -> ComposeResult:
        yield Input(placeholder="filter flags (name or doc; globs like triton.*)", id="flag-filter")
        with Horizontal(id="flags-main"):
            yield PickList(id="flag-list")
            with Vertical(id="flag-side"):
                yield Static("reading torch/_inductor/config.py…", id="flag-doc")
                yield Static("", id="flag-pending")
        yield Static("", id="flag-status")

    # -- state kept on the app (shared with the compare screen) ----------------------------------

    @property
    def pending(self) -> dict[str, Any]:
        return self.app.pending_flags  # type: ignore[attr-defined]

    def is_loaded(self) -> bool:
        return self._loaded

    def show_graph(self, g: GraphRecord | None) -> None:
        from tuidebug.compiler.flags import load_registry

        self.load(self.RegistryRead, None, load_registry)
        self.app.warm_worker()  # type: ignore[attr-defined]
        self._show_pending()
        self.update_status()

    def on_flags_screen_registry_read(self, message: FlagsScreen.RegistryRead) -> None:
        self._loaded = True
        self.registry = message.data
        self._fill(self.query_one("#flag-filter", Input).value)
        self.query_one("#flag-list", PickList).focus()

    # -- the list --------------------------------------------------------------------------------

    def current_values(self) -> dict[str, Any]:
        return dict((self.trace.config or {}).get("values") or {})

    def _row(self, f: Any, values: dict[str, Any]) -> Text:
        value = values.get(f.name, _MISSING)
        default = f.default if f.default_known else _MISSING
        changed = value is not _MISSING and default is not _MISSING and value != default
        t = Text()
        t.append("* " if changed else "  ", "bold yellow")
        t.append(f"{f.name:<40.40} ", "bold" if changed else "")
        t.append(f"{f.type:<12.12} ", "dim")
        t.append(f"{value_text(value):<12.12}", "yellow" if changed else "")
        shown = value_text(default) if f.default_known else "(computed)"
        t.append(f" default {shown:<11.11}", "dim")
        if f.name in self.pending:
            t.append(f"  → {value_text(self.pending[f.name])}", "bold green")
        t.no_wrap = True
        t.overflow = "ellipsis"
        return t

    def _fill(self, pattern: str) -> None:
        if self.registry is None:
            return
        flags = self.registry.search(pattern) if pattern else list(self.registry)
        self.shown = flags
        values = self.current_values()
        lst = self.query_one("#flag-list", PickList)
        lst.set_items([Option(self._row(f, values), id=f.name) for f in flags])
        if not flags:
            self.set_text("#flag-doc", Text(f"no flag matches {pattern!r}", style="dim"))
        else:
            self._show_doc(flags[0])

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "flag-filter":
            event.stop()
            self._fill(event.value.strip())

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "flag-filter":
            event.stop()
            self.query_one("#flag-list", PickList).focus()

    def on_option_list_option_highlighted(self, event: PickList.OptionHighlighted) -> None:
        f = self._flag(event.option.id)
        if f is not None:
            self._show_doc(f)

    def on_option_list_option_selected(self, event: PickList.OptionSelected) -> None:
        event.stop()
        self.action_edit_flag()

    def _flag(self, name: str | None) -> Any:
        if self.registry is None or not name:
            return None
        return self.registry.flags.get(name)

    def selected(self) -> Any:
        lst = self.query_one("#flag-list", PickList)
        if lst.highlighted is None or not lst.option_count:
            return None
        return self._flag(lst.get_option_at_index(lst.highlighted).id)

    def _show_doc(self, f: Any) -> None:
        values = self.current_values()
        t = Text()
        t.append(f.name + "\n", "bold cyan")
        t.append("type     ", "dim").append(f.type + "\n")
        t.append("value    ", "dim").append(value_text(values.get(f.name, _MISSING)) + "\n")
        default = value_text(f.default) if f.default_known else f"{f.default_repr} (computed)"
        t.append("default  ", "dim").append(default + "\n")
        if f.choices:
            t.append("choices  ", "dim").append(", ".join(value_text(c) for c in f.choices) + "\n")
        env = ", ".join(f.env) if f.env else "—"
        t.append("env      ", "dim").append(env + "\n")
        if f.name in self.pending:
            t.append("pending  ", "dim").append(value_text(self.pending[f.name]) + "\n",
                                                "bold green")
        t.append("\n")
        t.append(f.doc or "(no documentation in config.py)", "" if f.doc else "dim italic")
        self.set_text("#flag-doc", t)

    def _refresh_row(self, name: str) -> None:
        lst = self.query_one("#flag-list", PickList)
        f = self._flag(name)
        i = lst.index_of(name)
        if f is not None and i is not None:
            lst.replace_option_prompt_at_index(i, self._row(f, self.current_values()))
            self._show_doc(f)

    def _show_pending(self) -> None:
        if not self.pending:
            self.query_one("#flag-pending", Static).update(Text("no pending change (s: set the selected flag)",
                                                style="dim"))
            return
        t = Text("pending changes (r: recompile)\n", style="bold")
        for name, v in self.pending.items():
            t.append(f"  {name} = {value_text(v)}\n", "green")
        t.rstrip()
        self.query_one("#flag-pending", Static).update(t)

    # -- actions ---------------------------------------------------------------------------------

    def action_focus_filter(self) -> None:
        self.query_one("#flag-filter", Input).focus()

    def action_edit_flag(self) -> None:
        f = self.selected()
        if f is None:
            self.notify("no flag selected", severity="warning")
            return
        registry = self.registry
        current = self.pending.get(f.name, self.current_values().get(f.name, f.default))

        def validate(text: str) -> str | None:
            try:
                registry.parse_value(f.name, text)
            except Exception as e:  # FlagValueError / UnknownFlag: shown inline
                return str(e)
            return None

        def done(text: str | None) -> None:
            if text is None:
                return
            self.pending[f.name] = registry.parse_value(f.name, text)
            self._refresh_row(f.name)
            self._show_pending()

        initial = current if isinstance(current, str) else value_text(current)
        hint = f"{f.type}" + (f"  choices: {', '.join(map(value_text, f.choices))}"
                              if f.choices else "") + "   enter: set, escape: cancel"
        self.app.push_screen(InputScreen(f"Set {f.name}", initial, hint, validate), done)

    def action_unset_flag(self) -> None:
        f = self.selected()
        if f is not None and self.pending.pop(f.name, _MISSING) is not _MISSING:
            self._refresh_row(f.name)
            self._show_pending()

    def action_recompile(self) -> None:
        if not self.pending:
            self.notify("no pending change: set a flag first (s)", severity="warning")
            return
        self.app.start_recompile(dict(self.pending))  # type: ignore[attr-defined]

    def action_cancel_recompile(self) -> None:
        self.app.cancel_recompile()  # type: ignore[attr-defined]

    # -- progress --------------------------------------------------------------------------------

    def worker_line(self) -> Text:
        """``worker: starting… (importing torch, warming up)`` / ``worker: ready …``"""
        app: Any = self.app
        state = app.worker_state()
        t = Text("worker: ", style="dim")
        if state == "starting":
            t.append(SPINNER[self._spin % len(SPINNER)] + " starting… ", "bold cyan")
            t.append("(importing torch and warming up, in its own process; the first "
                     "recompile waits for it)", "dim")
        elif state == "ready":
            info = app.recompile_worker.info or {}
            t.append("ready", "bold green")
            took = sum(v for k, v in info.items() if k in ("import_s", "warmup_s")
                       and isinstance(v, (int, float)))
            details = [f"torch {info['torch']}" if info.get("torch") else "",
                       f"started in {took:.1f}s" if took else ""]
            if any(details):
                t.append(f" ({', '.join(d for d in details if d)})", "dim")
            prime = getattr(app, "prime_job", None)
            if prime is not None:
                t.append("   kernel cache: ", "dim")
                t.append("filling (recompiling this trace unchanged)…" if not prime.done else
                         "filled: a change recompiles only the kernels it changes"
                         if prime.state == "ok" else f"not filled ({prime.state})",
                         "cyan" if not prime.done else "dim")
        elif state == "error":
            t.append(f"cannot start: {app.worker_error}", "bold red")
        else:
            t.append("not started (r starts it)", "dim")
        return t

    def update_status(self) -> None:
        job = getattr(self.app, "recompile_job", None)
        starting = self.app.worker_state() == "starting"  # type: ignore[attr-defined]
        if job is None:
            t = Text("r: recompile with the pending changes (in a warm worker process)\n",
                     style="dim")
            t.append_text(self.worker_line())
            self.query_one("#flag-status", Static).update(t)
            if starting:
                self._start_timer()
            else:
                self._stop_timer()
            return
        t = Text()
        if not job.done:
            t.append(SPINNER[self._spin % len(SPINNER)] + " ", "bold cyan")
            self._start_timer()
        elif starting:  # the worker restarts after a crash
            self._start_timer()
        else:
            self._stop_timer()
        style = {"ok": "bold green", "running": "bold", "queued": "dim"}.get(job.state, "bold red")
        t.append(job.summary(), style)
        for msg in job.messages[-4:]:
            t.append("\n  " + msg, "dim")
        if job.done:
            t.append("\n")
            t.append_text(self.worker_line())
        self.query_one("#flag-status", Static).update(t)

    def _start_timer(self) -> None:
        if self._timer is None:
            self._timer = self.set_interval(0.15, self._tick)

    def _tick(self) -> None:
        self._spin += 1
        self.update_status()

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
