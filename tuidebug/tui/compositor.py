"""A screen's compositor that does not draw a widget whose every cell to paint is covered.

Textual paints an update front to back: each widget overlapping the update is drawn whole
(``render_lines`` over its visible region), then cut at the widgets' edges, and the first piece
for each cell wins — so the containers behind the panes (the screen, ``#body``, the panes'
``Horizontal`` and ``Vertical``) are drawn and cut at every update, and their drawing thrown
away: a step of the pass stepper repaints the stage list's two rows, the graph and the node
detail, and the five containers behind them cost 4-6 ms of that key's 35 (measured on the
24-layer trace). This compositor asks, before drawing a widget, whether any cell of the lines
being painted is still left for it, and draws it only then; what is painted is the same (a
piece already placed is never replaced). A widget skipped keeps the lines it was told to
repaint marked dirty in its own cache: it draws them whenever a later update needs them.

Textual internals (``Compositor._render_chops``, ``cuts``, ``visible_widgets``), feature-checked:
where they differ, a screen keeps Textual's own compositor.
"""

from __future__ import annotations

import inspect
from typing import Callable, Mapping, Sequence

from textual._compositor import ChopsUpdate, Compositor
from textual.geometry import Region
from textual.strip import Strip

Spans = Callable[[int], "list[tuple[int, int]] | None"]  # a line's spans to paint (None: none)


def _supported() -> bool:
    chops = getattr(Compositor, "_render_chops", None)
    if chops is None or not all(hasattr(Compositor, name) for name in (
            "cuts", "visible_widgets", "_regions_to_spans", "render_partial_update")):
        return False
    return list(inspect.signature(chops).parameters) == ["self", "crop", "is_rendered_line"] \
        and list(inspect.signature(ChopsUpdate).parameters) == ["chops", "spans", "chop_ends"]


SUPPORTED = _supported()


class CoveredCompositor(Compositor):
    """``Compositor`` that draws a widget only where a cell being painted is left for it."""

    def render_partial_update(self) -> ChopsUpdate | None:
        update_regions = self._dirty_regions.copy()
        self._dirty_regions.clear()
        if not update_regions:
            return None
        crop = Region.from_union(update_regions).intersection(self.size.region)
        spans = list(self._regions_to_spans(update_regions))
        by_line: dict[int, list[tuple[int, int]]] = {}
        for y, x1, x2 in spans:
            by_line.setdefault(y, []).append((x1, x2))
        chops = self._chops(crop, by_line.get)
        return ChopsUpdate(chops, spans, [cut_set[1:] for cut_set in self.cuts])

    def _render_chops(self, crop: Region,
                      is_rendered_line: Callable[[int], bool]) -> Sequence[Mapping[int, Strip]]:
        whole = [(crop.x, crop.right)]
        return self._chops(crop, lambda y: whole if is_rendered_line(y) else None)

    def _chops(self, crop: Region, spans_of: Spans) -> Sequence[Mapping[int, Strip]]:
        """Each line's pieces (by the column they start at) that overlap its spans, drawn by
        the front-most widget there; a piece that overlaps none is left None (not painted)."""
        cuts = self.cuts
        chops: list[dict[int, Strip | None]] = [dict.fromkeys(cut_set[:-1]) for cut_set in cuts]
        intersection = Region.intersection
        overlaps = crop.overlaps
        for widget, (region, clip) in self.visible_widgets.items():  # front to back
            if not overlaps(clip):
                continue
            render_region = intersection(region, clip)
            x, y0, width, height = render_region
            if not (width and height):
                continue
            first_cut, last_cut = render_region.column_span
            wanted: list[tuple[int, list[int], list[int]]] = []  # line, its cuts, pieces to fill
            for y in render_region.line_range:
                spans = spans_of(y)
                if not spans:
                    continue
                final_cuts = [cut for cut in cuts[y] if last_cut >= cut >= first_cut]
                line = chops[y]
                # a piece from each cut to the next; the last cut is the widget's right edge
                fill = [i for i, (cut, end) in enumerate(zip(final_cuts, final_cuts[1:]))
                        if line.get(cut) is None
                        and any(cut < x2 and end > x1 for x1, x2 in spans)]
                if fill:
                    wanted.append((y, final_cuts, fill))
            if not wanted:
                continue  # every cell it would paint is painted already: not drawn
            strips = widget.render_lines(Region(x - region.x, y0 - region.y, width, height))
            for y, final_cuts, fill in wanted:
                if not 0 <= y - y0 < len(strips):
                    continue
                pieces = strips[y - y0].divide([c - x for c in final_cuts[1:]])
                line = chops[y]
                for i in fill:
                    if i < len(pieces):
                        line[final_cuts[i]] = pieces[i]
        return chops  # type: ignore[return-value]


def install(screen: object) -> None:
    """Give ``screen`` (a ``Screen`` not mounted yet) this compositor, where supported."""
    if SUPPORTED and type(getattr(screen, "_compositor", None)) is Compositor:
        screen._compositor = CoveredCompositor()  # type: ignore[attr-defined]
