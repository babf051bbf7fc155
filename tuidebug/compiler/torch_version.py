"""Which torch the compiler commands run on, found without importing it.

torch is the user's: tuidebug never installs, upgrades or downgrades it (it is the
``tuidebug[compiler]`` extra, with no upper bound). The viewer commands need no torch at all;
the commands that compile (``trace``, ``demo``, ``flags``, ``recompile``, ``minify``,
``bisect``) call ``require_torch()``: no torch, or one older than tuidebug supports, is a
one-line error that says how to get one; a torch newer than the tested range is a one-line
notice, and the command runs.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import sys

from tuidebug.errors import CliError

MINIMUM = (2, 11)
TESTED = ((2, 11), (2, 15))  # the newest minor version tuidebug has been tested with, inclusive
INSTALL_HINT = ("install torch as you usually do (https://pytorch.org/get-started/locally), "
                "or: pip install 'tuidebug[compiler]'")


def _fmt(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


def installed_torch() -> str | None:
    """The installed torch's version (``2.13.0+cpu``), or None; torch is not imported."""
    if importlib.util.find_spec("torch") is None:
        return None
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"  # importable but without metadata (a source build on the path)


def minor(version: str) -> tuple[int, int] | None:
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else None


def check(version: str | None, command: str) -> str | None:
    """None when ``version`` can run ``command`` silently; a notice (str) when it is newer than
    tested; CliError when there is no torch or it is too old."""
    if version is None:
        raise CliError(f"`tuidebug {command}` needs PyTorch, which is not installed here; "
                       f"{INSTALL_HINT}. (open, info, svg, diff, import, serve and pack work "
                       "without it.)")
    v = minor(version)
    if v is None:
        return None
    if v < MINIMUM:
        raise CliError(f"`tuidebug {command}` needs torch {_fmt(MINIMUM)} or newer; this "
                       f"environment has {version}")
    if v > TESTED[1]:
        return (f"[tuidebug] note: torch {version} is newer than tuidebug is tested with "
                f"({_fmt(TESTED[0])}–{_fmt(TESTED[1])}); it should work: a feature torch "
                "changed says 'not available in torch …'")
    return None


def require_torch(command: str) -> None:
    """Stop ``command`` with a message when torch is missing or too old; note a newer one."""
    notice = check(installed_torch(), command)
    if notice:
        print(notice, file=sys.stderr)
