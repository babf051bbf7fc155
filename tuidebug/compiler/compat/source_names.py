"""Dynamo's names for where a graph's inputs come from, read as the user's paths.

Dynamo names the source of each graph input as Python text over its frame's locals and globals
(``L['self']._modules['fc1']._parameters['weight']``, ``L['x']``, ``G['w']``), names the
placeholders after them (``l_self_modules_fc1_parameters_weight_``) and records each FX node's
module as such a path in ``nn_module_stack``. None of this is a public interface: it is Dynamo's
own naming (``torch._dynamo.source``'s ``Source.name``), so it is read only here. A name this
torch writes some other way is not a crash: it reads as None (no path), and the caller falls back
to the placeholder's own name, then to a numbered one.
"""

from __future__ import annotations

import re
from typing import Any

# one step of a source path: a module's child, parameter or buffer (``._modules['fc1']``), a key
# (``['k']``), an index (``[0]``), an attribute (``.scale``)
_PART = re.compile(r"\._(?:modules|parameters|buffers)\['([^']*)'\]|\['([^']*)'\]|\[(\d+)\]"
                   r"|\.(\w+)")
_ROOT = re.compile(r"^(?:L|G)\['([^']*)'\]")
_LOCAL = re.compile(r"^L\['([^']*)'\]")
# the locals of Dynamo's own ``inner(*args, **kwargs)`` that ``torch.compile`` of a torch module
# (``nn.Sequential``) traces around its forward: the module is ``fn``
_WRAPPER_LOCALS = {"fn", "args", "kwargs"}
_WRAPPED_MODULE = ("L['fn']._modules[", "L['fn']._parameters[", "L['fn']._buffers[")


def graph_input_sources(gm: Any) -> list[str | None]:
    """Per placeholder of a Dynamo graph, in order, the source Dynamo read it from
    (``L['self']._modules['fc1']._parameters['weight']``, ``L['x']``), or None where Dynamo
    recorded none (a graph not made by Dynamo, a torch that keeps it elsewhere)."""
    out: list[str | None] = []
    for node in getattr(getattr(gm, "graph", None), "nodes", ()):
        if node.op != "placeholder":
            continue
        source = getattr(node.meta.get("grapharg"), "source", None)
        try:
            out.append(str(source.name) if source is not None else None)
        except Exception:  # a source whose name needs more than this graph
            out.append(None)
    return out


def graph_input_names(gm: Any) -> list[str]:
    """Each placeholder of a Dynamo graph named by its source (a parameter's path in the
    model, an argument's name), else read from the placeholder's own name."""
    nodes = [n for n in gm.graph.nodes if n.op == "placeholder"]
    sources = graph_input_sources(gm)
    if len(sources) != len(nodes):
        sources = [None] * len(nodes)
    return [name or placeholder_name(n.name) for n, name in zip(nodes, source_names(sources))]


def source_names(sources: list[str | None]) -> list[str | None]:
    """Each source named as ``source_name`` names it; in the frame of Dynamo's own
    ``inner(*args, **kwargs)`` that ``torch.compile`` of a torch module (``nn.Sequential``)
    traces around its forward — its only locals ``fn`` (the module), ``args`` and ``kwargs`` —
    the module's path is named from the module, as ``named_parameters`` does: ``0.weight``,
    not ``fn.0.weight``."""
    roots = {m.group(1) for s in sources if s and (m := _LOCAL.match(s))}
    wrapped = "fn" in roots and roots <= _WRAPPER_LOCALS and any(
        s and s.startswith(_WRAPPED_MODULE) for s in sources)
    return [source_name("L['self']" + s[len("L['fn']"):] if wrapped and s and s.startswith(
        "L['fn']") else s) for s in sources]


def source_name(source: str | None) -> str | None:
    """A Dynamo source as the user names it: ``L['self']._modules['fc1']._parameters['weight']``
    → ``fc1.weight``, ``L['x']`` → ``x``, ``L['past'][0]`` → ``past[0]``; None when it is not
    a plain path."""
    if not source:
        return None
    m = _ROOT.match(source)
    if not m:
        return None
    root, rest = m.group(1), source[m.end():]
    parts: list[str] = [] if rest and root == "self" else [root]
    pos = 0
    while pos < len(rest):
        p = _PART.match(rest, pos)
        if p is None:
            return None
        attr, key, index, plain = p.groups()
        if attr is not None or plain is not None:
            parts.append("." + (attr if attr is not None else plain))
        else:
            parts.append(f"[{index}]" if index is not None else f"[{key!r}]")
        pos = p.end()
    return "".join(parts).lstrip(".") or root


def placeholder_name(name: str) -> str:
    """A Dynamo placeholder's name read back as a path when its source is gone:
    ``l_self_modules_fc1_parameters_weight_`` → ``fc1.weight``, ``l_x_`` → ``x`` (a name with
    underscores of its own is read with dots there: a fallback)."""
    m = re.fullmatch(r"[lg]_(.*?)_?", name)
    if not m:
        return name
    path = re.sub(r"^self_(?=modules_|parameters_|buffers_)", "", m.group(1))
    path = re.sub(r"(?:^|_)(?:modules|parameters|buffers)_", ".", path).lstrip(".")
    return path or name


def module_path(path: str) -> str:
    """A module's path as ``nn_module_stack`` records it (``L['self']._modules['layers']
    ._modules['0']``, ``L['self'].layers[0]``), dotted as the snapshot keeps it: ``layers.0``
    (the frame's module itself — ``self``, ``fn``, ``mod``, ``model`` — is the root: left
    out)."""
    path = re.sub(r"^L\['(self|fn|mod|model)'\]\.?", "", path)
    path = re.sub(r"\._modules\['([^']+)'\]", r".\1", path)
    return re.sub(r"\[(\d+)\]", r".\1", path).replace("['", ".").replace("']", "").strip(".")
