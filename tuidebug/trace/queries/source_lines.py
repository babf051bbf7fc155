"""The user's source lines a trace captured, by file: what the code screen shows for a kernel's
source line (``s``).

A trace names files of the machine it was made on; reading one here would show whatever this
machine has at that path (``/etc/passwd``, or under ``serve`` the server's files). So source
context comes only from the trace: each kernel's provenance frames (``file``, ``line``,
``code``) of every graph. Never a file the trace names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.provenance import kernel_infos

MAX_CODE = 2000  # characters of one captured line kept
MAX_SPREAD = 100_000  # captured lines are shown at their line numbers up to this one


@dataclass(frozen=True)
class CapturedSource:
    file: str
    lines: dict[int, str]  # line number -> the code the trace captured for it

    def text(self) -> tuple[str, dict[int, int]]:
        """The captured lines at their own line numbers (the lines not captured blank, so a
        gutter numbers them as the file does), and each line number's row. A line number past
        MAX_SPREAD: the captured lines alone, as ``  57  code`` rows in order."""
        if not self.lines:
            return "", {}
        last = max(self.lines)
        if last <= MAX_SPREAD:
            rows = [self.lines.get(n, "") for n in range(1, last + 1)]
            return "\n".join(rows) + "\n", {n: n - 1 for n in self.lines}
        width = len(str(last))
        out = [f"{n:>{width}}  {self.lines[n]}" for n in sorted(self.lines)]
        return "\n".join(out) + "\n", {n: i for i, n in enumerate(sorted(self.lines))}


def _line_no(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 1 << 31 \
        else None


def captured_source(trace: Trace, file: str,
                    prefer: Iterable[dict[str, Any]] = ()) -> CapturedSource:
    """Every line of ``file`` that the trace's provenance captured (its code, as recorded);
    where frames disagree on a line's code, the first of ``prefer`` (the kernel looked at)."""
    lines: dict[int, str] = {}

    def take(frames: Iterable[Any]) -> None:
        for s in frames:
            if not isinstance(s, dict):
                continue
            n = _line_no(s.get("line"))
            code = s.get("code")
            if str(s.get("file")) == file and n is not None and isinstance(code, str):
                lines.setdefault(n, code.rstrip("\n")[:MAX_CODE])

    take(prefer)
    for g in trace.graphs:
        for k in kernel_infos(g):
            take(k.source)
    return CapturedSource(file, lines)
