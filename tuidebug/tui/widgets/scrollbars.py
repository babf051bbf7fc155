"""Scrollbars drawn again only when what they show changed.

Textual repaints a widget's scrollbars whenever its styles are applied again, whether or not a
scrollbar colour changed: every focus change (``:focus`` restyles the widget that takes the focus
and the one that leaves it) redrew the stage list's and the graph's scrollbars, line by line —
about a third of a Tab's frame on the 24-layer trace. These scrollbars keep their last drawing
and give it back while nothing it depends on changed.
"""

from __future__ import annotations

from typing import Any

from textual.geometry import Region
from textual.scrollbar import ScrollBar
from textual.strip import Strip
from textual.widget import Widget


class SteadyScrollBar(ScrollBar):
    """A ``ScrollBar`` that keeps its last drawing while its inputs are unchanged."""

    KEPT = 8  # drawings kept (a repaint may crop a part of the bar: one per crop)

    def __init__(self, vertical: bool = True, name: str | None = None, *,
                 thickness: int = 1) -> None:
        super().__init__(vertical, name, thickness=thickness)
        self._drawn: dict[tuple[object, ...], list[Strip]] = {}

    def _drawing_key(self, crop: Region) -> tuple[object, ...]:
        """Everything the drawing depends on: ``ScrollBar.render``'s inputs and the styles the
        lines are drawn with. Not the background of the widget or of the bar (the tint that
        ``:focus`` gives the widget): every cell of a bar has a background of its own (the
        parent's scrollbar colours, over the background beneath the parent where they are
        transparent), so neither shows."""
        parent = self.parent
        assert isinstance(parent, Widget)
        s = parent.styles
        return (crop, self.size, self.vertical, self.thickness, self.window_virtual_size,
                self.window_size, self.position, self.grabbed is not None, self.mouse_over,
                self.renderer, s.scrollbar_background, s.scrollbar_background_hover,
                s.scrollbar_background_active, s.scrollbar_color, s.scrollbar_color_hover,
                s.scrollbar_color_active, parent.background_colors[0],
                self.screen.styles.scrollbar_color, self.opacity, self.styles.tint,
                self.app.ansi_theme, self.app.native_ansi_color, tuple(self.get_line_filters()))

    def render_lines(self, crop: Region) -> list[Strip]:
        key = self._drawing_key(crop)
        strips = self._drawn.get(key)
        if strips is None:
            strips = super().render_lines(crop)
            if len(self._drawn) >= self.KEPT:
                self._drawn.clear()
            self._drawn[key] = strips
        return strips


class SteadyScrollbars:
    """Makes a widget's scrollbars ``SteadyScrollBar``s: the first base of a ``Widget`` class
    (not a ``Widget`` itself: Textual inherits CSS through the first ``Widget`` base).

    Textual makes a widget's scrollbars when first asked for them; these properties make the
    same, of the class above (as ``Widget.vertical_scrollbar`` and ``horizontal_scrollbar``)."""

    @property
    def vertical_scrollbar(self) -> ScrollBar:
        return _scrollbar(self, vertical=True)

    @property
    def horizontal_scrollbar(self) -> ScrollBar:
        return _scrollbar(self, vertical=False)


def _scrollbar(widget: Any, *, vertical: bool) -> ScrollBar:
    attr = "_vertical_scrollbar" if vertical else "_horizontal_scrollbar"
    bar = getattr(widget, attr)
    if bar is None:
        bar = SteadyScrollBar(
            vertical=vertical, name="vertical" if vertical else "horizontal",
            thickness=widget.scrollbar_size_vertical if vertical
            else widget.scrollbar_size_horizontal)
        bar.display = False
        setattr(widget, attr, bar)
        widget.app._start_widget(widget, bar)
    return bar
