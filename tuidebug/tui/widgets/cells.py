"""How many terminal columns a line takes: a wide character (CJK, most emoji) takes two, so a
line's length is not its width (a view as wide as its lines' lengths could not scroll the end
of a CJK line into view)."""

from __future__ import annotations

from typing import Iterable

from rich.cells import cell_len


def line_cells(line: str) -> int:
    """The columns ``line`` is drawn across (its length where it is ASCII: the common case,
    counted at C speed)."""
    return len(line) if line.isascii() else cell_len(line)


def widest(lines: Iterable[str]) -> int:
    """The columns the widest of ``lines`` takes (0 for none)."""
    return max(map(line_cells, lines), default=0)
