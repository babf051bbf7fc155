"""What every command prints through: the one-line error and the rich console."""

from __future__ import annotations

import sys
from typing import Any


def err(msg: str) -> None:
    """``tuidebug: error: MSG`` on stderr."""
    print(f"tuidebug: error: {msg}", file=sys.stderr)


def note(msg: str) -> None:
    """``[tuidebug] MSG`` on stderr: what was done on the way (unpacked, imported…)."""
    print(f"[tuidebug] {msg}", file=sys.stderr)


def console() -> Any:
    """A rich console on stdout (imported when a command prints a table)."""
    from rich.console import Console

    return Console()
