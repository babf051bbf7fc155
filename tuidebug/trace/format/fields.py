"""A field of a record read from a trace, kept only when it has the type the record names:
what every typed record's ``from_json`` (manifest, graph meta, kernel entries, errors) reads a
value through, so that a field of the wrong type reads as absent the same way everywhere."""

from __future__ import annotations

from typing import Any


def opt(value: Any, *kinds: type) -> Any:
    """``value`` when it is one of ``kinds`` (never a bool for a number), else None."""
    if isinstance(value, bool) and bool not in kinds:
        return None
    return value if isinstance(value, kinds) else None


def opt_str(value: Any) -> str | None:
    return opt(value, str)


def opt_int(value: Any) -> int | None:
    return opt(value, int)


def opt_dict(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is an object, else {}."""
    return value if isinstance(value, dict) else {}


def strs(value: Any) -> list[str]:
    """A list's items as strings; [] for anything but a list."""
    return [str(v) for v in value] if isinstance(value, list) else []
