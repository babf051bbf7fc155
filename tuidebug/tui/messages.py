"""Every message the UI's parts send each other, in one place.

Workers (threads) post these; handlers on the UI thread apply them. Navigation between screens
goes through the app with ``ShowNode`` / ``ShowKernel`` so that no screen knows another's widgets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from textual.message import Message


@dataclass
class GraphChosen(Message):
    """The user picked another compiled graph."""

    graph_id: str


@dataclass
class ShowNode(Message):
    """Open the pass stepper at ``stage`` (default: the last snapshot) on an FX node; ``marks``
    are other nodes to emphasise (e.g. every FX node of a kernel)."""

    graph_id: str
    node: str
    stage: int | None = None
    marks: list[str] = field(default_factory=list)
    reason: str = ""


@dataclass
class ShowKernel(Message):
    """Open the code screen on a kernel (by name)."""

    graph_id: str
    kernel: str
    line: int | None = None  # 1-based line of the kernel's file to put the cursor on


class Read(Message):
    """A worker finished reading something a screen asked for (``TraceScreen.load``).

    Not posted itself: each screen nests its own subclass per thing it reads (as Textual's
    ``OptionList.OptionHighlighted``), typed by ``data``'s annotation, with one handler each.
    ``key`` says which one was read, so that a late result for an old selection is dropped.
    Read messages do not bubble: they are for the screen that asked.
    """

    data: Any

    def __init_subclass__(cls, bubble: bool | None = False, **kwargs: Any) -> None:
        super().__init_subclass__(bubble=bubble, **kwargs)

    def __init__(self, key: Any, data: Any) -> None:
        super().__init__()
        self.key = key
        self.data = data

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}(key={self.key!r})"


@dataclass
class SvgExported(Message):
    path: Path | None
    error: str | None = None
