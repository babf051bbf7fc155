"""The rich console a command prints through when its output goes to a pipe or a file.

On a terminal rich wraps at the terminal's width. On a pipe it wraps at 80 columns (or at the
width of a terminal on stdin), which splits a location (``modeling_utils.py:4761`` became
``…:476`` and ``1``) and cuts table cells with ``…``: ``grep`` and a copy miss them. Here each
thing printed is laid out as wide as it needs (a table at its natural width, a panel round its
longest line), up to ``PIPE_WIDTH``, so nothing is wrapped, cut or padded to a width no screen has.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.errors import MarkupError, NotRenderableError
from rich.measure import Measurement

# the widest line laid out on a pipe: where a line this long (none a trace makes) still folds
PIPE_WIDTH = 10_000


class PipeConsole(Console):
    """A console on a pipe or a file: each ``print`` as wide as what it prints."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(width=PIPE_WIDTH, **kwargs)

    def print(self, *objects: Any, **kwargs: Any) -> None:  # type: ignore[override]
        if objects and kwargs.get("width") is None:
            kwargs["width"] = self.natural_width(objects, markup=kwargs.get("markup"))
        super().print(*objects, **kwargs)

    def natural_width(self, objects: tuple[Any, ...], *, markup: bool | None = None) -> int:
        """The width ``objects`` printed side by side take when nothing limits them (a string
        read as ``print`` reads it: with markup unless ``markup`` is False)."""
        try:
            need = sum(Measurement.get(self, self.options, self.render_str(o, markup=markup)
                                       if isinstance(o, str) else o).maximum for o in objects)
        except (NotRenderableError, MarkupError):  # print says so, or shows the repr
            return self.width
        return max(1, min(need + len(objects) - 1, self.width))
