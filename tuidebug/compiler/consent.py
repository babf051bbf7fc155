"""Consent before anything a trace recorded runs (docs/security.md).

``recompile``, ``bisect``, ``minify`` and the TUI's recompile re-run what a trace recorded (its
``command`` in its ``cwd`` with its ``config_overrides``) or programs built from it. Before that,
the user sees a ``Plan`` — program, arguments, working directory, config overrides, environment
changes, and where the trace was made when that is not here — and says yes: ``ask`` on a
terminal (``[y/N]``), ``--yes`` for scripts, a refusal with no terminal and no ``--yes``; the
TUI shows ``Plan.lines()`` in a dialog.

Config from the trace that names a program, a path, a module or a callable (``Plan.confirm``,
``trace_config.split``) is applied only when the user confirms each flag by name: ``ask`` makes
the user type the flag's name (``--yes`` never confirms one; ``--allow-flag NAME`` does, for
scripts); the TUI's dialog asks for the name the same way. A flag not confirmed is left out and
named; the run goes on without it.
"""

from __future__ import annotations

import getpass
import os
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TextIO

from tuidebug.compiler.recompile_spec import RecompileSpec
from tuidebug.compiler.trace_config import describe
from tuidebug.errors import TuidebugError
from tuidebug.trace.format.manifest import Manifest
from tuidebug.inert import inert


class NotConfirmed(TuidebugError):
    """The user did not agree to run it (or could not be asked)."""


def made_by() -> dict[str, Any]:
    """Where a trace is being made (the manifest's ``made_by``): host, user, directory."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = None
    return {"host": socket.gethostname(), "user": user, "path": None}


def origin_notes(manifest: Manifest, root: str | os.PathLike[str] | None) -> list[str]:
    """Why this trace may not be the user's own: made on another host, by another user, or
    somewhere else (moved or copied); or it does not say."""
    mb = manifest.made_by
    host = mb.get("host") or manifest.host
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
    confirm: dict[str, Any] = field(default_factory=dict)  # risky flags: applied if named
    left_out: dict[str, str] = field(default_factory=dict)  # config of the trace not applied

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
        if self.left_out:
            out.append("  left out (not applied from the trace): " + "; ".join(
                f"{one(k)} ({one(why)})" for k, why in self.left_out.items()))
        for name, value in self.confirm.items():
            out.append(f"  needs your confirmation by name: {one(name)}={one(describe(value))} "
                       "names a program, path, module or callable; without it, it is left out")
        out += [f"  note: {one(n)}" for n in self.notes]
        return out


def _confirm_names(plan: Plan, yes: bool, tty: bool, stdin: TextIO,
                   stderr: TextIO) -> dict[str, Any]:
    """Ask for each of ``plan.confirm`` to be typed by name (only on a terminal, without
    ``--yes``); {name: value} of those confirmed. The rest are named as left out."""
    confirmed: dict[str, Any] = {}
    for name, value in plan.confirm.items():
        shown = inert(name, multiline=False)
        if tty and not yes:
            print(f"The trace sets {shown}={inert(describe(value), multiline=False)}, which names"
                  f" a program, path, module or callable. Type {shown} to apply it (Enter "
                  "leaves it out): ", end="", file=stderr, flush=True)
            if stdin.readline().strip() == name:
                confirmed[name] = value
                continue
        print(f"  leaving out {shown} (not confirmed by name; --allow-flag {shown} applies it)",
              file=stderr, flush=True)
    return confirmed


def ask(plan: Plan, *, yes: bool, stdin: TextIO | None = None, stderr: TextIO | None = None,
        interactive: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Show ``plan`` and ask on the terminal; ``yes`` answers for the user (still shown).
    Raises ``NotConfirmed`` on no, or with no terminal to ask on and no ``--yes``. Returns the
    flags of ``plan.confirm`` that the user typed by name ({name: value}; never with ``yes``)."""
    stdin = stdin or sys.stdin
    stderr = stderr or sys.stderr
    for line in plan.lines():
        print(line, file=stderr)
    tty = bool(interactive() if interactive else (stdin and stdin.isatty()))
    if not yes and not tty:
        raise NotConfirmed(f"not running it: there is no terminal to ask on; pass --yes to "
                           f"{plan.action} without being asked")
    confirmed = _confirm_names(plan, yes, tty, stdin, stderr)
    if yes:
        print("  (--yes: running it)", file=stderr, flush=True)
        return confirmed
    print("Run it? [y/N] ", end="", file=stderr, flush=True)
    answer = stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise NotConfirmed("not running it (answered no)")
    return confirmed


def spec_plan(spec: RecompileSpec, manifest: Manifest | None = None) -> Plan:
    """The plan of a recompile job (``recompile.recompile_spec``): the trace's script re-run in
    a child of tuidebug's worker, with the overrides and environment of the spec."""
    root = spec.source_trace
    notes = origin_notes(manifest or Manifest(), root) if root else []
    return Plan("recompile", sys.executable, [spec.script, *spec.args], spec.cwd,
                dict(spec.overrides), dict(spec.env), notes, dict(spec.confirm),
                dict(spec.left_out))
