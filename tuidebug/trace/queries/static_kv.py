"""Whether a compile's KV cache is transformers' static one, from what Dynamo recorded of it.
A ``StaticCache``'s layers keep their length in ``max_cache_len`` and (5.x) their filled length in
``cumulative_length``: Dynamo names them in the compile's symbols
(``L['kwargs']['past_key_values'].layers[0].cumulative_length.item()``) and guards
(``…layers[0].max_cache_len == 10``); a ``DynamicCache`` has no ``max_cache_len``. Only
``max_cache_len`` tells: ``cumulative_length`` is also a growing cache's
(``DynamicSlidingWindowLayer``: Mistral, Gemma, Qwen). Its keys and values are
``max_cache_len`` long (``layers[0].keys``, as a DynamicCache's are named too): their length
changes only where a cache of another ``max_cache_len`` was passed, so "use a static KV cache"
is never the answer to it. Plain text matching: nothing from the trace is evaluated."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

# a static cache's own attribute, under transformers' cache argument (not ``cumulative_length``:
# a DynamicSlidingWindowLayer, which grows, has one too)
_STATIC_ATTR = re.compile(r"past_key_values\b[^\s#]*?\.max_cache_len\b")
# the length a compile held a static cache at: ``…layers[0].max_cache_len == 10``
_HELD_LEN = re.compile(r"past_key_values\b[^\s#]*?\.max_cache_len == (?P<n>\d+)")


def is_static(detail: Mapping[str, Any], shapes: Iterable[Mapping[str, Any] | None]) -> bool:
    """Whether a compile (``detail``: its ``compiles/<id>.json``; ``shapes``: its shapes records)
    held transformers' static KV cache: a symbol or a guard names a static cache's attribute."""
    for rec in shapes:
        for sym in (rec or {}).get("symbols") or []:
            if isinstance(sym, dict) and any(
                    _STATIC_ATTR.search(str(x))
                    for x in [sym.get("source"), *(sym.get("sources") or [])] if x):
                return True
    guards = detail.get("guards")
    return isinstance(guards, str) and _STATIC_ATTR.search(guards) is not None


def held_length(detail: Mapping[str, Any]) -> str | None:
    """The ``max_cache_len`` a compile held its static cache at (None: not guarded on)."""
    guards = detail.get("guards")
    m = _HELD_LEN.search(guards) if isinstance(guards, str) else None
    return m["n"] if m else None


def static_words(name: str) -> str:
    """What a change of length of a static cache's keys or values is."""
    return (f"{name} is a static KV cache's (transformers' StaticCache: the trace names its "
            f"max_cache_len), whose length changes only where a StaticCache of another "
            f"max_cache_len is passed (a new one per prompt, sized to it)")


def length_changed(name: str, expected: Any, actual: Any) -> str:
    """What a recompile on the length of a static cache's keys or values means, and its fix."""
    return (f"{static_words(repr(name))}: its length changed ({expected} → {actual}); build "
            f"every StaticCache with one max_cache_len (the longest prompt plus the new "
            f"tokens), or reuse one and reset() it, and its length stays fixed")
