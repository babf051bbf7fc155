"""What every command prints through: the one-line error and the rich console."""

from __future__ import annotations

import sys
from typing import Any


def err(msg: str) -> None:
    """``tuidebug: error: MSG`` on stderr."""
    from tuidebug.inert import inert

    print(f"tuidebug: error: {inert(msg)}", file=sys.stderr)  # may quote the data


def note(msg: str) -> None:
    """``[tuidebug] MSG`` on stderr: what was done on the way (unpacked, imported…)."""
    from tuidebug.inert import inert

    print(f"[tuidebug] {inert(msg)}", file=sys.stderr)  # names what the data named


def console() -> Any:
    """A rich console on stdout (imported when a command prints a table): on a terminal it
    wraps at the terminal's width; on a pipe or a file each thing printed is as wide as it needs
    (``pipe_console``), unless ``COLUMNS`` names a width."""
    import os

    if sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit():
        from rich.console import Console

        return Console()
    from tuidebug.cli.pipe_console import PipeConsole

    return PipeConsole()
