"""What a recompile on a KV cache's length calls for: transformers' growing cache a static one
(``advise --try`` builds its ``DynamicCache`` static), a cache of the user's own preallocated (a
code change), a static cache already (``static_kv``) one ``max_cache_len`` for every prompt; and
the ``dynamic_sources`` entry for a cache tensor and its siblings."""

from __future__ import annotations

import re
from typing import Any

from tuidebug.trace.queries.advice_records import Apply, Suggestion
from tuidebug.trace.queries.static_kv import static_words

# transformers' KV cache by its Dynamo source: ``past_key_values.layers[0].keys`` (5.x),
# ``past_key_values.key_cache[0]`` (4.x)
TRANSFORMERS_CACHE = re.compile(r"past_key_values\b.*(?:\.layers\[\d+\]\.(?:keys|values)\b|"
                                r"\.(?:key|value)_cache\b)")
# the length of the static cache ``advise --try`` builds in place of transformers' DynamicCache
# (a run that writes past it raises, and is reported so)
STATIC_CACHE_LEN = 2048


def grows_by_one(expected: Any, actual: Any) -> bool:
    e, a = str(expected), str(actual)
    return e.isdigit() and a.isdigit() and int(a) == int(e) + 1


def cache_advice(name: str, index: int, why: str, grows: bool, static: bool = False
                  ) -> Suggestion:
    """A static KV cache for a cache whose length changed: transformers' (``past_key_values``
    with ``layers[i].keys`` or ``key_cache[i]``) tried by building its ``DynamicCache`` static
    (``Apply.static_cache_len``); a cache of the user's own is a code change, not tried."""
    step = "grows by one each step" if grows else "changes length from call to call"
    if static:
        # already a static cache: its length changed only as a cache of another max_cache_len
        return one_length(f"{why}; {static_words(name)}")
    if TRANSFORMERS_CACHE.search(name):
        return Suggestion(
            "static KV cache",
            "use a static KV cache, whose length stays fixed: where you build a DynamicCache, "
            "pass past_key_values=StaticCache(config=model.config, max_cache_len=N) "
            "(transformers.StaticCache; N at least the prompt plus the new tokens), or "
            "generate(..., cache_implementation=\"static\")",
            f"{why}; {name} is transformers' KV cache and {step} (--try builds every "
            f"DynamicCache as a static cache of {STATIC_CACHE_LEN} positions; your files are "
            "not changed)",
            "recompiles", Apply(static_cache_len=STATIC_CACHE_LEN))
    return Suggestion(
        "preallocated cache",
        f"preallocate the cache at its largest length (dimension {index} of {name}: "
        "torch.zeros(..., max_len, ...) once, before the loop), write each step into it in "
        "place (index_copy_ or a slice assignment at a position held in a tensor) and pass "
        "the whole buffer with a mask or the filled length as a tensor: its size then stays "
        "fixed", f"{why}; {name} is a cache that {step}", "recompiles", None)


def one_length(why: str) -> Suggestion:
    """For a static KV cache whose length changed: one length for every cache (a change to the
    user's code, listed and not tried)."""
    return Suggestion(
        "one max_cache_len",
        "build every StaticCache with one max_cache_len (the longest prompt plus the new "
        "tokens), or reuse one and reset() it, so its keys and values keep one length",
        why, "recompiles", None)


def siblings(source: str, index: int) -> str:
    """A ``dynamic_sources`` entry (a regex on source names) for ``source`` and the tensors
    beside it: every index of a list (``layers[0]`` -> ``layers[N]``), keys and values alike."""
    pattern = re.sub(r"\\\[\d+\\\]", r"\\[\\d+\\]", re.escape(source))
    pattern = re.sub(r"\\\.(keys|values|key_cache|value_cache)$",
                     r"\\.(keys|values|key_cache|value_cache)", pattern)
    return f"{pattern}:{index}"
