"""A copy of a tensor to run a compiled graph on again: its sizes and its strides kept. A
compiled graph is compiled for its inputs' strides (Dynamo guards them; Inductor's wrapper
asserts them), and ``clone()`` makes a view with gaps contiguous: a half of
``gate_up.chunk(2, -1)`` (a MoE expert's input in transformers' Mixtral), strides (128, 1),
cloned to (64, 1), made the check's backward re-run raise (``expected size 8==8, stride
64==128``) and the timed calls of ``--profile`` compile the function again (a recompile the
user's program never made, on a stride guard)."""

from __future__ import annotations

import torch


def strided_copy(x: torch.Tensor) -> torch.Tensor:
    """A detached copy of ``x`` with its sizes and strides. An overlapping view (an expanded
    input), whose strides no copy can hold, and a tensor not laid out in strides (sparse, a
    tensor subclass) are cloned."""
    x = x.detach()
    if x.layout != torch.strided or type(x) is not torch.Tensor:
        return x.clone()
    try:
        out = torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device=x.device)
        return out.copy_(x)
    except RuntimeError:  # written-to elements sharing memory: an overlapping view
        return x.clone()
