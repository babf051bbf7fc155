"""Which arguments an operator writes, read from its schema (``torch._C.FunctionSchema``).

An op's name says little: ``aten.add.out`` writes its ``out`` argument, a custom op made with
``torch.library.custom_op(..., mutates_args=("out",))`` writes an argument that is not its first,
and a custom op may end in ``_`` and write nothing. The schema marks each written argument
(``Tensor(a!) self``: ``alias_info.is_write``). ``written_arguments`` hands that out as plain
data for an FX node's target — an ``OpOverload``, an ``OpOverloadPacket`` (every overload's
writes), a Dynamo graph's torch function or a ``call_method`` name (looked up among ATen's ops
of that name). None when the target has no schema this torch can find.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class WrittenArgument:
    """An argument the op writes: its position (None: keyword-only) and its name."""

    position: int | None
    name: str


def _schema_writes(schema: Any) -> list[WrittenArgument]:
    out = []
    positional = 0
    for arg in getattr(schema, "arguments", ()) or ():
        kwarg_only = bool(getattr(arg, "kwarg_only", False))
        alias = getattr(arg, "alias_info", None)
        if alias is not None and bool(getattr(alias, "is_write", False)):
            out.append(WrittenArgument(None if kwarg_only else positional, str(arg.name)))
        if not kwarg_only:
            positional += 1
    return out


def _overloads(packet: Any) -> list[Any]:
    names = getattr(packet, "overloads", None)
    if not callable(names):
        return []
    out = []
    for name in names():
        op = getattr(packet, name, None)
        if op is not None:
            out.append(op)
    return out


def _aten_packet(name: str) -> Any:
    if not name or not name.replace("_", "a").isalnum():
        return None
    try:
        return getattr(torch.ops.aten, name)
    except (AttributeError, RuntimeError):
        return None


def written_arguments(target: Any) -> list[WrittenArgument] | None:
    """The arguments ``target`` writes according to its schema (across its overloads, in the
    order met, each (position, name) once); [] when it writes none; None when no schema is
    found (not an operator: a Python function, an unknown method name). Looked up once per
    operator and per name (every node of every graph asks)."""
    schema = getattr(target, "_schema", None)
    if schema is not None and hasattr(schema, "arguments"):  # an OpOverload
        key: Any = target
    elif hasattr(target, "overloads"):  # an OpOverloadPacket
        key = target
    else:  # a torch function, a call_method name: ATen's ops of that name
        key = target if isinstance(target, str) else str(getattr(target, "__name__", "") or "")
    try:
        found = _written_of(key)
    except TypeError:  # an operator that cannot be a key: looked up each time
        found = _written_of.__wrapped__(key)
    return None if found is None else list(found)


@functools.lru_cache(maxsize=4096)
def _written_of(key: Any) -> tuple[WrittenArgument, ...] | None:
    """``written_arguments`` of an OpOverload, an OpOverloadPacket, or an op's name."""
    schema = getattr(key, "_schema", None)
    if schema is not None and hasattr(schema, "arguments"):
        return tuple(_schema_writes(schema))
    ops = _overloads(key) if hasattr(key, "overloads") else []
    if not ops:
        name = key if isinstance(key, str) else getattr(key, "__name__", "")
        packet = _aten_packet(str(name or ""))
        ops = _overloads(packet) if packet is not None else []
    if not ops:
        return None
    seen: list[WrittenArgument] = []
    for op in ops:
        for w in _schema_writes(getattr(op, "_schema", None)):
            if w not in seen:
                seen.append(w)
    return tuple(seen)
