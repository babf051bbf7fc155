"""What the user's call reaches, found by one bounded walk (``Walk``): the modules, optimizers
and plain Python values that a re-run of the call may change (``side_state``), and whether an
argument is an object holding tensors (``call_state.state_holders``).

From the call's roots — the compiled module, the call's arguments, the object a compiled
method is bound to (``torch.compile(trainer.step)``), the function's closure and the globals
its code names — the walk goes into lists, tuples, sets, dicts, bound methods, partials, and
the attributes of objects (a module's own attributes and submodules; a plain object's
``vars``): a ``Trainer`` holding ``self.model`` and ``self.opt``, modules in a dict, an
optimizer as an attribute. Classes, Python modules and functions are not walked into, nor a
tensor. Each object is looked at once, without recursion, and at most ``LIMIT`` of them: a
walk cut short says so (``Walk.cut``), and the whole call is then not timed (a call re-run on
state not seen could change the program)."""

from __future__ import annotations

import functools
import types
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

import torch

PLAIN = (int, float, bool, str, bytes, type(None))
LIMIT = 50_000
# where plain values live: (label, namespace, the names looked at there; None: all)
Space = tuple[str, dict[str, Any], "list[str] | None"]
_OPAQUE = (torch.Tensor, *PLAIN, type, types.ModuleType, types.FunctionType,
           types.BuiltinFunctionType, types.CodeType, types.FrameType)


class Walk:
    """The objects reachable from ``roots`` with their depth (a root: 0), each once, at most
    ``limit`` of them (``cut``: the walk stopped there). ``modules``: whether a module's
    attributes and submodules are walked into (not where an argument's tensors are looked for:
    a module passed to the call is not state it advances)."""

    def __init__(self, roots: Iterable[Any], limit: int = LIMIT, modules: bool = True) -> None:
        self.roots = list(roots)
        self.limit = limit
        self.modules = modules
        self.cut = False

    def __iter__(self) -> Iterator[tuple[Any, int]]:
        seen: set[int] = set()
        stack: list[tuple[Any, int]] = [(r, 0) for r in reversed(self.roots)]
        while stack:
            item, depth = stack.pop()
            if id(item) in seen:
                continue
            if len(seen) >= self.limit:
                self.cut = True
                return
            seen.add(id(item))
            yield item, depth
            stack.extend((v, depth + 1) for v in _inside(item, self.modules))


def _inside(item: Any, modules: bool) -> list[Any]:
    """What the walk goes on to from ``item``."""
    if isinstance(item, _OPAQUE):
        return []
    if isinstance(item, (list, tuple, set, frozenset)):
        return list(item)
    if isinstance(item, dict):
        return list(dict.values(item))
    if isinstance(item, types.MethodType):
        return [item.__self__]
    if isinstance(item, functools.partial):
        return [item.func, *item.args, *item.keywords.values()]
    if isinstance(item, torch.nn.Module):  # its submodules and its own attributes, not the
        if not modules:  # parameter, buffer and hook tables (tensors and functions)
            return []
        return [v for k, v in vars(item).items() if k == "_modules" or not k.startswith("_")]
    if getattr(type(item), "__dictoffset__", 0):  # an object with attributes (read without
        own = object.__getattribute__(item, "__dict__")  # running a __getattr__ of its own)
        return list(dict.values(own)) if isinstance(own, dict) else []
    return []


@dataclass
class Reached:
    """What a call reaches: its modules (each once, with their submodules), the optimizers
    among what it reaches, where plain values live (``Space``: each module's and each other
    object's attributes, the globals the function names), and ``cut``: why the walk stopped
    short (None: it saw everything)."""

    modules: list[torch.nn.Module] = field(default_factory=list)
    optimizers: list[torch.optim.Optimizer] = field(default_factory=list)
    spaces: list[Space] = field(default_factory=list)
    cut: str | None = None


def reach(eager: Any, owner: torch.nn.Module | None, args: Any, kwargs: Any,
          limit: int = LIMIT) -> Reached:
    """What the call of ``eager`` (a module, a function, a bound method) on ``args`` and
    ``kwargs`` reaches (``owner``: the compiled module)."""
    roots: list[Any] = [owner] if owner is not None else []
    roots += [*(args or ()), *(kwargs or {}).values(), eager]
    fn = getattr(eager, "__func__", eager)
    names: list[str] = []
    if isinstance(fn, types.FunctionType):
        roots += [c.cell_contents for c in fn.__closure__ or () if _filled(c)]
        names = sorted({n for n in fn.__code__.co_names if n in fn.__globals__})
        roots += [fn.__globals__[n] for n in names]
    walk = Walk(roots, limit)
    out = Reached()
    modules: dict[int, torch.nn.Module] = {}
    for item, _ in walk:
        if isinstance(item, torch.nn.Module):
            for sub in item.modules():
                modules.setdefault(id(sub), sub)
        elif isinstance(item, torch.optim.Optimizer):
            out.optimizers.append(item)
            out.spaces.append((type(item).__name__, vars(item), None))
        elif not isinstance(item, _OPAQUE) and getattr(type(item), "__dictoffset__", 0):
            own = object.__getattribute__(item, "__dict__")
            if isinstance(own, dict):
                out.spaces.append((type(item).__name__, own, None))
    out.modules = list(modules.values())
    out.spaces = [(type(m).__name__, vars(m), None) for m in out.modules] + out.spaces
    if isinstance(fn, types.FunctionType):
        out.spaces.append(("global", fn.__globals__, names))
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
