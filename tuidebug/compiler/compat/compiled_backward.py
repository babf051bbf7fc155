"""The autograd node through which a compiled graph's backward runs.

AOTAutograd wraps a training graph's forward and backward in a ``torch.autograd.Function``
named ``CompiledFunction``, a class it builds per graph inside
``torch._functorch._aot_autograd.runtime_wrappers`` (not importable by name: a local of a
factory whose name changes between releases). Its output tensors' ``grad_fn`` is that
function's backward node (``CompiledFunctionBackward``); hooks on it mark when the autograd
engine runs the compiled backward. The node is recognised by its forward class's name and
module, never by a substring of its display name; a torch without that module says "not
available in torch X".
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Any

from tuidebug.compiler.compat.lookup import NotAvailable

AOT_RUNTIME = "torch._functorch._aot_autograd.runtime_wrappers"
_FUNCTION = "CompiledFunction"


@functools.lru_cache(maxsize=1)
def _has_runtime() -> bool:
    try:
        return importlib.util.find_spec(AOT_RUNTIME) is not None
    except (ImportError, ValueError):
        return False


def is_compiled_backward(node: Any) -> bool:
    """Whether an autograd node is the backward of an AOTAutograd ``CompiledFunction``."""
    cls = getattr(node, "_forward_cls", None)
    return (getattr(cls, "__name__", None) == _FUNCTION
            and getattr(cls, "__module__", None) == AOT_RUNTIME)


def compiled_backward_node(nodes: list[Any], depth: int = 3) -> Any:
    """The first ``CompiledFunction`` backward node among the autograd nodes ``nodes`` (the
    ``grad_fn`` of a compiled graph's outputs) and what they lead to, ``depth`` steps back at
    most (an output that is a view of a compiled output); None when there is none (no output
    requires grad). Raises ``NotAvailable`` when this torch has no AOTAutograd runtime."""
    if not _has_runtime():
        raise NotAvailable(f"{AOT_RUNTIME}.{_FUNCTION} (the compiled backward's autograd node)")
    for _ in range(depth):
        for n in nodes:
            if is_compiled_backward(n):
                return n
        nodes = [m for n in nodes for m, _ in getattr(n, "next_functions", ()) if m is not None]
    return None
