"""The autograd node through which a compiled graph's backward runs.

AOTAutograd wraps a training graph's forward and backward in a ``torch.autograd.Function``
named ``CompiledFunction``, a class it builds per graph (torch 2.11–2.13: inside
``torch._functorch._aot_autograd.runtime_wrappers``; not importable by name: a local of a
factory whose name changes between releases). Its output tensors' ``grad_fn`` is that
function's backward node (``CompiledFunctionBackward``); hooks on it mark when the autograd
engine runs the compiled backward. The node is recognised by its forward class: named
``CompiledFunction`` and defined in a module of ``torch._functorch`` (wherever AOTAutograd
moves it there), never by a substring of its display name — a user's own function of that
name is not it.

Feature-detected structurally (:func:`available`): some function of AOTAutograd's runtime
(the known module first, else every module of ``torch._functorch._aot_autograd``) defines a
class ``CompiledFunction`` — read from the functions' code objects, nothing is called. Outputs
that require grad and lead to no such node (an output that is a view of the graph's inputs:
regenerated outside the compiled function, its gradient flows to the leaves) have no compiled
backward to time: None. Only where no module defines the class is the node "not available in
torch X".
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import types
from typing import Any, Sequence

from tuidebug.compiler.compat.lookup import NotAvailable

AOT_PACKAGE = "torch._functorch"
_RUNTIME = "torch._functorch._aot_autograd"
_KNOWN = f"{_RUNTIME}.runtime_wrappers"  # torch 2.11–2.15
_FUNCTION = "CompiledFunction"
WHAT = f"{AOT_PACKAGE}'s {_FUNCTION} (the autograd node a compiled graph's backward runs in)"


def is_compiled_backward(node: Any) -> bool:
    """Whether an autograd node is the backward of an AOTAutograd ``CompiledFunction``."""
    cls = getattr(node, "_forward_cls", None)
    module = getattr(cls, "__module__", None)
    return (getattr(cls, "__name__", None) == _FUNCTION and isinstance(module, str)
            and (module == AOT_PACKAGE or module.startswith(AOT_PACKAGE + ".")))


def _defines(code: types.CodeType, name: str) -> bool:
    """Whether ``code`` (or a function or class body nested in it) has a class body ``name``."""
    return any(isinstance(c, types.CodeType) and (c.co_name == name or _defines(c, name))
               for c in code.co_consts)


def _module_defines(module: types.ModuleType, name: str) -> bool:
    """Whether a function or method defined in ``module`` builds a class ``name`` (or the
    module has one by that name)."""
    if isinstance(getattr(module, name, None), type):
        return True
    for obj in vars(module).values():
        if getattr(obj, "__module__", None) != module.__name__:
            continue
        funcs = ([obj] if inspect.isfunction(obj) else
                 [f for f in map(_function_of, vars(obj).values()) if f is not None]
                 if isinstance(obj, type) else [])
        if any(_defines(f.__code__, name) for f in funcs):
            return True
    return False


def _function_of(attr: Any) -> types.FunctionType | None:
    """The function a class attribute holds: a method, or the one a ``staticmethod`` or
    ``classmethod`` wraps (torch 2.11 builds ``CompiledFunction`` in the static method
    ``AOTDispatchAutograd.post_compile``)."""
    if isinstance(attr, (staticmethod, classmethod)):
        attr = attr.__func__
    return attr if inspect.isfunction(attr) else None


def _imported(name: str) -> types.ModuleType | None:
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 — a module this torch lacks, or fails to import: none
        return None


@functools.lru_cache(maxsize=1)
def available() -> bool:
    """Whether this torch's AOTAutograd builds a ``CompiledFunction`` (the known module first,
    else every module of its runtime package)."""
    _imported("torch._dynamo")  # first: AOTAutograd's runtime imports it back
    known = _imported(_KNOWN)
    if known is not None and _module_defines(known, _FUNCTION):
        return True
    package = _imported(_RUNTIME)
    names = [i.name for i in pkgutil.iter_modules(getattr(package, "__path__", []),
                                                  _RUNTIME + ".")]
    return any(m is not None and _module_defines(m, _FUNCTION)
               for m in map(_imported, names))


def _reach(nodes: list[Any], depth: int) -> list[list[Any]]:
    """The autograd nodes ``nodes`` and those they lead to, step by step, ``depth`` steps."""
    out = []
    for _ in range(depth):
        out.append(nodes)
        nodes = [m for n in nodes for m, _ in getattr(n, "next_functions", ()) if m is not None]
    return out


def compiled_backward_node(nodes: list[Any], depth: int = 3,
                           inputs: Sequence[Any] = ()) -> Any:
    """The first ``CompiledFunction`` backward node among the autograd nodes ``nodes`` (the
    ``grad_fn`` of a compiled graph's outputs that require grad) and what they lead to,
    ``depth`` steps back at most (an output that is a view of a compiled output); None when
    none leads to one (no output requires grad, or they are views of the graph's inputs: no
    compiled backward runs for them). ``inputs``: the ``grad_fn`` of the graph's inputs — a
    node they lead to is an earlier graph's (an output that is a view of an input made by
    another compiled graph leads to that graph's node), never this one's. Raises
    ``NotAvailable`` when this torch's AOTAutograd defines no ``CompiledFunction`` (it runs a
    compiled backward elsewhere, or under another name)."""
    if not available():
        raise NotAvailable(WHAT)
    earlier = {id(n) for step in _reach([n for n in inputs if n is not None], depth)
               for n in step}
    for step in _reach(nodes, depth):
        for n in step:
            if is_compiled_backward(n) and id(n) not in earlier:
                return n
    return None
