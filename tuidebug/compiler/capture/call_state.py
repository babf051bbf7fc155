"""What the timed calls of ``--profile`` (``whole_call``) are given and must leave as the
user's program had it: copies of the call's tensor arguments (one copy of a tensor passed
twice), the arguments that are state it must not re-run on (objects holding tensors: a KV
cache), and the module's buffers, put back where the timed calls changed them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch


def leaf(x: Any, copies: dict[int, Any] | None = None) -> Any:
    """A copy of a tensor argument (requiring grad as it did, an inference tensor only where it
    was one), anything else as it is. The copy is made where the user's call returned: under
    ``torch.inference_mode()`` a plain clone is an inference tensor, whose other dispatch keys
    fail Dynamo's guard, and the timed calls compiled the function once more (a recompile the
    user's program does not make). ``copies``: those made for this call so far, by the
    original's id: a tensor passed twice is copied once."""
    if isinstance(x, torch.Tensor):
        if copies is not None and id(x) in copies:  # the same tensor twice (input_ids=ids,
            return copies[id(x)]  # labels=ids): Dynamo guards that they are one
        with torch.inference_mode(x.is_inference()):
            copy = x.detach().clone().requires_grad_(x.requires_grad)
        if copies is not None:
            copies[id(x)] = copy
        return copy
    return x


def _holds_tensors(value: Any, depth: int = 0, seen: set[int] | None = None) -> bool:
    """Whether an object (not a tensor, a number or a string) holds tensors among its
    attributes, or in lists, tuples and dicts of them, a few levels down."""
    seen = set() if seen is None else seen
    if depth > 3 or id(value) in seen or len(seen) > 500:
        return False
    seen.add(id(value))
    if isinstance(value, torch.Tensor):
        return depth > 0
    if isinstance(value, (list, tuple)):
        items: Any = value
    elif isinstance(value, dict):
        items = value.values()
    elif hasattr(value, "__dict__") and not isinstance(value, (type, torch.nn.Module)):
        items = vars(value).values()
    else:
        return False
    return any(_holds_tensors(v, depth + 1, seen) for v in items)


def state_holders(args: Any, kwargs: Any) -> list[str]:
    """The arguments that are objects holding tensors (a transformers ``Cache``: its keys,
    values, lengths), which ``leaf`` cannot copy: ``past_key_values (StaticCache)``. A tensor
    argument is copied, and lists, tuples and mappings (a tokenizer's ``BatchEncoding``) of
    tensors are left as the call's."""
    named = [(f"argument {i}", a) for i, a in enumerate(args or ())]
    named += [(str(k), v) for k, v in (kwargs or {}).items()]
    return [f"{n} ({type(v).__name__})" for n, v in named
            if not isinstance(v, (torch.Tensor, list, tuple, Mapping)) and _holds_tensors(v)]


def _version(t: torch.Tensor) -> int | None:
    """A tensor's version counter (None for an inference tensor, which keeps none)."""
    try:
        return int(t._version)
    except (RuntimeError, AttributeError):
        return None


def buffers(model: Any) -> list[tuple[torch.Tensor, torch.Tensor, int | None]]:
    if not isinstance(model, torch.nn.Module):
        return []
    return [(b, b.detach().clone(), _version(b)) for b in model.buffers()]


def restore(buffers: list[tuple[torch.Tensor, torch.Tensor, int | None]]) -> None:
    """Put back the buffers the timed calls changed (BatchNorm's running statistics), and only
    those: writing into a buffer bumps its version, and the user's own call may have saved it
    for its backward (Llama's rotary ``inv_freq``): their ``loss.backward()`` then raised "one
    of the variables needed for gradient computation has been modified by an inplace
    operation"."""
    with torch.no_grad():
        for b, saved, version in buffers:
            now = _version(b)
            if (version is not None and now == version) or (
                    version is None and torch.equal(b, saved)):
                continue
            b.copy_(saved)
