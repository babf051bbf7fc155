"""What a re-run of the user's call changes that its compiled graphs do not tell
(``call_state.Rewound`` puts back what they write): the plain Python attributes of the modules
the call reaches (``self.calls += 1`` in a compiled forward: Dynamo applies it at every call),
the ``.grad`` of their parameters (a ``loss.backward()`` inside the compiled callable
accumulates into it at every call), and their parameters written outside the graphs (a graph
break, ``torch.compiler.disable``-d code). Taken before the first re-run (``SideState``),
checked after it (``learn``): attributes and gradients are put back before each later run and
after the last; a parameter written outside the graphs cannot be (no copy of it is kept), and
the whole call is then not timed (``unrestorable``)."""

from __future__ import annotations

import types
from typing import Any

import torch

from tuidebug.compiler import compat

PLAIN = (int, float, bool, str, type(None))
# where plain values live: (label, namespace, the names looked at there; None: all)
Space = tuple[str, dict[str, Any], "list[str] | None"]


def reachable_modules(eager: Any, owner: torch.nn.Module | None, args: Any,
                      kwargs: Any) -> list[torch.nn.Module]:
    """The modules a call reaches: the compiled module, else those among the call's arguments,
    the function's closure and the globals its code names (a training step's ``model``); each
    once, with its submodules."""
    found: list[Any] = [owner] if owner is not None else []
    found += [*(args or ()), *(kwargs or {}).values()]
    fn = getattr(eager, "__func__", eager)
    if isinstance(fn, types.FunctionType):
        found += [c.cell_contents for c in fn.__closure__ or () if _filled(c)]
        found += [fn.__globals__[n] for n in fn.__code__.co_names if n in fn.__globals__]
    out: dict[int, torch.nn.Module] = {}
    for m in found:
        if isinstance(m, torch.nn.Module):
            for sub in m.modules():
                out.setdefault(id(sub), sub)
    return list(out.values())


def reachable_optimizers(eager: Any) -> list[torch.optim.Optimizer]:
    """The optimizers a compiled function's closure or named globals hold (``opt.step()``)."""
    fn = getattr(eager, "__func__", eager)
    if not isinstance(fn, types.FunctionType):
        return []
    found = [c.cell_contents for c in fn.__closure__ or () if _filled(c)]
    found += [fn.__globals__[n] for n in fn.__code__.co_names if n in fn.__globals__]
    return [o for o in found if isinstance(o, torch.optim.Optimizer)]


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # an empty cell
        return False
    return True


def parameters(modules: list[torch.nn.Module], optimizers: list[Any]) -> list[tuple[str, Any]]:
    """The parameters of ``modules`` and of ``optimizers``' groups, named, each once."""
    out: dict[int, tuple[str, Any]] = {}
    for m in modules:
        for n, p in m.named_parameters(recurse=False):
            out.setdefault(id(p), (f"{type(m).__name__}.{n}", p))
    for opt in optimizers:
        for g in opt.param_groups:
            for i, p in enumerate(g.get("params", [])):
                out.setdefault(id(p), (f"optimizer parameter {i}", p))
    return list(out.values())


class SideState:
    """The plain attributes, gradients and parameter versions of what the call reaches, as
    the user's call left them; ``learn`` after one re-run, ``restore`` before each later one
    and after the last."""

    def __init__(self, spaces: list[Space], params: list[tuple[str, Any]],
                 tracked: set[int]) -> None:
        """``spaces``: ``(label, namespace, names)`` (``namespaces``);
        ``tracked``: the ids of tensors ``Rewound`` puts back (a parameter the graphs write,
        an optimizer step's: not untracked)."""
        self._attrs = [(label, ns, k, ns[k]) for label, ns, names in spaces
                       for k in (list(ns) if names is None else names)
                       if k in ns and isinstance(ns[k], PLAIN)]
        self._grads = [(n, p, p.grad, _copy(p.grad)) for n, p in params]
        self._params = [(n, p, compat.version_counter(p)) for n, p in params
                        if id(p) not in tracked]
        self.attributes: list[tuple[str, dict[str, Any], str, Any]] = []
        self.grads: list[tuple[str, Any, Any, Any]] = []
        self.unrestorable: list[str] = []

    def nbytes(self) -> int:
        """The bytes of the gradients' copies."""
        return sum(c.nbytes for _, _, _, c in self._grads if c is not None)

    def learn(self) -> None:
        """What the one re-run since this was made changed."""
        self.attributes = [(label, ns, k, v) for label, ns, k, v in self._attrs
                           if k not in ns or not _same(ns[k], v)]
        self.grads = [(n, p, g, c) for n, p, g, c in self._grads
                      if p.grad is not g or (g is not None and not torch.equal(g, c))]
        self.unrestorable = [n for n, p, v in self._params if compat.version_counter(p) != v]

    def names(self) -> list[str]:
        return ([f"{label}.{k}" for label, _, k, _ in self.attributes]
                + [f"{n}.grad" for n, _, _, _ in self.grads])

    def restore(self) -> None:
        """Put back what ``learn`` found changed: each attribute's value, each gradient as the
        user's call left it (None where it had none)."""
        for _, ns, k, v in self.attributes:
            ns[k] = v
        with torch.no_grad():
            for _, p, g, c in self.grads:
                if p.grad is not g:
                    p.grad = g
                if g is not None:
                    g.copy_(c)


def namespaces(eager: Any, modules: list[torch.nn.Module]) -> list[Space]:
    """Where a re-run may write plain values: each module's attributes (all of them), and the
    globals a compiled function's code names (``STEP += 1``)."""
    out: list[Space] = [(type(m).__name__, vars(m), None) for m in modules]
    fn = getattr(eager, "__func__", eager)
    if isinstance(fn, types.FunctionType):
        out.append(("global", fn.__globals__, sorted(set(fn.__code__.co_names))))
    return out


def _same(now: Any, was: Any) -> bool:
    return type(now) is type(was) and (now == was or (now != now and was != was))


def _copy(g: Any) -> Any:
    return g.detach().clone() if isinstance(g, torch.Tensor) else None
