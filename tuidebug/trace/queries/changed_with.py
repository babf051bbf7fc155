"""What else a recompile's call changed, that marking the input its failed guard names cannot
cover. Dynamo reports one failed guard per earlier compile, but automatic dynamic makes every
value that changed a symbol of the recompile: a symbol the recompile holds and the compile before
did not is a value that call changed too. Llama with a new ``StaticCache(max_cache_len=n + 4)``
per prompt: the second prompt's compile fails on the prompt's length and holds the cache's
``max_cache_len`` as a new symbol, so ``maybe_mark_dynamic(input_ids, 1)`` (and
``backed_size_oblivious``) left it compiling as often (torch 2.13: 4 compiles → 4), where
``dynamic=True``, which makes both symbols, compiled twice."""

from __future__ import annotations

import re

from collections.abc import Mapping
from typing import Any

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.attempts import final_attempt, held_shapes
from tuidebug.trace.queries.recompile_constants import symbolic_sources

# a dimension of an input the call passes itself (``L['x']``, ``L['kwargs']['input_ids']``,
# ``L['args'][0]``): what a mark on the user's inputs covers (``recompile_suggestion.is_passed``). A
# tensor inside one (``L['kwargs']['batch']['attention_mask']``) is not: the mark the advice
# offers never names it, and it would still recompile
_INPUT_DIM = re.compile(r"^L\['(?:kwargs'\]\['[^'\]]+'\]|args'\]\[\d+\]|[A-Za-z_]\w*'\])"
                        r"\.(?:size|stride)\(\)\[\d+\]$")


def unmarked_changes(trace: Trace, cid: str, before: str | None,
                     failed: str | None = None) -> list[str]:
    """The values compile ``cid``'s call changed that compile ``before`` held fixed and no mark
    on the user's inputs covers: symbols ``cid`` holds and ``before`` did not, other than a
    dimension of an input (a tensor's ``.item()``, a symbol in every compile that reads it, is
    no change), nor ``failed``: the failed guard's own source, the change the advice is about.
    [] where a shapes record is missing: nothing is claimed."""
    now = symbolic_sources(held_shapes(trace, cid))
    then = symbolic_sources(held_shapes(trace, before)) if before else None
    if now is None or then is None:
        return []
    return sorted(s for s in now - then
                  if s != failed and not _INPUT_DIM.match(s) and not s.endswith(".item()"))


def input_name(source: str) -> str:
    """``L['x']`` -> ``x``; ``L['kwargs']['input_ids']`` -> ``kwargs['input_ids']``."""
    m = re.match(r"^L\['(?P<head>[^'\]]+)'\](?P<rest>.*)$", source)
    return f"{m['head']}{m['rest']}" if m else source


def dim_source(source: str | None) -> tuple[str, int] | None:
    """``L['x'].size()[1]`` -> ``("L['x']", 1)``; None for anything else."""
    m = re.fullmatch(r"(?P<src>.+)\.size\(\)\[(?P<dim>\d+)\]", source or "")
    return (m["src"], int(m["dim"])) if m else None


def made_dynamic_with(trace: Trace, cid: str, before: str | None, src: str, index: int
                      ) -> list[tuple[str, int]]:
    """``(src, index)`` and the other dimensions of inputs the call passes itself that compile
    ``cid`` holds as symbols and ``before`` did not: one recompile makes every input that
    changed with it dynamic (BERT's input_ids with its attention_mask or labels), and marking
    only the one its failed guard names leaves the other to recompile (a masked-LM step, 8 →
    12 → 16 tokens, input_ids marked alone: 2 compiles; input_ids and labels: 1). A symbol the
    compile specialized again (the code pinned that size) is no dimension marking helps:
    ``symbolic_sources`` leaves it out. ``advise``'s mark and ``info``'s advice both ask it."""
    return [(src, index)] + [d for d in new_input_dims(trace, cid, before) if d != (src, index)]


def new_input_dims(trace: Trace, cid: str, before: str | None) -> list[tuple[str, int]]:
    """The dimensions of inputs the call passes itself (``(source, index)``) that compile
    ``cid`` holds as symbols and ``before`` did not, in source order."""
    def dims(c: str | None) -> list[tuple[str, int]]:
        found = [dim_source(x) for x in sorted(
            symbolic_sources(held_shapes(trace, c) if c else None) or ())
            if _INPUT_DIM.match(x)]
        return [d for d in found if d is not None]
    then = set(dims(before))
    return [d for d in dims(cid) if d not in then]


# a guard that holds an input's value as a constant: ``L['kwargs']['past_key_values'].layers[0]
# .is_initialized == False`` (not a size: a size's guard follows from the sizes held)
_CONSTANT = re.compile(r"(?:^|[\s:])(?P<src>L\[[^\s()]*) == (?P<val>True|False|None|-?\d+)(?=\s|$)",
                       re.M)


def _constants(compiles: Mapping[str, Any], cid: str) -> dict[str, str]:
    guards = (compiles.get(final_attempt(compiles, cid)) or {}).get("guards")
    if not isinstance(guards, str):
        return {}
    return {m["src"]: m["val"] for m in _CONSTANT.finditer(guards)
            if ".size()" not in m["src"] and ".stride()" not in m["src"]}


def held_differently(compiles: Mapping[str, Any], before: str | None, cid: str) -> list[str]:
    """The inputs both compiles hold as constants, at other values: compile ``before`` cannot
    serve ``cid``'s call whatever is dynamic (a fresh lazily filled StaticCache,
    ``is_initialized == False``, where ``before`` was compiled for a filled one). [] where
    either compile's guards are not recorded."""
    if not before:
        return []
    a, b = _constants(compiles, before), _constants(compiles, cid)
    return sorted(src for src in a.keys() & b.keys() if a[src] != b[src])


def said(changes: list[str]) -> str:
    """The changes as a user reads them: ``L['kwargs']['past_key_values'].layers[0].max_cache_len``
    and its layer 1 -> ``past_key_values.layers[i].max_cache_len`` (a static cache's length,
    said so)."""
    out: list[str] = []
    for s in changes:
        s = re.sub(r"^L\['kwargs'\]\['([^'\]]+)'\]|^L\['([^'\]]+)'\]",
                   lambda m: m[1] or m[2], s)
        s = re.sub(r"\.layers\[\d+\]", ".layers[i]", s)
        if s not in out:
            out.append(s)
    words = ", ".join(out[:3]) + (f" and {len(out) - 3} more" if len(out) > 3 else "")
    if any(s.endswith(".max_cache_len") for s in out):
        words += " (a StaticCache of another max_cache_len)"
    return words
