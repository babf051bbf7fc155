"""A bisection in a child process, reported in ``tuidebug.proc``'s JSON lines (the TUI's bisect).

The bisector imports torch, so a caller that must not (the TUI) runs it here::

    task = BisectTask(trace, repro)              # starts ``python -m tuidebug.minify.bisect_task``
    for msg in task.messages():                  # {"event": "progress", "run", "message"}
        ...                                      # then {"event": "result", "result": {...}}
    task.close()                                 #   or {"event": "error", "message"}

``result`` holds the fields of :class:`~tuidebug.minify.bisection.BisectReport`. ``kill()`` stops
the bisection and every run it started. Importing this module does not
import torch; only the child does.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

from tuidebug import proc

__all__ = ["BisectTask"]

FRESH_HINT = ("re-running the traced script for every step; a minified repro (tuidebug minify, "
              "then --repro repro.py) is much faster")


class BisectTask:
    """``tuidebug bisect TRACE [--repro REPRO]`` in a child process (see the module docstring)."""

    def __init__(self, trace: str | os.PathLike[str], repro: str | os.PathLike[str] | None = None,
                 *, timeout: float = 600.0, fresh: bool = False,
                 allowed: dict[str, Any] | None = None) -> None:
        # allowed: {flag: value} the user confirmed by name (values, as JSON)
        request = {"trace": str(trace), "repro": str(repro) if repro else None,
                   "timeout": float(timeout), "fresh": fresh, "allowed": dict(allowed or {})}
        fd, name = tempfile.mkstemp(prefix="tuidebug-bisect-", suffix=".log")
        self.log_path = Path(name)
        self._log = os.fdopen(fd, "wb")
        self.command = [sys.executable, "-m", "tuidebug.minify.bisect_task", json.dumps(request)]
        self.child = proc.JsonChild(self.command, env=proc.child_env(), log=self._log,
                                    requests=False)
        self.cancelled = False

    def messages(self) -> Iterator[dict[str, Any]]:
        """The child's messages until it exits."""
        return self.child.messages()

    def kill(self) -> None:
        """Stop the bisection and every run it started (their process groups are their own: the
        child ends them on SIGTERM, and is killed if it has not exited a few seconds later)."""
        self.cancelled = True
        proc.terminate_group(self.child.proc)

    def close(self) -> int:
        """Wait for the child, remove its log; its return code (negative: killed)."""
        rc = self.child.returncode()
        self.child.kill()
        self._log.close()
        self.log_path.unlink(missing_ok=True)
        return rc

    def log_tail(self, n: int = 20) -> list[str]:
        """The last lines the child wrote on stderr (why it failed without saying so)."""
        try:
            self._log.flush()
            return self.log_path.read_text(errors="replace").splitlines()[-n:]
        except (OSError, ValueError):
            return []


def main(argv: list[str]) -> int:
    out, _ = proc.protocol_stream()
    proc.exit_on_sigterm()  # the runs and workers the bisection started are killed on the way out
    request = json.loads(argv[0])
    from tuidebug.errors import TuidebugError
    from tuidebug.minify.bisection import bisect

    def step(n: int, text: str) -> None:
        proc.write_message(out, {"event": "progress", "run": n, "message": text})

    if not request.get("repro"):
        proc.write_message(out, {"event": "progress", "run": None, "message": FRESH_HINT})
    try:
        report = bisect(request["trace"], request.get("repro"), timeout=request["timeout"],
                        on_step=step, fresh=bool(request.get("fresh")),
                        allowed=request.get("allowed") or {})
    except TuidebugError as e:  # MinifyError, TraceError: one line for the user
        proc.write_message(out, {"event": "error", "message": str(e)})
        return 2
    proc.write_message(out, {"event": "result", "result": dataclasses.asdict(report)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
