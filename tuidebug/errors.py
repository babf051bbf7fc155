"""Every error tuidebug shows to a user, at the bottom of the package (imports nothing of ours).

Any layer raises these; the CLI (``tuidebug.cli``) catches :class:`TuidebugError` and prints its
message as one line (exit code 2), so no module needs to import the CLI to raise a user error.
The modules that raise them re-export their own (``tuidebug.trace.format.reader.TraceError`` is this
``TraceError``), so either import works.

Errors that are also a built-in kind keep that base (``UnknownFlag`` is a ``LookupError``,
``FlagValueError`` and ``ImportFailed`` are ``ValueError``s), so existing ``except`` clauses hold.
"""

from __future__ import annotations

from pathlib import Path


class TuidebugError(Exception):
    """A user-facing error: its message says what is wrong, in one line."""


class CliError(TuidebugError):
    """A command line that cannot be carried out (bad arguments, missing script, …)."""


# -- trace ----------------------------------------------------------------------------------------

class TraceError(TuidebugError):
    """The path is not a trace that can be opened at all."""


class ImportFailed(TuidebugError, ValueError):
    """The path cannot be imported (not a log, no such rank, output not writable …)."""


class PackError(TuidebugError, ValueError):
    """A trace that cannot be packed (not a trace, output not writable)."""


class UnpackError(TuidebugError, ValueError):
    """An archive that is not a packed trace, or is unsafe, damaged or too large."""


# -- viewers --------------------------------------------------------------------------------------

class ViewerError(TuidebugError):
    """A user-facing error: unknown id, nothing to draw, no Graphviz, layout gave up."""


class DotMissing(ViewerError):
    """Graphviz's ``dot`` is not installed; the ``.dot`` file is kept at ``dot_file``."""

    def __init__(self, message: str, dot_file: Path) -> None:
        super().__init__(message)
        self.dot_file = dot_file


class LayoutFailed(ViewerError):
    """Every layout attempt failed or ran out of time; the ``.dot`` file is kept at ``dot_file``."""

    def __init__(self, message: str, dot_file: Path) -> None:
        super().__init__(message)
        self.dot_file = dot_file


# -- tui ------------------------------------------------------------------------------------------

class ServeError(TuidebugError):
    """The web server cannot start (textual-serve missing, address in use)."""


# -- compiler -------------------------------------------------------------------------------------

class UnknownFlag(TuidebugError, LookupError):
    """A name that is not an Inductor config flag."""


class FlagValueError(TuidebugError, ValueError):
    """A command-line string that is not a valid value for a flag."""


class RecompileError(TuidebugError):
    """Bad input for a recompile (unknown flag, bad value, a trace that cannot be re-run)."""


class NotJudged(RecompileError):
    """``tuidebug numerics`` could not judge: its run recorded no check (exit code 3, not 2)."""


class WorkerError(TuidebugError):
    """The worker process could not be started or keeps dying."""


# -- minify ---------------------------------------------------------------------------------------

class MinifyError(TuidebugError):
    """The trace cannot be minified (it did not fail, has no graph, …); a user error."""
