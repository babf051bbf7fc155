"""What a re-run of the user's call changes that its compiled graphs do not tell
(``call_state.Rewound`` puts back what they write), of what the call reaches (``reach``): the
plain Python attributes of its modules and other objects (``self.calls += 1`` in a compiled
forward: Dynamo applies it at every call; a ``Trainer``'s step count), the ``.grad`` of their
parameters (a ``loss.backward()`` inside the compiled callable accumulates into it at every
call), and their parameters written outside the graphs (a graph break,
``torch.compiler.disable``-d code). Taken before the first re-run (``SideState``), checked
after it (``learn``): attributes and gradients are put back before each later run and after
the last. The parameters and state of the optimizers the call reaches are copied before the
first re-run and put back as the graphs' writes are (``optimizer_tensors``: an eager
``opt.step()`` would otherwise step them once more at every re-run); any other parameter
written outside the graphs cannot be (no copy of it is kept): it is named (``unrestorable``),
and the whole call is then not timed.

What else a re-run advances is put back or told: the entries of each reached optimizer's
``param_groups`` (an LR scheduler stepped inside the call changes ``lr`` at every call; a
tensor ``lr`` is copied), small tensor attributes of plain objects (a GradScaler's ``_scale``
and ``_growth_tracker``: copied, ``space_tensors``), the lists, dicts and sets the call reaches
(``HIST.append(loss)``: their items as they were, a shallow copy), the globals of the
functions it names (``reach.functions_named``); any other tensor the walk met that a re-run
wrote in place (its version counter moved), of which no copy is kept, is named as a parameter
is (``unrestorable``)."""

from __future__ import annotations

from collections import Counter, OrderedDict, defaultdict
from typing import Any

import torch

from tuidebug.compiler import compat
from tuidebug.compiler.capture.reach import PLAIN, Space, kind_of


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


def optimizer_tensors(optimizers: list[Any], params: list[tuple[str, Any]]
                      ) -> list[tuple[str, torch.Tensor]]:
    """The parameters and state tensors (momentum, ``exp_avg``, ``step``) of ``optimizers``,
    named (a parameter by its name among ``params``), each once: what an optimizer step
    writes, in the graphs or outside them."""
    names = {id(p): n for n, p in params}
    out: dict[int, tuple[str, torch.Tensor]] = {}
    for opt in optimizers:
        kind = type(opt).__name__
        for g in opt.param_groups:
            for i, p in enumerate(g.get("params", [])):
                if isinstance(p, torch.Tensor):
                    out.setdefault(id(p), (names.get(id(p), f"{kind} parameter {i}"), p))
        for p, state in dict.items(opt.state):
            for key, t in (state.items() if isinstance(state, dict) else ()):
                if isinstance(t, torch.Tensor):
                    owner = names.get(id(p), f"{kind} parameter")
                    out.setdefault(id(t), (f"{kind} {key} of {owner}", t))
    return list(out.values())


def _kept(v: Any) -> bool:
    """A value compared by what it is: a plain one, or a tuple of them (Adam's ``betas``)."""
    return type(v) in PLAIN or (type(v) is tuple and all(type(x) in PLAIN for x in v))


SMALL = 2**20  # bytes: a tensor held in a space up to this is copied, a larger one watched


def space_tensors(spaces: list[Space], skip: set[int]) -> list[tuple[str, torch.Tensor]]:
    """The small tensors (``SMALL``) held directly in ``spaces`` (a GradScaler's ``_scale``, a
    group's tensor ``lr``, a step count), named, each once, but those of ``skip`` (parameters,
    what ``Rewound`` puts back): copied before the first re-run (``SideState``), within the
    copies' budget. A larger one (a dataset a global holds) is not copied: watched as any
    other tensor the call reaches, told where a re-run writes it."""
    out: dict[int, tuple[str, torch.Tensor]] = {}
    for label, ns, names in spaces:
        for k in (list(ns) if names is None else names):
            v = ns.get(k)
            if type(v) is not torch.nn.Parameter and kind_of(v, torch.Tensor) \
                    and id(v) not in skip and v.nbytes <= SMALL:
                out.setdefault(id(v), (f"{label}.{k}", v))
    return list(out.values())


class SideState:
    """The plain attributes, tensor attributes, containers, gradients and parameter versions
    of what the call reaches, as the user's call left them; ``learn`` after one re-run,
    ``restore`` before each later one and after the last."""

    def __init__(self, spaces: list[Space], params: list[tuple[str, Any]],
                 tracked: set[int], containers: list[Any] | None = None,
                 tensors: list[torch.Tensor] | None = None,
                 kept: list[torch.Tensor] | None = None) -> None:
        """``spaces``: ``(label, namespace, names)`` (``reach.Reached.spaces``);
        ``tracked``: the ids of tensors ``Rewound`` puts back (a parameter the graphs write,
        an optimizer step's: not untracked); ``containers``: the lists, dicts and sets the
        call reaches; ``tensors``: the other tensors it reaches (watched, not copied), but
        those whose bytes lie inside a tensor put back (``kept``: those ``Rewound`` puts back;
        a view of a cache put back moves with it; another part of a flat buffer does not)."""
        ids = {id(p) for _, p in params} | tracked
        self._attrs = [(label, ns, k, ns[k]) for label, ns, names in spaces
                       for k in (list(ns) if names is None else names) if k in ns]
        copied = space_tensors(spaces, ids)
        self._tensors = [(n, t, t.detach().clone(), compat.version_counter(t))
                         for n, t in copied]
        spaced = {id(ns) for _, ns, _ in spaces}
        self._containers = [(c, _items(c)) for c in containers or () if id(c) not in spaced]
        ids |= {id(t) for _, t in copied}
        put = [_span(t) for t in [*(kept or ()), *(p for _, p in params), *(t for _, t in copied)]]
        where = {id(v): f"{label}.{k}" for label, ns, k, v in self._attrs
                 if kind_of(v, torch.Tensor)}
        # a tensor over other bytes of a put-back tensor's storage shares its version counter
        # (views of one base do): a write to the put-back one moves it too, so it is told by
        # what it holds (a copy, when small), else not watched (never a false "it wrote")
        self._loose = []
        for t in tensors or ():
            span = _span(t)
            if id(t) in ids or _inside(span, put):
                continue
            shared = span is not None and any(p is not None and p[0] == span[0] for p in put)
            if shared and t.nbytes > SMALL:
                continue
            self._loose.append((where.get(id(t), f"a tensor of shape {tuple(t.shape)}"), t,
                                compat.version_counter(t),
                                t.detach().clone() if shared else None))
        self._grads = [(n, p, p.grad, _copy(p.grad)) for n, p in params]
        self._params = [(n, p, compat.version_counter(p)) for n, p in params
                        if id(p) not in tracked]
        self.attributes: list[tuple[str, dict[str, Any], str, Any]] = []
        self.tensors: list[tuple[str, torch.Tensor, torch.Tensor]] = []
        self.containers: list[tuple[Any, Any]] = []
        self.grads: list[tuple[str, Any, Any, Any]] = []
        self.unrestorable: list[str] = []
        self.subclassed: list[str] = []

    def nbytes(self) -> int:
        """The bytes of the gradients' and tensor attributes' copies."""
        return sum(c.nbytes for _, _, _, c in self._grads if c is not None) + sum(
            c.nbytes for _, _, c, _ in self._tensors)

    def learn(self) -> None:
        """What the one re-run since this was made changed."""
        self.attributes = [(label, ns, k, v) for label, ns, k, v in self._attrs
                           if k not in ns or not _same(ns[k], v)]
        self.tensors = [(n, t, c) for n, t, c, v in self._tensors
                        if compat.version_counter(t) != v or not torch.equal(t, c)]
        changed = [(c, items) for c, items in self._containers
                   if not _same_items(c, _items(c), items)]
        self.containers = [(c, items) for c, items in changed if type(c) in PUT_BACK]
        # a subclass's own methods are user code (never run): its items cannot be put back
        self.subclassed = [f"{type(c).__name__} of {len(items)} items" for c, items in changed
                           if type(c) not in PUT_BACK]
        self.grads = [(n, p, g, c) for n, p, g, c in self._grads
                      if p.grad is not g or (g is not None and not torch.equal(g, c))]
        self.unrestorable = [n for n, p, v in self._params if compat.version_counter(p) != v]
        self.unrestorable += [n for n, t, v, c in self._loose
                              if (not torch.equal(t, c) if c is not None else
                                  v is not None and compat.version_counter(t) != v)]

    def listed(self) -> str:
        """The parameters a re-run wrote that cannot be put back, named (the first 8)."""
        names = self.unrestorable
        return ", ".join(names[:8]) + (" …" if len(names) > 8 else "")

    def why(self) -> str | None:
        """Why the call cannot be re-run: it wrote parameters or other tensors it reaches
        outside its compiled graphs (a graph break, ``torch.compiler.disable``-d code) that
        are no optimizer's it reaches, of which no copy is kept."""
        said = []
        if self.subclassed:
            said.append(f"changed the items of containers it reaches that are subclasses of "
                        f"dict, list or set ({', '.join(self.subclassed[:8])}), whose items "
                        "cannot be put back before each re-run without running their own code")
        if self.unrestorable:
            said.append(f"wrote parameters or tensors it reaches ({self.listed()}) outside its "
                        "compiled graphs (a graph break, torch.compiler.disable'd code), which "
                        "cannot be put back before each re-run")
        if not said:
            return None
        return f"run again, the call {'; and it '.join(said)}; the graphs' own times are " \
               "measured on copies"

    def names(self) -> list[str]:
        return ([f"{label}.{k}" for label, _, k, _ in self.attributes]
                + [n for n, _, _ in self.tensors if n not in
                   {f"{label}.{k}" for label, _, k, _ in self.attributes}]
                + [f"{type(c).__name__} of {len(items)} items" for c, items in self.containers]
                + [f"{n}.grad" for n, _, _, _ in self.grads])

    def restore(self) -> None:
        """Put back what ``learn`` found changed: each attribute's value, each tensor
        attribute's contents, each container's items, each gradient as the user's call left
        it (None where it had none)."""
        for _, ns, k, v in self.attributes:
            ns[k] = v
        for c, items in self.containers:
            _put_items(c, items)
        with torch.no_grad():
            for _, t, c in self.tensors:
                t.copy_(c)
            for _, p, g, c in self.grads:
                if p.grad is not g:
                    p.grad = g
                if g is not None:
                    g.copy_(c)


def _same(now: Any, was: Any) -> bool:
    """A plain value equal to what it was; anything else the same object (an attribute
    replaced: a scheduler's ``_last_lr``, a new tensor)."""
    if not _kept(was):
        return now is was
    return type(now) is type(was) and (now == was or (now != now and was != was))


PUT_BACK = (dict, list, set, OrderedDict, defaultdict, Counter)
"""The container types whose items are put back (through their own C methods); any other
subclass's items changed by a re-run are told, not put back."""


def _items(c: Any) -> list[Any]:
    """A shallow copy of a container's items, through its base type's own methods (a dict's:
    its (key, value) pairs; an OrderedDict's in its order)."""
    if type(c) is OrderedDict:
        return list(OrderedDict.items(c))
    if issubclass(type(c), dict):
        return list(dict.items(c))
    if issubclass(type(c), list):
        return list.copy(c)
    return list(set.__iter__(c))


def _same_items(c: Any, now: list[Any], was: list[Any]) -> bool:
    """The same items, each the same object (a set's in any order)."""
    if len(now) != len(was):
        return False
    if issubclass(type(c), dict):
        return all(a[0] is b[0] and a[1] is b[1] for a, b in zip(now, was))
    if issubclass(type(c), list):
        return all(a is b for a, b in zip(now, was))
    return {id(x) for x in now} == {id(x) for x in was}


def _put_items(c: Any, items: list[Any]) -> None:
    """Put back a container's items through its own type's C methods: only one of
    ``PUT_BACK`` (an OrderedDict's order table is not a dict's: ``dict.clear`` on one leaves
    it broken)."""
    t = type(c)
    if t not in PUT_BACK:
        raise TypeError(f"{t.__name__}: not a container whose items are put back")
    t.clear(c)
    if t is list:
        list.extend(c, items)
    elif t is Counter:  # Counter.update counts what it is given: dict's sets the pairs
        dict.update(c, items)
    else:
        t.update(c, items)


def _span(t: Any) -> tuple[int, int, int] | None:
    """The bytes a tensor's elements lie in: its storage's address and the first and past-last
    byte in it (from its offset, sizes and strides); None where it has none to tell (a tensor
    subclass, meta)."""
    try:
        ptr = int(t.untyped_storage().data_ptr())
        size = t.element_size()
        lo = t.storage_offset() * size
        if t.numel() == 0:
            return (ptr, lo, lo) if ptr else None
        last = sum((n - 1) * abs(st) for n, st in zip(t.shape, t.stride()))
        return (ptr, lo, lo + (last + 1) * size) if ptr else None
    except Exception:  # noqa: BLE001
        return None


def _inside(span: tuple[int, int, int] | None,
            put: list[tuple[int, int, int] | None]) -> bool:
    """Whether the bytes ``span`` covers lie inside one of ``put``'s (a view of a tensor put
    back moves with it; a tensor over other bytes of the same storage, a flat buffer's other
    parameters, does not)."""
    return span is not None and any(
        p is not None and p[0] == span[0] and p[1] <= span[1] and span[2] <= p[2] for p in put)


def _copy(g: Any) -> Any:
    return g.detach().clone() if isinstance(g, torch.Tensor) else None
