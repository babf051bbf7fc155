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

Feature-detected where it is used: a compiled graph's outputs that require grad and lead to no
such node (within a few steps: an output that is a view of one) say "not available in torch X",
unless this process has already recognised the node (then the feature is there, and those
outputs are views of the graph's inputs, regenerated outside the compiled function: no
compiled backward runs for them).
"""

from __future__ import annotations

from typing import Any

from tuidebug.compiler.compat.lookup import NotAvailable

AOT_PACKAGE = "torch._functorch"
_FUNCTION = "CompiledFunction"
WHAT = f"{AOT_PACKAGE}'s {_FUNCTION} (the autograd node a compiled graph's backward runs in)"

_recognised = [False]  # one node recognised in this process: the feature is there


def is_compiled_backward(node: Any) -> bool:
    """Whether an autograd node is the backward of an AOTAutograd ``CompiledFunction``."""
    cls = getattr(node, "_forward_cls", None)
    module = getattr(cls, "__module__", None)
    return (getattr(cls, "__name__", None) == _FUNCTION and isinstance(module, str)
            and (module == AOT_PACKAGE or module.startswith(AOT_PACKAGE + ".")))


def compiled_backward_node(nodes: list[Any], depth: int = 3) -> Any:
    """The first ``CompiledFunction`` backward node among the autograd nodes ``nodes`` (the
    ``grad_fn`` of a compiled graph's outputs that require grad) and what they lead to,
    ``depth`` steps back at most (an output that is a view of a compiled output); None when
    ``nodes`` is empty (no output requires grad), or none leads to one and this process has
    recognised one before (outputs that are views of the graph's inputs). Raises
    ``NotAvailable`` when none leads to one and none was ever recognised: this torch runs a
    compiled backward elsewhere, or under another name."""
    if not nodes:
        return None
    for _ in range(depth):
        for n in nodes:
            if is_compiled_backward(n):
                _recognised[0] = True
                return n
        nodes = [m for n in nodes for m, _ in getattr(n, "next_functions", ()) if m is not None]
    if _recognised[0]:
        return None
    raise NotAvailable(WHAT)
