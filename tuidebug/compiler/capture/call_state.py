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


def _holds_tensors(value: Any, limit: int = 5000) -> bool:
    """Whether an object (not a tensor, a number or a string) holds tensors among its
    attributes, or in lists, tuples and dicts of them, at any depth: transformers'
    ``EncoderDecoderCache`` (Whisper, T5, BART) holds its keys four levels down (cache →
    ``self_attention_cache`` → ``layers`` → layer → ``keys``). Each object is looked at once
    (``seen``), and at most ``limit`` of them, walked without recursion."""
    seen: set[int] = set()
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack and len(seen) < limit:
        item, depth = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, torch.Tensor):
            if depth > 0:
                return True
            continue
        if isinstance(item, (list, tuple)):
            items: Any = item
        elif isinstance(item, dict):
            items = item.values()
        elif hasattr(item, "__dict__") and not isinstance(item, (type, torch.nn.Module)):
            items = vars(item).values()
        else:
            continue
        stack.extend((v, depth + 1) for v in items)
    return False


def state_holders(args: Any, kwargs: Any) -> list[str]:
    """The arguments that are objects holding tensors (a transformers ``Cache``: its keys,
    values, lengths), which ``leaf`` cannot copy: ``past_key_values (StaticCache)``. A tensor
    argument is copied, and lists, tuples and mappings (a tokenizer's ``BatchEncoding``) of
    tensors are left as the call's."""
    named = [(f"argument {i}", a) for i, a in enumerate(args or ())]
    named += [(str(k), v) for k, v in (kwargs or {}).items()]
    return [f"{n} ({type(v).__name__})" for n, v in named
            if not isinstance(v, (torch.Tensor, list, tuple, Mapping)) and _holds_tensors(v)]


def buffers(model: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The module's buffers, each with a copy of what it holds now."""
    if not isinstance(model, torch.nn.Module):
        return []
    return [(b, b.detach().clone()) for b in model.buffers()]


def _same(now: torch.Tensor, saved: torch.Tensor) -> bool:
    """Whether a buffer holds what was saved (a NaN where a NaN was counts as the same)."""
    if torch.equal(now, saved):
        return True
    return bool(now.is_floating_point() and torch.allclose(now, saved, rtol=0.0, atol=0.0,
                                                           equal_nan=True))


def restore(buffers: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Put back the buffers the timed calls changed (BatchNorm's running statistics), and only
    those, each told by what it holds: eager BatchNorm updates its running mean and variance
    without moving their version counter, so a version unchanged does not say the buffer is;
    and writing into a buffer that did not change bumps its version, while the user's own
    call may have saved it for its backward (Llama's rotary ``inv_freq``): their
    ``loss.backward()`` then raised "one of the variables needed for gradient computation has
    been modified by an inplace operation"."""
    with torch.no_grad():
        for b, saved in buffers:
            if not _same(b, saved):
                b.copy_(saved)
