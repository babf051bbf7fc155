"""A bench's measurements as one text: ``median [min–max]``, the spread every bench reports."""

from __future__ import annotations

import statistics


def spread(xs: list[float], fmt: str = "{:.2f}") -> str:
    """``xs`` as ``median [min–max]``, each number written with ``fmt``."""
    return f"{fmt.format(statistics.median(xs))} [{fmt.format(min(xs))}–{fmt.format(max(xs))}]"
