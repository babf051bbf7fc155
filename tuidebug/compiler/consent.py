"""Consent before anything a trace recorded runs (docs/security.md).

``recompile``, ``bisect``, ``minify`` and the TUI's recompile re-run what a trace recorded (its
``command`` in its ``cwd`` with its ``config_overrides``) or programs built from it. Before that,
the user sees a ``Plan`` — program, arguments, working directory, config overrides, environment
changes, and where the trace was made when that is not here — and says yes: ``ask`` on a
terminal (``[y/N]``), ``--yes`` for scripts, a refusal with no terminal and no ``--yes``; the
TUI shows ``Plan.lines()`` in a dialog.
"""

from __future__ import annotations

import getpass
import os
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TextIO

from tuidebug.errors import TuidebugError
from tuidebug.viewers.inert import inert


class NotConfirmed(TuidebugError):
    """The user did not agree to run it (or could not be asked)."""


def made_by() -> dict[str, Any]:
    """Where a trace is being made (the manifest's ``made_by``): host, user, directory."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = None
    return {"host": socket.gethostname(), "user": user, "path": None}


def origin_notes(manifest: dict[str, Any], root: str | os.PathLike[str] | None) -> list[str]:
    """Why this trace may not be the user's own: made on another host, by another user, or
    somewhere else (moved or copied); or it does not say."""
    mb = manifest.get("made_by") if isinstance(manifest.get("made_by"), dict) else {}
    host = mb.get("host") or manifest.get("host")
    notes = []
    if not mb and not host:
        notes.append("this trace does not say where it was made")
    if host and host != socket.gethostname():
        notes.append(f"this trace was made on another host ({inert(host, multiline=False)})")
    user = mb.get("user")
    try:
        me = getpass.getuser()
    except (KeyError, OSError):
        me = None
    if user and me and user != me:
        notes.append(f"this trace was made by another user ({inert(user, multiline=False)})")
    path = mb.get("path")
    if path and root is not None and str(Path(root).resolve()) != str(path):
        notes.append(f"this trace was made in {inert(path, multiline=False)} and has been moved "
                     "or copied here")
    return notes


@dataclass
class Plan:
    """What will run, as the user is shown it."""

    action: str  # "recompile", "bisect", "minify"
    program: str
    args: list[str]
    cwd: str
    overrides: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # origin and anything else to know

    def lines(self) -> list[str]:
        """The plan as lines of inert text (for a prompt or a dialog)."""
        one = lambda v: inert(v, multiline=False)  # noqa: E731
        out = [f"tuidebug {self.action} will run:",
               f"  program:     {one(self.program)}",
               f"  arguments:   {' '.join(one(a) for a in self.args) or '(none)'}",
               f"  directory:   {one(self.cwd)}"]
        if self.overrides:
            out.append("  Inductor config: " + ", ".join(
                f"{one(k)}={one(repr(v))}" for k, v in self.overrides.items()))
        else:
            out.append("  Inductor config: no overrides")
        if self.env:
            out.append("  environment: " + ", ".join(f"{one(k)}={one(v)}"
                                                      for k, v in self.env.items()))
        out += [f"  note: {one(n)}" for n in self.notes]
        return out


def ask(plan: Plan, *, yes: bool, stdin: TextIO | None = None, stderr: TextIO | None = None,
        interactive: Callable[[], bool] | None = None) -> None:
    """Show ``plan`` and ask on the terminal; ``yes`` answers for the user (still shown).
    Raises ``NotConfirmed`` on no, or with no terminal to ask on and no ``--yes``."""
    stdin = stdin or sys.stdin
    stderr = stderr or sys.stderr
    for line in plan.lines():
        print(line, file=stderr)
    if yes:
        print("  (--yes: running it)", file=stderr, flush=True)
        return
    tty = interactive() if interactive else bool(stdin and stdin.isatty())
    if not tty:
        raise NotConfirmed(f"not running it: there is no terminal to ask on; pass --yes to "
                           f"{plan.action} without being asked")
    print("Run it? [y/N] ", end="", file=stderr, flush=True)
    answer = stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise NotConfirmed("not running it (answered no)")


def spec_plan(spec: dict[str, Any], manifest: dict[str, Any] | None = None) -> Plan:
    """The plan of a recompile job (``recompile.recompile_spec``): the trace's script re-run in
    a child of tuidebug's worker, with the overrides and environment of the spec."""
    root = spec.get("source_trace")
    notes = origin_notes(manifest or {}, root) if root else []
    return Plan("recompile", sys.executable, [str(spec.get("script")), *map(str, spec.get("args")
                                                                           or [])],
                str(spec.get("cwd")), dict(spec.get("overrides") or {}),
                {str(k): str(v) for k, v in (spec.get("env") or {}).items()}, notes)
