"""DistributedDataParallel's bucket all-reduces, made visible to a rank's progress log.

DDP's C++ reducer issues them from autograd hooks through the C++ ProcessGroup: no Python
collective is called, so the capture's wrappers of ``torch.distributed`` never see them. With no
communication hook registered, the reducer multiplies each gradient by 1/divisor as it copies
it into its bucket (with ``batched_grad_copy``: copies them, then divides the whole bucket by
the divisor), then all-reduces the bucket (a sum). The divisor is the world size, except
where DDP's forward handed the reducer a ``Join`` work handle with
``divide_by_initial_world_size=False``: then it is that all-reduce's result (the ranks not yet
joined), and it stays so for later steps too (the reducer keeps the last handle).

:func:`install` wraps ``DistributedDataParallel.__init__``: each model built while it is
installed gets a comm hook (registered straight on its reducer, so DDP's own bookkeeping —
``_comm_hooks``, the logger's hook name — stays as without tuidebug) that does exactly that: the
bucket times 1/divisor (divided by it, with ``batched_grad_copy``), in the same dtype (the reducer then copies
gradients unscaled), then the process group's allreduce; it calls ``on_issue(bucket index,
is_last, bytes, group)`` before and ``on_done(token)`` when the all-reduce completed. The divisor
is read at call time: the model's current process group, and the Join handle DDP last gave the
reducer (recorded by wrapping ``Join.notify_join_context``).

Undone (the capture ends), no new model is hooked; a model already hooked keeps its hook (the
reducer takes one only, and cannot give it back), and, while any such model lives, so do the
wrappers below: used after the capture, or in a second traced region, the model trains and
takes the script's own hook as without tuidebug, its all-reduces logged by whichever capture
listens then (none: not logged).

A hook the script registers replaces ours, whichever way it does (``register_comm_hook``,
``_register_builtin_comm_hook``, ``register_ddp_comm_hook``, ``_register_fused_optim``, or
``torch.distributed._register_comm_hook`` / ``_register_builtin_comm_hook`` directly): both of
torch's registration functions are wrapped, and for a hooked model they hand the script's hook to
the logging wrapper instead of the reducer (which accepts one hook only); a builtin hook runs as
the C++ one does (ALLREDUCE: divide by the group size, all-reduce; FP16_COMPRESS: to float16,
divide, all-reduce, copy back), on the group the model had when it was registered.

Not installed (the reducer's own arithmetic would not be matched, or a hook is there), said
through ``warn``: a hook DDP registered while it was built (optimizer in backward), mixed
precision, sparse gradients, DDP's Python reducer (its all-reduces are functional collectives,
logged as such), every parameter's all-reduce delayed, ``skip_all_reduce_unused_params``,
``gradient_as_bucket_view`` without ``batched_grad_copy`` and with a world size above 2 (the reducer then divides gradients that are already bucket views in place, which
a multiplication by 1/divisor matches exactly only for powers of two: a world size of 3, or a
Join leaving 3 of 4 ranks, is not).
"""

from __future__ import annotations

import functools
import weakref
from typing import Any, Callable

import torch

from tuidebug.compiler.compat.lookup import own_frame_skipped

# each hooked model's state, beside the model (never in its __dict__: DDP pickles that)
_STATES: "weakref.WeakKeyDictionary[Any, _State]" = weakref.WeakKeyDictionary()


class _State:
    """What the hook needs of its model: the model (weakly), the script's own hook once it
    registers one (``delegate``: (state, hook)), and the Join work handle DDP last gave the
    reducer with whether the reducer ignores it (``join``: (work, divide_by_initial))."""

    def __init__(self, ddp: Any) -> None:
        self.ddp = weakref.ref(ddp)
        self.reducer = id(ddp.reducer)  # an id: the reducer holds this state (no cycle)
        # batched_grad_copy (torch >= 2.13): the reducer divides the whole bucket in place
        self.batched = bool(getattr(ddp, "batched_grad_copy", False))
        self.delegate: tuple[Any, Callable[..., Any]] | None = None
        self.join: tuple[Any, bool] | None = None

    @property
    def group(self) -> Any:
        ddp = self.ddp()
        if ddp is None:
            raise RuntimeError("the DDP model is gone")
        return ddp.process_group

    def divisor(self) -> int:
        """The reducer's own divisor (``Reducer::set_divide_factor``)."""
        if self.join is not None and not self.join[1]:
            work = self.join[0]
            work.wait()
            return int(work.get_future().value()[0].item())
        return self.group.size()


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
    if getattr(ddp, "skip_all_reduce_unused_params", False):
        return "skip_all_reduce_unused_params"
    size = ddp.process_group.size()
    if (getattr(ddp, "gradient_as_bucket_view", False) and size > 2
            and not getattr(ddp, "batched_grad_copy", False)):
        return (f"gradient_as_bucket_view with a world size of {size} (the reducer divides in "
                "place by a count that need not be a power of two)")
    for m in ddp.module.modules():
        if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and m.sparse:
            return "sparse gradients"
    return None


def _state_of(reducer: Any) -> _State | None:
    for ddp, state in list(_STATES.items()):
        if getattr(ddp, "reducer", None) is reducer and state.reducer == id(reducer):
            return state
    return None


def _builtin(kind: Any, group: Any) -> Callable[..., Any] | None:
    """The Python twin of one of the reducer's builtin hooks (torch/csrc/distributed/c10d/
    default_comm_hooks.cpp), on ``group``; None for a kind it does not know."""
    import torch.distributed as dist

    kinds = dist.BuiltinCommHookType
    if kind == kinds.ALLREDUCE:
        def allreduce(_state, bucket):  # type: ignore[no-untyped-def]
            buf = bucket.buffer()
            buf.div_(group.size())  # tensors[0] /= state_->getSize()
            return group.allreduce([buf]).get_future().then(lambda f: f.value()[0])
        return allreduce
    if kind == kinds.FP16_COMPRESS:
        def fp16_compress(_state, bucket):  # type: ignore[no-untyped-def]
            buf = bucket.buffer()
            compressed = buf.to(torch.float16)
            compressed.div_(group.size())

            def decompress(f):  # type: ignore[no-untyped-def]
                buf.copy_(f.value()[0])
                return buf
            return group.allreduce([compressed]).get_future().then(decompress)
        return fp16_compress
    return None


class _Listener:
    """Who logs the bucket all-reduces now (the rank's progress log while a capture runs)."""

    def __init__(self, on_issue: Callable[[int, bool, int, Any], Any],
                 on_done: Callable[[Any], None]) -> None:
        self.on_issue = on_issue
        self.on_done = on_done


_LISTENER: list[_Listener] = []  # the one listening now, if any
_WRAPPED: dict[str, Any] = {}  # torch's originals while the wrappers are in: "register", …
_HOOKED = [0]  # hooked models still alive: the registration wrappers stay while any is


def _hook(state, bucket):  # type: ignore[no-untyped-def]  # DDP checks: no annotations
    token = None
    listener = _LISTENER[0] if _LISTENER else None
    if listener is not None:
        try:
            buf = bucket.buffer()
            token = (listener, listener.on_issue(bucket.index(), bucket.is_last(),
                                                 buf.numel() * buf.element_size(),
                                                 state.group))
        except Exception:  # noqa: BLE001 - logging never breaks the job
            token = None
    if state.delegate is not None:
        their_state, their_hook = state.delegate
        fut = their_hook(their_state, bucket)
    else:
        buf, divisor = bucket.buffer(), state.divisor()
        if state.batched:  # Reducer::flush_deferred_copies: one div_ of the bucket
            buf.div_(divisor)
        else:  # what the reducer does copying into the bucket (at::mul_out by 1/divisor)
            buf.mul_(1.0 / divisor)
        fut = state.group.allreduce([buf]).get_future().then(lambda f: f.value()[0])
    if token is not None and token[1] is not None:
        # logged in the future the reducer waits for, not in one beside it: a callback left
        # pending on gloo's thread once the backward returned waits there for the GIL, and
        # the script freeing the model (the last reference to its process group, after
        # destroy_process_group) joins that thread holding the GIL — the rank hung at exit
        # where untraced it ended
        fut = fut.then(functools.partial(_done, token))
    return fut


def _done(token: tuple[_Listener, Any], fut: Any) -> Any:
    """The bucket's all-reduce completed: logged (never raising into the reducer), and its
    value passed on as it was."""
    try:
        token[0].on_done(token[1])
    except Exception:  # noqa: BLE001 - logging never breaks the job
        pass
    return fut.value()


def install(on_issue: Callable[[int, bool, int, Any], Any],
            on_done: Callable[[Any], None], warn: Callable[[str], None]) -> Callable[[], None]:
    """Log the bucket all-reduces of every DDP model built from now on; returns what undoes
    it. Models built meanwhile keep their hook, and with it what it needs of torch for as long
    as any of them lives (the registration functions that hand the script's own hook to it,
    the Join handle it divides by): such a model, used after the capture ended, trains and
    takes the script's hook as without tuidebug, its all-reduces logged by the capture
    installed then, if any."""
    try:
        import torch.distributed as dist
        from torch.distributed.algorithms.join import Join
        from torch.nn.parallel import DistributedDataParallel as DDP
        dist._register_comm_hook, dist._register_builtin_comm_hook  # noqa: B018
        Join.notify_join_context  # noqa: B018
    except (ImportError, AttributeError):
        return lambda: None
    listener = _Listener(on_issue, on_done)
    _LISTENER[:] = [listener]
    _wrap_registration()
    init = DDP.__init__

    @functools.wraps(init)  # scripts read DDP's signature (inspect.signature) to pick options
    def wrapped_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        try:
            why = _why_not(self)
            if why is None:
                state = _State(self)
                _WRAPPED["register"](self.reducer, state, _hook)
                _keep(self.process_group)
                _STATES[self] = state
                _HOOKED[0] += 1
                weakref.finalize(self, _gone)
            else:
                warn(f"DDP's bucket all-reduces are not logged: {why}")
        except Exception as e:  # noqa: BLE001 - the model works as built without it
            warn(f"DDP's bucket all-reduces are not logged: {e}")

    DDP.__init__ = wrapped_init  # type: ignore[method-assign]

    def undo() -> None:
        DDP.__init__ = init  # type: ignore[method-assign]
        if _LISTENER and _LISTENER[0] is listener:
            _LISTENER.clear()
        if not _HOOKED[0]:
            _unwrap_registration()
    return undo


_GROUPS: list[Any] = []  # the hooked models' process groups, kept until the script exits


def _keep(group: Any) -> None:
    """Keep ``group`` (the Python object) until the script exits. The hook's futures run Python
    callbacks on gloo's thread, and each needs the GIL once more after the reducer's wait is
    over (to drop its function). Were the reducer the last to hold the group, freeing the model
    (after ``destroy_process_group``) would run the group's destructor, which joins that
    thread, with the GIL held: the rank hung at exit where untraced it ended. Dropped last
    from Python (at exit), torch destroys a group with the GIL released."""
    if not any(g is group for g in _GROUPS):
        if not _GROUPS:
            import atexit

            atexit.register(_GROUPS.clear)
        _GROUPS.append(group)


def _gone() -> None:
    """A hooked model was freed: with none left and no capture listening, torch's own
    registration functions are put back."""
    _HOOKED[0] -= 1
    if not _HOOKED[0] and not _LISTENER:
        _unwrap_registration()


def _wrap_registration() -> None:
    """Wrap torch's comm hook registration and ``Join.notify_join_context`` (once: a second
    capture finds them wrapped)."""
    import torch.distributed as dist
    from torch.distributed.algorithms.join import Join

    if _WRAPPED:
        return
    register, register_builtin = dist._register_comm_hook, dist._register_builtin_comm_hook
    notify = Join.notify_join_context

    def wrapped_register(reducer: Any, state: object, their_hook: Callable[..., Any]) -> None:
        mine = _state_of(reducer)
        if mine is None or mine.delegate is not None:
            return register(reducer, state, their_hook)  # the reducer says what it says
        mine.delegate = (state, their_hook)

    def wrapped_register_builtin(reducer: Any, kind: Any) -> None:
        mine = _state_of(reducer)
        ddp = mine.ddp() if mine is not None else None
        twin = _builtin(kind, ddp.process_group) if ddp is not None else None
        if mine is None or mine.delegate is not None:
            return register_builtin(reducer, kind)  # the reducer says what it says
        if twin is not None:  # an unknown kind: the reducer keeps its default (as ours does)
            mine.delegate = (None, twin)

    def wrapped_notify(joinable: Any) -> Any:
        work = notify(joinable)
        mine = _STATES.get(joinable) if work is not None else None
        if mine is not None:  # DDP hands this to the reducer next, with this flag
            mine.join = (work, bool(getattr(joinable, "_divide_by_initial_world_size", True)))
        return work

    _WRAPPED.update(register=register, register_builtin=register_builtin, notify=notify)
    dist._register_comm_hook = wrapped_register
    dist._register_builtin_comm_hook = wrapped_register_builtin
    Join.notify_join_context = staticmethod(  # type: ignore[method-assign,assignment]
        _traced_through(wrapped_notify))


def _traced_through(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (the notify wrapper), which DDP's forward calls: Dynamo never compiles its frame
    as one of its own (``own_frame_skipped``), yet traces through it where it traces DDP's
    forward, as it traces torch's own function there (a ``torch.compiler.disable`` of it broke a
    compiled DDP forward's graph at the wrapper, where untraced it breaks further on: another
    break, a wrong one, in the trace). Where torch cannot skip it: disabled (that break again)."""
    import torch._dynamo.eval_frame  # noqa: F401 - DDP's forward may be compiled: loaded now

    return fn if own_frame_skipped(fn) else torch.compiler.disable(fn)


def _unwrap_registration() -> None:
    import torch.distributed as dist
    from torch.distributed.algorithms.join import Join

    if not _WRAPPED:
        return
    dist._register_comm_hook = _WRAPPED["register"]
    dist._register_builtin_comm_hook = _WRAPPED["register_builtin"]
    Join.notify_join_context = staticmethod(  # type: ignore[method-assign,assignment]
        _WRAPPED["notify"])
    _WRAPPED.clear()
