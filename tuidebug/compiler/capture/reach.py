"""What the user's call reaches, found by one bounded walk (``Walk``): the modules, optimizers,
plain Python values, tensors and containers that a re-run of the call may change
(``side_state``), and whether an argument is an object holding tensors
(``call_state.state_holders``).

From the call's roots — the compiled module, the call's arguments, the object a compiled
method is bound to (``torch.compile(trainer.step)``), the function's closure, the globals its
code names and the globals named by the functions those name (``global STEP; STEP += 1`` in a
helper the call calls; at most ``FUNCTIONS`` functions) — the walk goes into lists, tuples,
sets, dicts, bound methods, partials, and the attributes of objects (a module's own attributes
and submodules; a plain object's ``__dict__``): a ``Trainer`` holding ``self.model`` and
``self.opt``, modules in a dict, an optimizer as an attribute. Classes, Python modules and
functions are not walked into, nor a tensor. The walk runs none of the user's code: every
check is on ``type(x)`` (``isinstance`` reads ``__class__``: a dead ``weakref.proxy`` raises,
a ``LocalProxy`` runs code), containers are read through their base type's own methods
(never a subclass's ``__iter__``), attributes through ``object.__getattribute__``. Each object
is looked at once, without recursion; plain values (numbers, strings, None) are not counted,
and at most ``LIMIT`` containers and objects are: a walk cut short says so (``Walk.cut``), and
the whole call is then not timed (a call re-run on state not seen could change the
program)."""

from __future__ import annotations

import functools
import types
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

import torch

PLAIN = (int, float, bool, str, bytes, type(None))
LIMIT = 50_000
FUNCTIONS = 200  # functions whose named globals are looked at, at most
# where values live: (label, namespace, the names looked at there; None: all)
Space = tuple[str, dict[str, Any], "list[str] | None"]
_OPAQUE = (torch.Tensor, *PLAIN, type, types.ModuleType, types.FunctionType,
           types.BuiltinFunctionType, types.CodeType, types.FrameType)


def kind_of(item: Any, *kinds: type) -> bool:
    """``isinstance`` on ``type(item)``: runs no ``__class__`` of the object's own."""
    return issubclass(type(item), kinds)


def own_dict(item: Any) -> dict[str, Any] | None:
    """An object's own ``__dict__`` (read without running a ``__getattr__`` of its own)."""
    if kind_of(item, *_OPAQUE) or not getattr(type(item), "__dictoffset__", 0):
        return None
    try:
        own = object.__getattribute__(item, "__dict__")
    except Exception:  # noqa: BLE001 - a __dict__ descriptor of its own
        return None
    return own if type(own) is dict else None


class Walk:
    """The objects reachable from ``roots`` with their depth (a root: 0), each once, plain
    values left out and tensors not counted: at most ``limit`` containers and objects
    (``cut``: the walk stopped there). ``modules``: whether a module's attributes and
    submodules are walked into (not where an argument's tensors are looked for: a module
    passed to the call is not state it advances)."""

    def __init__(self, roots: Iterable[Any], limit: int = LIMIT, modules: bool = True) -> None:
        self.roots = list(roots)
        self.limit = limit
        self.modules = modules
        self.cut = False

    def __iter__(self) -> Iterator[tuple[Any, int]]:
        seen: set[int] = set()
        counted = 0
        stack: list[tuple[Any, int]] = [(r, 0) for r in reversed(self.roots)
                                        if not kind_of(r, *PLAIN)]
        while stack:
            item, depth = stack.pop()
            if id(item) in seen:
                continue
            tensor = kind_of(item, torch.Tensor)
            if not tensor:
                if counted >= self.limit:
                    self.cut = True
                    return
                counted += 1
            seen.add(id(item))
            yield item, depth
            if not tensor:
                stack.extend((v, depth + 1) for v in _inside(item, self.modules)
                             if not kind_of(v, *PLAIN) and id(v) not in seen)


def _inside(item: Any, modules: bool) -> list[Any]:
    """What the walk goes on to from ``item``: through the base types' own methods."""
    t = type(item)
    if issubclass(t, _OPAQUE):
        return []
    if issubclass(t, list):
        return list.copy(item)
    if issubclass(t, tuple):
        return list(tuple.__iter__(item))
    if issubclass(t, (set, frozenset)):
        return list((set if issubclass(t, set) else frozenset).__iter__(item))
    if issubclass(t, dict):
        return list(dict.values(item))
    if t is types.MethodType:
        return [item.__self__]
    if issubclass(t, functools.partial):
        get = functools.partial.__dict__
        keywords = get["keywords"].__get__(item)
        return [get["func"].__get__(item), *get["args"].__get__(item),
                *(dict.values(keywords) if type(keywords) is dict else ())]
    own = own_dict(item)
    if own is None:
        return []
    if issubclass(t, torch.nn.Module):  # its submodules and its own attributes, not the
        if not modules:  # parameter, buffer and hook tables (tensors and functions)
            return []
        return [v for k, v in own.items() if k == "_modules" or not k.startswith("_")]
    return list(dict.values(own))


@dataclass
class Reached:
    """What a call reaches: its modules (each once, with their submodules), the optimizers
    among what it reaches, where values live (``Space``: each module's and each other
    object's attributes, each optimizer's ``param_groups`` entries but ``params``, the globals
    the function and the functions it names name), the lists, dicts and sets it reaches
    (``containers``), the tensors met among them (``tensors``: what a re-run may write in
    place), and ``cut``: why the walk stopped short (None: it saw everything)."""

    modules: list[torch.nn.Module] = field(default_factory=list)
    optimizers: list[torch.optim.Optimizer] = field(default_factory=list)
    spaces: list[Space] = field(default_factory=list)
    containers: list[Any] = field(default_factory=list)
    tensors: list[torch.Tensor] = field(default_factory=list)
    cut: str | None = None


def functions_named(fn: types.FunctionType, limit: int = FUNCTIONS
                    ) -> list[tuple[types.FunctionType, list[str]]]:
    """``fn`` and the functions reachable by name from its code (the globals its code and its
    nested code objects name that are functions, and theirs), each with the names of its
    globals its code names; at most ``limit`` functions."""
    out: list[tuple[types.FunctionType, list[str]]] = []
    seen: set[int] = set()
    queue = [fn]
    while queue and len(out) < limit:
        f = queue.pop(0)
        if id(f) in seen:
            continue
        seen.add(id(f))
        g = f.__globals__
        names = sorted({n for n in _code_names(f.__code__) if n in g})
        out.append((f, names))
        queue += [g[n] for n in names if type(g[n]) is types.FunctionType]
    return out


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for c in code.co_consts:  # a comprehension's, a nested function's
        if type(c) is types.CodeType:
            names |= _code_names(c)
    return names


def reach(eager: Any, owner: torch.nn.Module | None, args: Any, kwargs: Any,
          limit: int = LIMIT) -> Reached:
    """What the call of ``eager`` (a module, a function, a bound method) on ``args`` and
    ``kwargs`` reaches (``owner``: the compiled module)."""
    roots: list[Any] = [owner] if owner is not None else []
    roots += [*(args or ()), *(dict.values(kwargs) if kwargs else ()), eager]
    fn = eager.__func__ if type(eager) is types.MethodType else eager
    named: list[tuple[types.FunctionType, list[str]]] = []
    if type(fn) is types.FunctionType:
        roots += [c.cell_contents for c in fn.__closure__ or () if _filled(c)]
        named = functions_named(fn)
        roots += [f.__globals__[n] for f, names in named for n in names]
    walk = Walk(roots, limit)
    out = Reached()
    modules: dict[int, torch.nn.Module] = {}
    spaces: list[Space] = []
    for item, _ in walk:
        t = type(item)
        if issubclass(t, torch.Tensor):
            out.tensors.append(item)
        elif issubclass(t, torch.nn.Module):
            for sub in torch.nn.Module.modules(item):
                modules.setdefault(id(sub), sub)
        elif issubclass(t, (list, dict, set)):
            out.containers.append(item)
        elif issubclass(t, torch.optim.Optimizer):
            out.optimizers.append(item)
            own = own_dict(item)
            if own is not None:
                spaces.append((t.__name__, own, None))
                groups = own.get("param_groups")
                for i, g in enumerate(list.copy(groups) if type(groups) is list else ()):
                    if type(g) is dict:  # lr, momentum, betas: a scheduler changes them
                        spaces.append((f"{t.__name__}.param_groups[{i}]", g,
                                       [k for k in g if k != "params"]))
        else:
            own = own_dict(item)
            if own is not None:
                spaces.append((t.__name__, own, None))
    out.modules = list(modules.values())
    out.spaces = [(type(m).__name__, vars(m), None) for m in out.modules] + spaces
    globs: dict[int, tuple[dict[str, Any], set[str]]] = {}
    for f, names in named:  # one space per module's globals: each name once
        globs.setdefault(id(f.__globals__), (f.__globals__, set()))[1].update(names)
    out.spaces += [("global", g, sorted(names)) for g, names in globs.values()]
    if walk.cut:
        out.cut = (f"what the call reaches (its module, arguments, the object its method is "
                   f"bound to, closure and named globals, and what they hold) is more than "
                   f"{limit:,} objects: the walk that finds the modules, optimizers and values "
                   "a re-run changes stopped there, and a call is not re-run on state not "
                   "seen")
    return out


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # an empty cell
        return False
    return True
