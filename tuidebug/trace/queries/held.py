"""Which tensors of a recompiled frame the user holds, and how to name them in advice: a
library frame called from inside the library (transformers' loss given the model's ``logits``)
takes tensors the user never holds; one the user's call passes by keyword (``self.m(input_ids=
ids)``) is "the tensor t you pass as input_ids=". No torch."""

from __future__ import annotations

import re
from typing import Any

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.attempts import final_attempt
from tuidebug.trace.queries.frames import is_own


# the frame's ``*args`` (``torch.compile`` of a torch module such as ``nn.Sequential`` traces
# Dynamo's own ``inner(*args, **kwargs)`` around its forward): the tensor the user passes there
POSITIONAL = re.compile(r"^args\[(?P<index>\d+)\]$")
_KWARG = re.compile(r"kwargs\['(?P<key>[^'\]]+)'\]")


def held_as(name: str) -> tuple[str, str]:
    """How the user names a tensor Dynamo calls ``name``: (the name to write in a call, the
    words after it) — ``x``; ``t`` "on the tensor t you pass as argument 0" for ``args[0]``;
    ``t`` "on the tensor t you pass as input_ids=" for ``kwargs['input_ids']`` (no one holds a
    variable named ``kwargs['input_ids']``)."""
    pos = POSITIONAL.match(name)
    if pos:
        return "t", f" on the tensor t you pass as argument {pos['index']}"
    kw = _KWARG.fullmatch(name)
    if kw:
        return "t", f" on the tensor t you pass as {kw['key']}="
    return name, ""


def held_by_user(frame_file: str | None, called: Any, name: str) -> bool:
    """Whether the user holds the tensor a compiled frame calls ``name`` (``x``,
    ``kwargs['input_ids']``): the frame is their own code, or the line of theirs whose call
    recompiled (``called``: ``{file, line, code}``) names it, as a variable or a keyword
    (``self.m(input_ids=ids)``). A frame of a library called from inside the library (a loss
    function given the model's ``logits``) takes tensors the user never holds."""
    if frame_file is None or is_own(str(frame_file)) or not isinstance(called, dict) \
            or POSITIONAL.match(name):  # Dynamo's inner(*args): the user's call
        return True
    key = _KWARG.fullmatch(name)
    word = key["key"] if key else name
    return re.search(rf"\b{re.escape(word)}\b", str(called.get("code") or "")) is not None


def as_passed(frame: str | None, called: Any, name: str) -> tuple[str, str]:
    """``held_as``, but a library frame's parameter the user's call passes by keyword
    (``self.m(input_ids=ids)`` into GPT-2's forward) is the tensor they pass as ``name=``, not a
    variable of theirs named ``name``."""
    code = str(called.get("code") or "") if isinstance(called, dict) else ""
    if frame and not is_own(frame) and re.fullmatch(r"[A-Za-z_]\w*", name) and \
            re.search(rf"\b{name}\s*=", code):
        return "t", f" on the tensor t you pass as {name}="
    return held_as(name)


def frame_file(trace: Trace, cid: str) -> str | None:
    """The file of compile ``cid``'s frame (its finished attempt's, for one that restarted)."""
    for c in (trace.compiles.get(cid), trace.compiles.get(final_attempt(trace.compiles, cid))):
        file = ((c or {}).get("metrics") or {}).get("co_filename")
        if file:
            return str(file)
    return None
