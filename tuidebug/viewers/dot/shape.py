"""Shaping a drawing to fit a screen: a long row of boxes wraps into several rows, and a tall
chain is cut into bands of ranks drawn side by side. Both work on the builder's estimated ranks
(longest path from the sources, per phase) and return edges for it to add or to stub."""

from __future__ import annotations

from collections import defaultdict


def wrap_rows(order: list[str], rank: dict[str, int], phase_of: dict[str, str],
              max_width: int) -> list[tuple[str, str]]:
    """Invisible edges that fold each row of more than ``max_width`` items (``order``, in graph
    order, at the same rank of a phase: a backward's per-layer boxes, an optimizer's
    per-parameter chains) into rows of ``sqrt(0.8 n)`` items, each under the one before: a box
    is about twice as wide as its row is tall, so the rows come out about 8:5."""
    rows: dict[tuple[str, int], list[str]] = defaultdict(list)
    for item in order:
        rows[(phase_of[item], rank[item])].append(item)
    links = []
    for row in (r for r in rows.values() if len(r) > max_width):
        width = max(4, round((0.8 * len(row)) ** 0.5))
        links += [(row[i], row[i + width]) for i in range(len(row) - width)]
    return links


def fold_bands(edges: list[tuple[str, str]], rank: dict[str, int],
               phase_of: dict[str, str]) -> list[tuple[str, str]]:
    """The edges to stub so that a tall phase (a deep model's chain of layers) is cut into
    bands of ranks drawn side by side: each band, free of the one before, rises to the top.
    As many bands as make the drawing about 8:5, phases side by side (measured on the graphs
    of a 24-layer model)."""
    by_phase: dict[str, list[str]] = defaultdict(list)
    for item, phase in phase_of.items():
        by_phase[phase].append(item)
    band: dict[str, int] = {}
    for members in by_phase.values():
        tall = max(rank[i] for i in members) + 1
        wide = len(members) / tall  # items per rank, on average
        columns = int((0.4 * tall / max(wide, 1.0) / len(by_phase)) ** 0.5)
        if columns < 2:
            continue
        step = -(-tall // columns)
        band.update((i, rank[i] // step) for i in members)
    return [(a, b) for a, b in edges if band.get(a, 0) != band.get(b, 0)]
