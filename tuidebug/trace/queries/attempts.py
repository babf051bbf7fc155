"""A Dynamo compile and the attempts of its analysis. Dynamo restarts an analysis (at a graph
break; when the backend cannot keep a float a symbol, ``TensorifyScalarRestartAnalysis``) and
numbers each new attempt after the first: ``0/1``, then ``0/1_1``. The first attempt keeps what
it was asked (its recompile reasons, the failing values); the last one is the compile that made
the graph: its symbols, specializations and guards are what the compile did (``0/1`` can hold
a float as a symbol that ``0/1_1`` specialized, checked on torch 2.13). The one mapping every
reader of a compile's shapes goes through."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Set as AbstractSet
from typing import Any

from tuidebug.trace.format.reader import Trace

_ATTEMPT = re.compile(r"^(?P<base>.+?)(?:_\d+)+$")
# a compile id as Dynamo writes it: ``0/1``, ``0/1_2`` (an attempt), ``!0/1/2`` (compiled autograd)
_COMPILE_ID = re.compile(r"!?(?:\d+/)?\d+/\d+(?:_\d+)*")


def first_attempt(cid: str) -> str:
    """``0/1_1`` -> ``0/1`` (every restart number off); an id without one is its own first
    attempt."""
    m = _ATTEMPT.match(cid)
    return m["base"] if m else cid


_GAP = 4  # restart numbers probed past the last one found (an attempt the capture did not record)


def is_compile_id(cid: str | None) -> bool:
    """Whether ``cid`` names a Dynamo compile (not "?" or empty: a graph whose compile is not
    known, which is no attempt of anything)."""
    return bool(cid) and _COMPILE_ID.fullmatch(str(cid)) is not None


def restarts(ids: Mapping[str, Any] | AbstractSet[str] | Iterable[str], cid: str) -> list[str]:
    """The restarted attempts of compile ``cid`` among ``ids``, in order (``0/1_1``,
    ``0/1_2``…); [] when it did not restart. Dynamo numbers them 1, 2, … : in a mapping or a
    set of ids they are looked up by number (up to ``_GAP`` missing in a row), not found by
    walking every id, which each compile's question made quadratic in the compiles; other
    iterables are walked."""
    if isinstance(ids, (Mapping, AbstractSet)):
        found, n, missed = [], 1, 0
        while missed < _GAP:
            key = f"{cid}_{n}"
            if key in ids:
                found.append(key)
                missed = 0
            else:
                missed += 1
            n += 1
        return found
    prefix = f"{cid}_"
    listed = [k for k in ids if k.startswith(prefix) and k[len(prefix):].isdigit()]
    return sorted(listed, key=lambda k: int(k[len(prefix):]))


def final_attempt(compiles: Mapping[str, Any], cid: str) -> str:
    """The attempt of ``cid``'s analysis that finished (made its graph): its last restart, or
    ``cid`` itself when it did not restart."""
    later = restarts(compiles, first_attempt(cid))
    return later[-1] if later else cid


def held_shapes(trace: Trace, cid: str) -> dict[str, Any]:
    """What compile ``cid`` held as symbols, specialized and guarded (the brief shapes record,
    ``Trace.compile_shapes_brief``) as its finished attempt recorded it."""
    return trace.compile_shapes_brief(final_attempt(trace.compiles, cid))
