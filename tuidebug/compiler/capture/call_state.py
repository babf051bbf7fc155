"""What the timed calls of ``--profile`` (``whole_call``) are given and must leave as the
user's program had it: copies of the call's tensor arguments (one copy of a tensor passed
twice), the arguments that are state it must not re-run on (objects holding tensors: a KV
cache), and the module's buffers, put back where the timed calls changed them; what a call
writes in place, put back before each re-run (``Rewound``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from tuidebug.compiler import compat
from tuidebug.compiler.capture.reach import Walk, kind_of
from tuidebug.compiler.capture.side_state import SideState
from tuidebug.compiler.copies import strided_copy


def leaf(x: Any, copies: dict[int, Any] | None = None) -> Any:
    """A copy of a tensor argument (requiring grad as it did, an inference tensor only where it
    was one), anything else as it is. The copy is made where the user's call returned: under
    ``torch.inference_mode()`` a plain clone is an inference tensor, whose other dispatch keys
    fail Dynamo's guard, and the timed calls compiled the function once more (a recompile the
    user's program does not make); it keeps the strides (``copies.strided_copy``: a view with
    gaps cloned contiguous failed the stride guard, the same). ``copies``: those made for this
    call so far, by the original's id: a tensor passed twice is copied once."""
    if isinstance(x, torch.Tensor):
        if copies is not None and id(x) in copies:  # the same tensor twice (input_ids=ids,
            return copies[id(x)]  # labels=ids): Dynamo guards that they are one
        with torch.inference_mode(x.is_inference()):
            copy = strided_copy(x).requires_grad_(x.requires_grad)
        if copies is not None:
            copies[id(x)] = copy
        return copy
    return x


def _holds_tensors(value: Any, limit: int = 5000) -> bool:
    """Whether an object (not a tensor, a number or a string) holds tensors among its
    attributes, or in lists, tuples and dicts of them, at any depth (``reach.Walk``, not into
    modules): transformers' ``EncoderDecoderCache`` (Whisper, T5, BART) holds its keys four
    levels down (cache → ``self_attention_cache`` → ``layers`` → layer → ``keys``). At most
    ``limit`` objects are looked at."""
    return any(depth > 0 and kind_of(item, torch.Tensor)
               for item, depth in Walk([value], limit, modules=False))


def state_holders(args: Any, kwargs: Any) -> list[str]:
    """The arguments that are objects holding tensors (a transformers ``Cache``: its keys,
    values, lengths), which ``leaf`` cannot copy: ``past_key_values (StaticCache)``. A tensor
    argument is copied, and lists, tuples and mappings (a tokenizer's ``BatchEncoding``) of
    tensors are left as the call's."""
    named = [(f"argument {i}", a) for i, a in enumerate(args or ())]
    named += [(str(k), v) for k, v in (kwargs or {}).items()]
    return [f"{n} ({type(v).__name__})" for n, v in named
            if not kind_of(v, torch.Tensor, list, tuple, Mapping) and _holds_tensors(v)]


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


class Rewound:
    """What re-runs of the user's call write in place, put back before each run to what it
    held when the user's call returned (``kept``: ``(name, tensor, what it held)``: the copies
    of the call's tensor arguments, the module's buffers). A step that advances a position
    into a cache (``cache.index_copy_(0, pos, x)``, ``pos.add_(1)``) ran past the cache's end
    after a few re-runs (IndexError), and every re-run but the first ran on state the user's
    program never had. What the call writes is learnt from one run of it (``learn``): a tensor
    whose version counter moved, or that holds something else (eager BatchNorm updates its
    running statistics without moving their version); only those are written back, so a
    buffer the call leaves alone keeps its version (the user's own call may have saved it for
    its backward: see ``restore``)."""

    def __init__(self, kept: list[tuple[str, torch.Tensor, torch.Tensor]],
                 side: SideState | None = None) -> None:
        """``side``: the attributes and gradients the call reaches (``side_state``)."""
        self._kept = [(name, t, saved, compat.version_counter(t)) for name, t, saved in kept]
        self.side = side
        self.written: list[tuple[str, torch.Tensor, torch.Tensor]] = []
        self.learnt = False

    def learn(self) -> None:
        """Take the tensors the run since this was made wrote (before any ``restore``), and
        the attributes and gradients it changed."""
        self.learnt = True
        self.written = [(name, t, saved) for name, t, saved, v in self._kept
                        if compat.version_counter(t) != v or not _same(t, saved)]
        if self.side is not None:
            self.side.learn()

    def writes(self) -> bool:
        """Whether the run ``learn`` saw changed anything that is put back."""
        return bool(self.written or self.names())

    def names(self) -> list[str]:
        side = self.side.names() if self.side is not None else []
        return [name for name, _, _ in self.written] + side

    def restore(self) -> None:
        if self.side is not None:
            self.side.restore()
        with torch.no_grad():
            for _, t, saved in self.written:
                if t.is_inference():  # written as the call wrote it (inference_mode(False)
                    with torch.inference_mode():  # would turn grad mode back on)
                        t.copy_(saved)
                else:
                    t.copy_(saved)


def program_tensors(wrote: list[tuple[str, Any]], args: Any, kwargs: Any,
                    owner: torch.nn.Module | None) -> list[tuple[str, torch.Tensor]]:
    """The program's own tensors the call's compiled graphs write in place that the call does
    not take as arguments nor hold as the module's buffers (a global position and cache, the
    parameters and state an optimizer step updates): re-run, the call writes into them, the
    user's own, and they must be put back. ``wrote``: the call's graphs' ``(name, weak
    reference)`` (``GraphState.wrote``). Nothing is copied yet (``written_state``)."""
    skip = {id(v) for v in [*(args or ()), *(kwargs or {}).values()]
            if isinstance(v, torch.Tensor)}
    if owner is not None:
        skip.update(id(b) for b in owner.buffers())
    out = []
    for name, ref in wrote:
        t = ref()
        if isinstance(t, torch.Tensor) and id(t) not in skip:
            skip.add(id(t))
            out.append((name, t))
    return out


def written_state(named: list[tuple[str, torch.Tensor]]
                  ) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    """``program_tensors``, each with a copy of what it holds now."""
    return [(name, t, t.detach().clone()) for name, t in named]


def rewound(args: Any, kwargs: Any, copies: dict[int, Any], owner: torch.nn.Module | None,
            saved: list[tuple[torch.Tensor, torch.Tensor]],
            state: list[tuple[str, torch.Tensor, torch.Tensor]],
            side: SideState | None = None) -> Rewound:
    """What the re-runs may write, with what it held when the user's call returned: each
    tensor argument's copy (put back from the user's own tensor, which the re-runs never
    touch: no third copy of a large input), the module's buffers (``saved``) and the other
    tensors of the program the graphs write (``state``: ``written_state``)."""
    kept: list[tuple[str, torch.Tensor, torch.Tensor]] = []
    named = [(f"argument {i}", a) for i, a in enumerate(args or ())]
    named += [(str(k), v) for k, v in (kwargs or {}).items()]
    seen: set[int] = set()
    for name, value in named:
        if isinstance(value, torch.Tensor) and id(value) in copies and id(value) not in seen:
            seen.add(id(value))
            kept.append((name, copies[id(value)], value))
    names = [f"buffer {n}" for n, _ in owner.named_buffers()] if owner is not None else []
    kept += [(name, b, copy) for name, (b, copy) in zip(names, saved)]
    return Rewound(kept + state, side)


def raised_again(error: Exception, rewound: Rewound) -> str:
    """Why a call that raised when run again was not timed: at its first re-run (from the
    state the user's call left: a position it advances may already be at its cache's end), or
    at a later one, what it wrote put back before it (it depends on state that is not)."""
    said = next((ln.strip() for ln in str(error).splitlines() if ln.strip()), "")[:300]
    raised = f"{type(error).__name__}: {said}"
    if not rewound.learnt:
        return (f"run once more on copies of its arguments as the user's call left them, the "
                f"call raised {raised} (a call that advances state, as a position into a "
                "cache, may not run again from where the user's call left it); the graphs' "
                "own times are measured on copies")
    put_back = (f"what it writes in place ({', '.join(rewound.names())}) put back before each"
                if rewound.writes() else "it wrote none of its tensor arguments, the module's "
                "buffers or the tensors its graphs write")
    return (f"run again on copies of its arguments ({put_back}), the call raised {raised}: it "
            "depends on state the timing does not put back (a Python attribute or number it "
            "advances, a tensor written by eager code outside its compiled graphs); the "
            "graphs' own times are measured on copies")
