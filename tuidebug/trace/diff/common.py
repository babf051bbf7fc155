"""What every part of a trace comparison shares: ``{"a": x, "b": y}`` pairs, sums that skip
unknown values, and whether the two graphs hold a file in the same bytes."""

from __future__ import annotations

import weakref
from typing import Any, Callable, Iterable, TypeVar

from tuidebug.trace.format.reader import GraphRecord

T = TypeVar("T")


def pair(a: Any, b: Any) -> dict[str, Any]:
    return {"a": a, "b": b}


def total(values: Iterable[Any]) -> Any:
    vals = [v for v in values if isinstance(v, (int, float))]
    return round(sum(vals), 6) if vals else None


def same_file(ga: GraphRecord | None, gb: GraphRecord | None, rel: str | None) -> bool:
    """Both graphs hold the same bytes at ``rel``: what is read from one holds for the other
    (two traces of one model: most files are; each read and parsed once)."""
    return ga is not None and gb is not None and rel is not None and ga.same_file(gb, rel)


# what a comparison works out from one graph alone, kept while the graph is open
_KEPT: "weakref.WeakKeyDictionary[GraphRecord, dict[str, Any]]" = weakref.WeakKeyDictionary()


def kept(g: GraphRecord, name: str, make: Callable[[], T]) -> T:
    """``make()``, worked out once per graph ``g`` and kept with it (by ``name``): what a
    comparison derives from one graph's own files (its wrapper folded, its kernels' code
    normalised, its IR and fusion decisions counted). The app compares its open trace with one
    trace after another (each recompile): its side is worked out once. The values are shared:
    never changed by those who read them."""
    values = _KEPT.get(g)
    if values is None:
        values = _KEPT.setdefault(g, {})
    if name not in values:
        values[name] = make()
    return values[name]  # type: ignore[no-any-return]
