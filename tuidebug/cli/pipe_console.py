"""The rich console a command prints through when its output goes to a pipe or a file.

On a terminal rich wraps at the terminal's width. On a pipe it wraps at 80 columns (or at the
width of a terminal on stdin), which splits a location (``modeling_utils.py:4761`` became
``…:476`` and ``1``) and cuts table cells with ``…``: ``grep`` and a copy miss them. Here each
thing printed is laid out as wide as it needs (a table at its natural width, a panel round its
longest line), up to ``PIPE_WIDTH``, so nothing is wrapped, cut or padded to a width no screen has:

- rich measures a tab as no column and prints it as up to eight (a diff's ``-\\tif x:`` cropped
  its line's end, a table cell holding a tab wrapped), so tabs are expanded before measuring;
- what fills whatever width it is given (a ``Rule``, ``Markdown``) is laid out ``FILL_WIDTH``
  wide, not ``PIPE_WIDTH``;
- each line's trailing spaces are dropped on the way out, and a table's right edge is left
  open: one long cell padded every row of its table to its width (megabytes of spaces).
"""

from __future__ import annotations

import copy
from typing import IO, Any

from rich.box import Box
from rich.console import Console, Group
from rich.errors import MarkupError, NotRenderableError
from rich.measure import Measurement
from rich.padding import Padding
from rich.panel import Panel
from rich.protocol import rich_cast
from rich.rule import Rule
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

# the widest line laid out on a pipe: where a line this long (none a trace makes) still folds
PIPE_WIDTH = 10_000
# the width of what fills the width it is given (rich's own on a pipe)
FILL_WIDTH = 80


class PipeConsole(Console):
    """A console on a pipe or a file: each ``print`` as wide as what it prints."""

    def __init__(self, *, file: IO[str] | None = None, **kwargs: Any) -> None:
        super().__init__(width=PIPE_WIDTH, **kwargs,
                         file=_TrailingSpacesDropped(file, stderr=kwargs.get("stderr", False)))

    def print(self, *objects: Any, **kwargs: Any) -> None:  # type: ignore[override]
        objects = tuple(_tabs_expanded(o) for o in objects)
        if objects and kwargs.get("width") is None:
            kwargs["width"] = self.natural_width(objects, markup=kwargs.get("markup"))
        super().print(*objects, **kwargs)

    def render_str(self, text: str, **kwargs: Any) -> Text:  # type: ignore[override]
        """A string as rich reads it (markup…), its tabs expanded: every string a table, a
        panel or ``print`` is given comes through here, at any depth."""
        rendered = super().render_str(text, **kwargs)
        if "\t" in rendered.plain:
            rendered.expand_tabs(self.tab_size)
        return rendered

    def natural_width(self, objects: tuple[Any, ...], *, markup: bool | None = None) -> int:
        """The width ``objects`` printed side by side take when nothing limits them (a string
        read as ``print`` reads it: with markup unless ``markup`` is False)."""
        try:
            need = sum(self._natural(o, markup) for o in objects)
        except (NotRenderableError, MarkupError):  # print says so, or shows the repr
            return self.width
        return max(1, min(need + len(objects) - 1, self.width))

    def _natural(self, obj: Any, markup: bool | None) -> int:
        if isinstance(obj, str):
            obj = self.render_str(obj, markup=markup)
        obj = rich_cast(obj)
        if isinstance(obj, Rule) or not hasattr(obj, "__rich_measure__"):
            return FILL_WIDTH
        return Measurement.get(self, self.options, obj).maximum


def _tabs_expanded(obj: Any) -> Any:
    """``obj`` with the tabs of its ``Text`` and ``Syntax`` expanded, through the panels,
    paddings, groups and tables that hold them, and its tables' right edges open (copies: the
    caller's objects are not changed); anything else as it is (a string's tabs:
    ``render_str``)."""
    if isinstance(obj, Text):
        if "\t" not in obj.plain:
            return obj
        obj = obj.copy()
        obj.expand_tabs()
        return obj
    if isinstance(obj, Syntax):
        if "\t" not in obj.code:
            return obj
        obj = copy.copy(obj)
        obj.code = obj.code.expandtabs(obj.tab_size)
        return obj
    if isinstance(obj, (Panel, Padding)):
        inner = _tabs_expanded(obj.renderable)
        if inner is not obj.renderable:
            obj = copy.copy(obj)
            obj.renderable = inner
        return obj
    if isinstance(obj, Group):
        return Group(*(_tabs_expanded(r) for r in obj.renderables), fit=obj.fit)
    if isinstance(obj, Table):
        obj = copy.copy(obj)
        if obj.box is not None and obj.show_edge:
            obj.box = _open_right(obj.box)
        obj.columns = [copy.copy(c) for c in obj.columns]
        for column in obj.columns:
            column._cells = [_tabs_expanded(c) for c in column._cells]
        return obj
    return obj


def _open_right(box: Box) -> Box:
    """``box`` with no right edge: a row ends with its last cell's text, so the spaces that pad
    it to the widest row are trailing ones, dropped on the way out."""
    box = copy.copy(box)
    for line in ("top", "head", "head_row", "mid", "row", "foot_row", "foot", "bottom"):
        setattr(box, f"{line}_right", " ")
    return box


class _TrailingSpacesDropped:
    """The file a ``PipeConsole`` writes to, each line's trailing spaces dropped as it is
    written (spaces at the end of a write are held until what follows them is known)."""

    def __init__(self, file: IO[str] | None, *, stderr: bool = False) -> None:
        self._given, self._stderr = file, stderr
        self._held = ""

    @property
    def _file(self) -> IO[str]:
        """The file given, else stdout (or stderr) as it is now, as rich's own console does."""
        import sys

        return self._given or (sys.stderr if self._stderr else sys.stdout)

    @property
    def encoding(self) -> str:
        return getattr(self._file, "encoding", None) or "utf-8"

    def write(self, text: str) -> int:
        lines = (self._held + text).split("\n")
        last = lines.pop()
        kept = last.rstrip(" ")
        self._held = last[len(kept):]
        out = "".join(f"{line.rstrip(' ')}\n" for line in lines) + kept
        if out:
            self._file.write(out)
        return len(text)

    def flush(self) -> None:
        self._file.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._file.fileno()
