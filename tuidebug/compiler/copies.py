"""A copy of a tensor to run a compiled graph on again: its sizes and its strides kept. A
compiled graph is compiled for its inputs' strides (Dynamo guards them; Inductor's wrapper
asserts them), and ``clone()`` makes a view with gaps contiguous: a half of
``gate_up.chunk(2, -1)`` (a MoE expert's input in transformers' Mixtral), strides (128, 1),
cloned to (64, 1), made the check's backward re-run raise (``expected size 8==8, stride
64==128``) and the timed calls of ``--profile`` compile the function again (a recompile the
user's program never made, on a stride guard).

A copy keeping the strides takes the whole span between the first and the last element:
``zeros(8, 1024, 256)[:, -1, :]`` is 8 KB as a view and 7.3 MB as such a copy. Where that
span costs much more than the tensor (``wide``), no copy is made: ``WideCopy`` says why."""

from __future__ import annotations

import torch

# a copy may span at most this many times the tensor's own bytes, or this many bytes more
SPAN_RATIO = 2
SPAN_SLACK = 1 << 20


class WideCopy(RuntimeError):
    """A copy keeping a view's strides would take far more memory than the view."""


def _strided(x: torch.Tensor) -> bool:
    return x.layout == torch.strided and type(x) is torch.Tensor


def span_elements(x: torch.Tensor) -> int:
    """The elements between ``x``'s first and last (``1 + Σ (size - 1)·|stride|``; 0 when
    empty): what ``empty_strided`` allocates for its sizes and strides."""
    if x.numel() == 0:
        return 0
    return 1 + sum((s - 1) * abs(st) for s, st in zip(x.size(), x.stride()))


def copy_bytes(x: torch.Tensor) -> int:
    """The bytes ``strided_copy(x)`` allocates (a clone's where it clones)."""
    if not _strided(x):
        return x.nbytes
    return max(span_elements(x), x.numel()) * x.element_size()


def wide(x: torch.Tensor) -> str:
    """Why a copy of ``x`` keeping its strides costs too much ("" where it does not): its span
    over ``SPAN_RATIO`` times its bytes and ``SPAN_SLACK`` bytes more."""
    need, own = copy_bytes(x), x.nbytes
    if need <= SPAN_RATIO * own or need - own <= SPAN_SLACK:
        return ""
    return (f"a copy keeping the strides of a {tuple(x.size())} view (strides "
            f"{tuple(x.stride())}) would take {_size(need)} for its {_size(own)}")


def _size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def strided_copy(x: torch.Tensor) -> torch.Tensor:
    """A detached copy of ``x`` with its sizes and strides. An overlapping view (an expanded
    input), whose strides no copy can hold, and a tensor not laid out in strides (sparse, a
    tensor subclass) are cloned. Raises ``WideCopy`` where the strides cost too much
    (``wide``)."""
    x = x.detach()
    if not _strided(x):
        return x.clone()
    why = wide(x)
    if why:
        raise WideCopy(why)
    try:
        out = torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device=x.device)
        return out.copy_(x)
    except RuntimeError:  # written-to elements sharing memory: an overlapping view
        return x.clone()
