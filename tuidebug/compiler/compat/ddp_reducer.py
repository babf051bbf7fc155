"""DistributedDataParallel's bucket all-reduces, made visible to a rank's progress log.

DDP's C++ reducer issues them from autograd hooks through the C++ ProcessGroup: no Python
collective is called, so the capture's wrappers of ``torch.distributed`` never see them. With no
communication hook registered, the reducer multiplies each gradient by 1/world size as it copies
it into its bucket, then all-reduces the bucket (a sum). :func:`install` wraps
``DistributedDataParallel.__init__``: each model built while it is installed gets a comm hook
(public API: ``register_comm_hook``) that does exactly that — the bucket times 1/size, the same
multiplication in the same dtype (the reducer then copies gradients unscaled), then the process
group's allreduce — and calls ``on_issue(bucket index, is_last, bytes, group)`` before and
``on_done(token)`` when the all-reduce completed. A hook the script registers itself replaces
it: ``register_comm_hook`` on such a model hands the script's hook to the logging wrapper
instead of the reducer, which accepts one hook only.

Not installed (the reducer's own arithmetic would not be matched, or a hook is there), said
through ``warn``: a hook DDP registered while it was built (optimizer in backward), mixed
precision, sparse gradients, DDP's Python reducer (its all-reduces are functional
collectives, logged as such), ``gradient_as_bucket_view`` with a world size that is not a power
of two (the reducer then divides gradients in place, which a multiplication by 1/size matches
exactly only for powers of two). Known difference: under ``Join`` with
``divide_by_initial_world_size=False`` the reducer divides by the ranks still joined, the hook by
the world size (as PyTorch's own ``allreduce_hook``); and a builtin hook registered through the
private ``_register_builtin_comm_hook`` after construction fails as a second hook.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable

import torch

# each model's hook state, beside the model (never in its __dict__: DDP pickles that)
_STATES: "weakref.WeakKeyDictionary[Any, _State]" = weakref.WeakKeyDictionary()


class _State:
    """What the hook needs of its model: the group, the script's own hook once it registers
    one (``delegate``: (state, hook))."""

    def __init__(self, ddp: Any) -> None:
        self.group = ddp.process_group
        self.scale = 1.0 / self.group.size()
        self.delegate: tuple[Any, Callable[..., Any]] | None = None


def _why_not(ddp: Any) -> str | None:
    """Why the logging hook would not be the reducer's own arithmetic on ``ddp``; None if it
    is."""
    if getattr(ddp, "_comm_hooks", None):  # DDP's own (optimizer in backward), registered
        return "a comm hook registered while it was built"
    if getattr(ddp, "_use_python_reducer", False):
        return "DDP's Python reducer (its all-reduces are logged as such)"
    if getattr(ddp, "mixed_precision", None) is not None:
        return "DDP mixed precision"
    if getattr(ddp, "_delay_all_reduce_all_params", False):
        return "every parameter's all-reduce delayed"
    size = ddp.process_group.size()
    if getattr(ddp, "gradient_as_bucket_view", False) and size & (size - 1):
        return f"gradient_as_bucket_view with a world size of {size} (not a power of two)"
    for m in ddp.module.modules():
        if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and m.sparse:
            return "sparse gradients"
    return None


def install(on_issue: Callable[[int, bool, int, Any], Any],
            on_done: Callable[[Any], None], warn: Callable[[str], None]) -> Callable[[], None]:
    """Log the bucket all-reduces of every DDP model built from now on; returns what undoes
    the wrapping (models built meanwhile keep their hook)."""
    try:
        from torch.nn.parallel import DistributedDataParallel as DDP
    except ImportError:
        return lambda: None
    init, register = DDP.__init__, DDP.register_comm_hook

    def hook(state, bucket):  # type: ignore[no-untyped-def]  # DDP checks: no annotations
        token = None
        try:
            buf = bucket.buffer()
            token = on_issue(bucket.index(), bucket.is_last(),
                             buf.numel() * buf.element_size(), state.group)
        except Exception:  # noqa: BLE001 - logging never breaks the job
            pass
        if state.delegate is not None:
            their_state, their_hook = state.delegate
            fut = their_hook(their_state, bucket)
        else:
            buf = bucket.buffer()
            buf.mul_(state.scale)  # what the reducer does while copying into the bucket
            fut = state.group.allreduce([buf]).get_future().then(lambda f: f.value()[0])
        if token is not None:
            try:
                fut.then(lambda f: on_done(token))
            except Exception:  # noqa: BLE001
                pass
        return fut

    def wrapped_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        try:
            why = _why_not(self)
            if why is None:
                state = _State(self)
                register(self, state, hook)
                _STATES[self] = state
            else:
                warn(f"DDP's bucket all-reduces are not logged: {why}")
        except Exception as e:  # noqa: BLE001 - the model works as built without it
            warn(f"DDP's bucket all-reduces are not logged: {e}")

    def wrapped_register(self: Any, state: object, their_hook: Callable[..., Any]) -> None:
        mine = _STATES.get(self)
        if mine is None or mine.delegate is not None:
            return register(self, state, their_hook)  # the reducer says what it says
        check = getattr(self, "_check_comm_hook", None)
        if check is not None:  # a hook DDP refuses is refused as it would be
            check(their_hook)
        try:  # what register_comm_hook records besides the reducer's hook
            self.logger._set_comm_hook_name(their_hook.__qualname__)
            self._comm_hooks.append((their_hook, state))
        except Exception:  # noqa: BLE001 - another torch's bookkeeping; the hook still runs
            pass
        mine.delegate = (state, their_hook)

    DDP.__init__ = wrapped_init  # type: ignore[method-assign]
    DDP.register_comm_hook = wrapped_register  # type: ignore[method-assign]

    def undo() -> None:
        DDP.__init__ = init  # type: ignore[method-assign]
        DDP.register_comm_hook = register  # type: ignore[method-assign]
    return undo

