"""What every part of a trace comparison shares: ``{"a": x, "b": y}`` pairs and sums that skip
unknown values."""

from __future__ import annotations

from typing import Any, Iterable


def pair(a: Any, b: Any) -> dict[str, Any]:
    return {"a": a, "b": b}


def total(values: Iterable[Any]) -> Any:
    vals = [v for v in values if isinstance(v, (int, float))]
    return round(sum(vals), 6) if vals else None
