"""The user's source lines a trace captured, by file: what the code screen shows for a kernel's
source line (``s``).

A trace names files of the machine it was made on; reading one here would show whatever this
machine has at that path (``/etc/passwd``, or under ``serve`` the server's files). So source
context comes only from the trace: each kernel's provenance frames (``file``, ``line``,
``code``) of every graph. Never a file the trace names.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.provenance import kernel_infos

MAX_CODE = 2000  # characters of one captured line kept


@dataclass(frozen=True)
class CapturedSource:
    file: str
    lines: dict[int, str]  # line number -> the code the trace captured for it

    def text(self) -> tuple[str, dict[int, int]]:
        """The captured lines as ``  57  code`` rows in line order, and each line number's
        row."""
        rows: list[str] = []
        where: dict[int, int] = {}
        width = len(str(max(self.lines))) if self.lines else 1
        prev = None
        for n in sorted(self.lines):
            if prev is not None and n > prev + 1:
                rows.append(f"{'…':>{width}}")
            where[n] = len(rows)
            rows.append(f"{n:>{width}}  {self.lines[n]}")
            prev = n
        return "\n".join(rows) + ("\n" if rows else ""), where


def _line_no(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 1 << 31 \
        else None


def captured_source(trace: Trace, file: str) -> CapturedSource:
    """Every line of ``file`` that the trace's provenance captured (its code, as recorded)."""
    lines: dict[int, str] = {}
    for g in trace.graphs:
        for k in kernel_infos(g):
            for s in k.source:
                n = _line_no(s.get("line"))
                code = s.get("code")
                if str(s.get("file")) == file and n is not None and isinstance(code, str):
                    lines.setdefault(n, code.rstrip("\n")[:MAX_CODE])
    return CapturedSource(file, lines)
