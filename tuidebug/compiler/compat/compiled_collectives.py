"""The collective ops compiled code calls: Inductor's wrapper issues each collective of a graph
as ``torch.ops._c10d_functional.<op>.default(...)`` (or a ``c10d`` op) and completes it with
``torch.ops._c10d_functional.wait_tensor.default(buf)``. A Python call of an op overload goes
through ``OpOverload.__call__``, which calls the overload's ``_op`` (private): wrapping ``_op``
sees every call the wrapper makes, and nothing else changes (the overload object, its name and
its hash stay the same: lowerings and decompositions keyed on it are found as before)."""

from __future__ import annotations

from typing import Any, Callable

import torch

from tuidebug.compiler.compat.lookup import NotAvailable

# the namespaces of the ops compiled code issues collectives with, and the op that completes one
NAMESPACES = ("_c10d_functional", "c10d")
WAIT_OP = ("_c10d_functional", "wait_tensor")
_NOT_COLLECTIVES = {"check_for_nan"}


class _HashAs:
    """A callable standing in for an overload's ``_op``: calls ``fn``; hashes and compares as
    the original, since ``OpOverload.__hash__`` is ``hash(self._op)``."""

    __slots__ = ("fn", "orig")

    def __init__(self, fn: Callable[..., Any], orig: Any) -> None:
        self.fn = fn
        self.orig = orig

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __hash__(self) -> int:
        return hash(self.orig)

    def __eq__(self, other: object) -> bool:
        return other is self or other == self.orig

    def __getattr__(self, name: str) -> Any:
        return getattr(self.orig, name)


def collective_overloads() -> list[tuple[str, str, Any]]:
    """(namespace, op, overload object) of every collective op overload this torch registers
    (``wait_tensor`` included); raises NotAvailable when op overloads cannot be wrapped."""
    if not hasattr(torch._ops, "OpOverload") or "_op" not in vars(
            torch.ops._c10d_functional.wait_tensor.default):
        raise NotAvailable(f"calling an op overload (OpOverload._op) in torch "
                           f"{torch.__version__}")
    out = []
    for qual in torch._C._dispatch_get_all_op_names():
        ns, _, name = qual.partition("::")
        if ns not in NAMESPACES or name in _NOT_COLLECTIVES or not name:
            continue
        try:
            packet = getattr(getattr(torch.ops, ns), name)
            for overload in packet.overloads():
                out.append((ns, name, getattr(packet, overload)))
        except Exception:  # noqa: BLE001 - an op this torch cannot look up: not wrapped
            continue
    return out


def wrap_overload(overload: Any, make: Callable[[Any], Callable[..., Any]]) -> Callable[[], None]:
    """Have calls of ``overload`` go through ``make(original)``; returns what undoes it."""
    orig = overload._op
    overload._op = _HashAs(make(orig), orig)

    def undo() -> None:
        if isinstance(overload._op, _HashAs) and overload._op.orig is orig:
            overload._op = orig
    return undo


def real_tensors(args: tuple[Any, ...]) -> bool:
    """The call runs on real tensors (not while a compiler traces it with fake or functional
    tensors): the first tensor argument, or the first of a list, is a plain tensor."""
    for a in args:
        if isinstance(a, (list, tuple)) and a:
            a = a[0]
        if isinstance(a, torch.Tensor):
            return type(a) in (torch.Tensor, torch.nn.Parameter)
    return False



def call_arguments_of(overload: Any) -> list[str]:
    """An op overload's argument names, in order (its schema's)."""
    try:
        return [a.name for a in overload._schema.arguments]
    except Exception:  # noqa: BLE001
        return []


def compiled_call_group(names: list[str], args: tuple[Any, ...],
                        kwargs: dict[str, Any]) -> tuple[str, Any]:
    """The process group of an op call made by compiled code (``group_name`` of a functional
    collective, ``process_group`` of a c10d op), labelled as the rank's other collectives are
    (``collective_calls.collective_group``: "default", "group 3 (ranks 0,2)")."""
    from tuidebug.compiler.compat.collective_calls import collective_group

    bound = dict(zip(names, args))
    bound.update(kwargs)
    group = next((bound[k] for k in ("group_name", "process_group", "group") if k in bound),
                 None)
    return collective_group("compiled", ["group"], (group,), {})
