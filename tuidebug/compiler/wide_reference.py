"""The float64 reference run: a graph run eagerly on its inputs upcast to float64, kept wide.

Run as it is, a graph that casts inside (transformers' loss: ``logits.float()`` before
``cross_entropy``; Llama's RMSNorm ``.to(torch.float32)``; ``softmax(x, dtype=torch.float32)``)
computes that part of its "float64" run in float32: the loss came back float32, and the
gradient of the logits float64 in dtype but computed in float32 — compiled and eager agreed
with it to the last bit, and the check showed an exact 0 against a reference that was no
float64 one. The run is made under ``judge.KeptWide`` (the rule repro.py copies and the
kernel-level reference, ``localize``'s ``compat.NodeValues``, runs under), node by node so
that each cast kept in float64 is said where the model makes it (``Wide.kept``). What still
computes in a narrower float (a cast the rule does not know, ``.type("torch.FloatTensor")``;
an in-place write into a narrower tensor) is found per FX node (``Wide.narrow``): each output
computed from it (``KeptWide`` follows the values: ``Wide.outputs``, as repro.py's run), and
each input whose backward uses it (``input_notes``), is told apart and judged without a float64
reference, the line named.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from tuidebug.compiler import judge
from tuidebug.trace.format.layout import parse_stack_trace
from tuidebug.trace.queries.graph_breaks import SourceLine

_MAX_CODE = 80


def where(node: Any, cache: dict[str, Any]) -> str:
    """``loss_utils.py:56 (logits = logits.float())``: the user's line of an FX node (its
    stack trace), else the node's name."""
    meta = getattr(node, "meta", None) or {}
    src = parse_stack_trace(meta.get("stack_trace"), cache)
    if not src:
        return f"FX node {getattr(node, 'name', '?')}"
    code = " ".join(src["code"].split())
    code = code if len(code) <= _MAX_CODE else code[:_MAX_CODE - 1] + "…"
    at = SourceLine(src["file"], src["line"], src["fn"], code).where
    return f"{at} ({code})" if code else at


@dataclass
class Wide:
    """What the float64 run met: ``kept``, each cast to a narrower float it kept in float64
    (where, in the order met); ``narrow``: the FX nodes that still computed in a narrower
    float (node name → where); ``outputs``: per output (``judge.flatten_outputs``), why the
    run's value is no float64 reference (``judge.KeptWide.narrow_notes``), or ""."""

    kept: list[str] = field(default_factory=list)
    narrow: dict[str, str] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)

    def label(self) -> str:
        """``float64``, with the casts kept wide named: the reference's honest name."""
        if not self.kept:
            return "float64"
        n = len(self.kept)
        return (f"float64, the model's cast{'s' if n > 1 else ''} to a narrower float kept in "
                f"float64: {self.kept[0]}" + (f" and {n - 1} more" if n > 1 else ""))


class _Located(judge.KeptWide):
    """``judge.KeptWide``, telling ``wide`` where (the FX node the run is at) it met what."""

    def __init__(self, wide: Wide) -> None:
        super().__init__()
        self.wide, self.node, self._cache = wide, None, {}

    def at(self, name: str) -> str:
        return where(self.node, self._cache) if self.node is not None else "the graph"

    def met(self, cast: bool) -> None:
        at = self.at("")
        if cast:
            if at not in self.wide.kept:
                self.wide.kept.append(at)
        elif self.node is not None:
            self.wide.narrow.setdefault(self.node.name, at)


class _Run(torch.fx.Interpreter):
    def __init__(self, gm: Any, mode: _Located) -> None:
        super().__init__(gm)
        self.mode = mode

    def run_node(self, n: Any) -> Any:
        self.mode.node = n
        return super().run_node(n)


def run(gm: Callable[..., Any], args: list[Any]) -> tuple[Any, Wide]:
    """``gm(*args)`` (``args`` already upcast), casts kept wide, node by node for an FX graph
    (so what it met is located); what it met."""
    wide = Wide()
    mode = _Located(wide)
    with mode:
        out = _Run(gm, mode).run(*args) if isinstance(gm, torch.fx.GraphModule) else gm(*args)
    wide.outputs = mode.narrow_notes(out)
    return out, wide


def _upstream(graph: Any, wide: Wide) -> dict[Any, str]:
    """Per FX node: where the first node it depends on (itself included) computed in a
    narrower float in the float64 run ("": none)."""
    up: dict[Any, str] = {}
    for n in graph.nodes:
        up[n] = wide.narrow.get(n.name) or next(
            (up[a] for a in n.all_input_nodes if up.get(a)), "")
    return up


def input_notes(gm: Any, wide: Wide) -> list[str]:
    """Per input (placeholder) of ``gm``: why its gradient from the float64 run is no float64
    one: the backward goes through a node whose value depends on one computed in a narrower
    float (every value on the way back from the outputs to the input is used), or ""."""
    graph = getattr(gm, "graph", None)
    if graph is None or not wide.narrow:
        return []
    up = _upstream(graph, wide)
    down: dict[Any, str] = {}
    nodes = list(graph.nodes)
    for n in reversed(nodes):
        down[n] = next((down[u] or up[u] for u in n.users
                        if u.op != "output" and (down[u] or up[u])), "")
    return [f"its backward in the float64 run used values computed in a narrower float at "
            f"{down[n]}" if down[n] else "" for n in nodes if n.op == "placeholder"]
