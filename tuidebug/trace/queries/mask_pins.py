"""Whether a length of 1 is one transformers' own code pins: its causal-mask code compares the
query length with 1 in Python (``masking_utils.py``: ``q_length == 1`` in
``_ignore_causal_mask_sdpa`` and ``create_causal_mask``, the sliding-window and chunked masks).
Where the length is the constant 1 (every size 0 or 1 is specialized) that comparison leaves no
guard, so the trace cannot show it as a guard; what it shows is that the compile ran that code:
Dynamo's guard comments quote each line that added a guard, with its file and function
(``… # transformers/masking_utils.py:987 in create_causal_mask``). With
``backed_size_oblivious`` the length is a symbol, and the comparison then guards it to 1 again
(``Eq(s, 1)``): measured with ``advise --try`` on a tiny GPT-2's decode loop, prompts of 5 then
7 tokens (``examples/decode_loop.py``'s pattern), the flag made 5 compiles 5. Plain text matching
on the guards Dynamo recorded: nothing from the trace is evaluated."""

from __future__ import annotations

import re
from typing import Any, Mapping

# a line of transformers' causal-mask code in a guard's comment (the file as Dynamo shortens it)
_MASK_LINE = re.compile(r"#[^\n#]*?\btransformers/masking_utils\.py:(?P<line>\d+) in "
                        r"(?P<fn>_ignore_causal_mask_sdpa|create_causal_mask|"
                        r"create_sliding_window_causal_mask|create_chunked_causal_mask)\b")
# a dimension that is the query's length in a transformers forward: every dimension but a
# tensor's first (the batch), and cache_position's only one
_QUERY_DIM = re.compile(r"(?:\.size\(\)\[(?:[1-9]\d*)\]|\bcache_position'?\]?\.size\(\)\[0\])$")


def causal_mask_line(detail: Mapping[str, Any]) -> tuple[str, int] | None:
    """The function and line of transformers' causal-mask code that compile ``detail`` (its
    ``compiles/<id>.json``) ran, as its guards' comments name it; None where they name none."""
    guards = detail.get("guards")
    m = _MASK_LINE.search(guards) if isinstance(guards, str) else None
    return (m["fn"], int(m["line"])) if m else None


def pinned_to_one(detail: Mapping[str, Any], source: str | None, cid: str) -> str | None:
    """Why ``backed_size_oblivious`` cannot let compile ``cid`` (``detail``) serve another
    length for ``source`` (``L['kwargs']['input_ids'].size()[1]``): the compile ran transformers'
    causal-mask code, which compares the query length with 1; None where its guards do not show
    that, or ``source`` is a batch dimension (the first of a tensor)."""
    if not source or not _QUERY_DIM.search(source):
        return None
    found = causal_mask_line(detail)
    if found is None:
        return None
    fn, line = found
    return (f"{cid} ran transformers' {fn} (masking_utils.py:{line}, named in its guards), "
            "whose mask code compares the query length with 1 in Python (q_length == 1): "
            "with backed_size_oblivious that comparison guards the length to 1 again, so "
            f"{cid} still serves only a length of 1 (the comparison leaves no guard while the "
            "length is the constant 1, which is why the trace shows no guard for it)")
