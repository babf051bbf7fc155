"""The outputs of a compiled graph named by where the user finds them in what the call returned.

A Dynamo graph returns a flat tuple of tensors; the user's call returns a structure built from
them (a ``ModelOutput`` with ``loss`` and ``logits``, a cache whose layers hold keys and values,
a dict, a tuple). ``tensor_paths`` walks that structure and names each tensor by its path
(``logits``, ``past_key_values.layers[0].keys``, ``out['hidden'][1]``); a graph output found
there by identity (the very tensor object the graph returned) takes that name
(``rename_outputs``). An output the user never receives (a graph break's intermediate value)
keeps the name the graph gave it (``gradients.output_names``).

The walk is plain Python over what any structure exposes: mappings (a ``ModelOutput`` is an
``OrderedDict``), dataclasses, named tuples, lists and tuples, and the public attributes of
other objects (a cache class), a few levels deep; it never calls user code but ``keys()``,
``items()`` and attribute reads of plain instance dictionaries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

MAX_DEPTH = 6
MAX_TENSORS = 4096


def _is_field_name(key: Any) -> bool:
    return isinstance(key, str) and key.isidentifier()


def _join(path: str, part: str) -> str:
    """``part`` is ``.name``, ``['key']`` or ``[i]``; a path starting with a field drops
    its dot (``logits``, not ``.logits``)."""
    return (path + part) if path or not part.startswith(".") else part[1:]


def tensor_paths(value: Any) -> dict[int, str]:
    """``{id(tensor): its path in value}`` for every tensor ``value`` holds (the first path
    found for a tensor held twice); ``""`` for ``value`` itself being a tensor."""
    out: dict[int, str] = {}
    seen: set[int] = set()

    def walk(x: Any, path: str, depth: int) -> None:
        if len(out) >= MAX_TENSORS or depth > MAX_DEPTH:
            return
        if isinstance(x, torch.Tensor):
            out.setdefault(id(x), path)
            return
        if x is None or isinstance(x, (str, bytes, int, float, bool, complex, torch.nn.Module)):
            return
        if id(x) in seen:
            return
        seen.add(id(x))
        if isinstance(x, Mapping):
            named = type(x) is not dict  # a ModelOutput's keys are its fields
            for k, v in list(x.items()):
                part = f".{k}" if named and _is_field_name(k) else f"[{k!r}]"
                walk(v, _join(path, part), depth + 1)
        elif isinstance(x, tuple) and hasattr(x, "_fields"):  # a named tuple
            for k, v in zip(x._fields, x):
                walk(v, _join(path, f".{k}"), depth + 1)
        elif isinstance(x, (list, tuple)):
            for i, v in enumerate(x):
                walk(v, f"{path}[{i}]", depth + 1)
        elif dataclasses.is_dataclass(x) and not isinstance(x, type):
            for f in dataclasses.fields(x):
                walk(getattr(x, f.name, None), _join(path, f".{f.name}"), depth + 1)
        else:
            attrs = getattr(x, "__dict__", None)
            if isinstance(attrs, dict):
                for k, v in list(attrs.items()):
                    if _is_field_name(k) and not k.startswith("_"):
                        walk(v, _join(path, f".{k}"), depth + 1)

    walk(value, "", 0)
    return out


def _named(path: str) -> bool:
    """A path that says what the value is (a field or a key), not only where (``[1]``)."""
    return "." in path or "['" in path or path[:1].isidentifier()


def output_names(outputs: list[Any], returned: Any) -> dict[int, str]:
    """``{graph output index: its path in returned}`` for the outputs (a graph's flat outputs,
    in order) that ``returned`` holds under a name; an output the structure holds only by
    position (a plain tuple or tensor) is left to the graph's own name."""
    paths = tensor_paths(returned)
    names: dict[int, str] = {}
    for i, o in enumerate(outputs):
        path = paths.get(id(o)) if isinstance(o, torch.Tensor) else None
        if path and _named(path):
            names[i] = path
    return names


def rename_outputs(check: dict[str, Any], names: dict[int, str]) -> bool:
    """Name the judged outputs of a runtime.json check (``outputs[*].name`` by ``index``, and
    the ``detail`` that names the output that decided); whether anything changed."""
    changed = False
    for o in check.get("outputs") or []:
        new = names.get(o.get("index")) if isinstance(o, dict) else None
        if new is None or o.get("name") == new:
            continue
        old = str(o.get("name") or f"output {o.get('index')}")
        o["name"] = new
        changed = True
        for key in ("detail",):
            text = check.get(key)
            if isinstance(text, str) and text.startswith(old + ":"):
                check[key] = new + text[len(old):]
    return changed
