"""Turn rich renderables (tables, panels) into lines for a ``TextView``."""

from __future__ import annotations

from rich.console import Console, RenderableType
from rich.text import Text


def to_lines(console: Console, renderables: list[RenderableType], width: int) -> list[Text]:
    """Render at ``width`` columns and return one ``Text`` per terminal line."""
    options = console.options.update(width=max(40, width), height=None)
    out: list[Text] = []
    for r in renderables:
        if isinstance(r, Text) and "\n" not in r.plain and r.cell_len <= width:
            out.append(r)
            continue
        for line in console.render_lines(r, options, pad=False):
            t = Text()
            for seg in line:
                if seg.control:
                    continue
                t.append(seg.text, seg.style)
            t.rstrip()
            out.append(t)
    return out
