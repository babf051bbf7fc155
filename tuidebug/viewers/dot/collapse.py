"""Which FX nodes share a drawn box: module paths (inferred where missing), forward/backward
halves of a joint graph, progressive module collapse within a budget, kernel boxes, and the
context kept around a diff's changes."""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field

from tuidebug.trace.format.graph import Graph, Node


def module_levels(path: str) -> list[str]:
    """``blocks.0.attn.q_proj`` -> ``["blocks.0", "attn", "q_proj"]`` (indices join their list)."""
    out: list[str] = []
    for part in path.split(".") if path else []:
        if part.isdigit() and out:
            out[-1] += "." + part
        else:
            out.append(part)
    return out


def truncate_module(path: str, depth: int) -> str:
    return ".".join(module_levels(path)[:depth])


def backward_nodes(graph: Graph) -> set[str]:
    """Nodes of a joint graph that belong to the backward: those computed from the incoming
    gradients (``tangents_*``), and those only the backward uses (a weight's transpose for its
    gradient, say).

    Users are derived from every node's inputs as well as its own ``users``: in the union graph
    of a diff, a node that survived the pass does not list the removed nodes it fed."""
    seeds = [n.name for n in graph if n.op == "placeholder" and n.name.startswith("tangents")]
    if not seeds:
        return set()
    users = users_of(graph)
    seen, queue = set(seeds), deque(seeds)
    while queue:
        for u in users.get(queue.popleft(), ()):
            if u not in seen and graph.get(u).op != "output":
                seen.add(u)
                queue.append(u)
    for n in reversed(graph.nodes):
        us = users.get(n.name)
        if n.op not in ("placeholder", "output") and us and all(u in seen for u in us):
            seen.add(n.name)
    return seen


def users_of(graph: Graph) -> dict[str, list[str]]:
    """Each node's users within ``graph``: its own ``users`` list and every node listing it as
    an input (the two differ in a diff's union graph)."""
    out: dict[str, dict[str, None]] = defaultdict(dict)
    for n in graph:
        for u in n.users:
            if u in graph:
                out[n.name][u] = None
        for i in n.inputs:
            if i in graph:
                out[i][n.name] = None
    return {k: list(v) for k, v in out.items()}


def looks_joint(graph: Graph) -> bool:
    """A joint forward+backward graph: its inputs are exactly parameters/inputs and gradients."""
    names = [n.name for n in graph if n.op == "placeholder"]
    return (any(x.startswith("tangents") for x in names) and any(x.startswith("primals") for x in names)
            and all(x.startswith(("primals", "tangents")) for x in names))


def infer_modules(graph: Graph, hints: dict[str, str] | None = None) -> dict[str, str]:
    """Every node's module path, or its nearest neighbour's where it has none.

    Backward nodes carry no module; they take the one of the closest node that has one (breadth
    first over inputs and users), which puts a layer's gradient next to the layer. Used only to
    group nodes, never shown as the node's own module.
    """
    hints = hints or {}
    mod: dict[str, str] = {}
    queue: deque[str] = deque()
    for n in graph:
        m = n.module or hints.get(n.name, "")
        if m and n.op != "output":
            mod[n.name] = m
            queue.append(n.name)
    while queue:
        name = queue.popleft()
        n = graph.get(name)
        for other in (n.inputs + n.users) if n else []:
            o = graph.get(other)
            if o is not None and other not in mod and o.op != "output":
                mod[other] = mod[name]
                queue.append(other)
    return mod


# -- grouping ---------------------------------------------------------------------------------

def count_boxes(nodes: list[Node], group_mod: dict[str, str], depth: int, fixed: dict[str, str],
              phase: dict[str, str] | None = None) -> int:
    phase = phase or {}
    keys = set()
    for n in nodes:
        if n.name in fixed:
            keys.add(phase.get(n.name, "") + fixed[n.name])
        elif n.op != "output" and group_mod.get(n.name):
            keys.add(phase.get(n.name, "") + "m:" + truncate_module(group_mod[n.name], depth))
        else:
            keys.add("n:" + n.name)
    return len(keys)


def plan_collapse(nodes: list[Node], group_mod: dict[str, str], budget: int,
                  fixed: dict[str, str] | None = None, prefix: dict[str, str] | None = None,
                  context: set[str] | None = None) -> dict[str, str]:
    """Which nodes to collapse into which module box so that the drawing fits ``budget``.

    Progressive: modules at the deepest level first, those saving the most boxes first, and only
    as many as needed; then the next level up. ``prefix`` keeps apart nodes that must not share
    a box (forward/backward, a diff's status); nodes in ``context`` (a diff's untouched nodes)
    are collapsed, at every level, before any other. ``fixed`` nodes (in collapsed kernels) are
    boxes already, never merged (so kernel boxes alone can be over the budget). Returns node ->
    module path of its box; a node not in it is drawn alone.
    """
    fixed, prefix = fixed or {}, prefix or {}
    key_of = {n.name: prefix.get(n.name, "") + fixed[n.name] if n.name in fixed else "n:" + n.name
              for n in nodes}
    live = set(key_of.values())
    out: dict[str, str] = {}
    levels = {n.name: module_levels(group_mod[n.name]) for n in nodes
              if n.name not in fixed and n.op != "output" and group_mod.get(n.name)}
    tiers = [[x for x in levels if x in context], [x for x in levels if x not in context]] \
        if context else [list(levels)]
    top = max((len(lv) for lv in levels.values()), default=0)
    for tier in tiers:
        for d in range(top, 0, -1):
            if len(live) <= budget:
                return out
            cands: dict[tuple[str, str], list[str]] = defaultdict(list)
            for name in tier:
                if len(levels[name]) >= d:
                    cands[(prefix.get(name, ""), ".".join(levels[name][:d]))].append(name)
            new = {c: c[0] + "m:" + c[1] for c in cands}
            old = {c: {key_of[m] for m in members} - {new[c]} for c, members in cands.items()}
            saving = {c: len(old[c]) - (new[c] not in live) for c in cands}
            for c in sorted(cands, key=lambda c: (-saving[c], c)):
                if len(live) <= budget or saving[c] <= 0:
                    break
                for m in cands[c]:
                    key_of[m] = new[c]
                    out[m] = c[1]
                live -= old[c]
                live.add(new[c])
    return out


def absorb_into_kernels(nodes: list[Node], kernel_of: dict[str, str]) -> dict[str, str]:
    """Give the nodes no kernel computes (views and weights feeding an extern call, inputs) to the
    one kernel all their users are in, else to the kernel of their one input, so that collapsed
    kernels form a chain and not a web of small boxes."""
    out = dict(kernel_of)
    for n in reversed(nodes):  # users first: a chain of views joins the kernel at its end
        if n.name in out or n.op == "output":
            continue
        users = {out.get(u) for u in n.users}
        if len(users) == 1 and None not in users:
            out[n.name] = users.pop()
    for n in nodes:
        if n.name not in out and n.op != "placeholder" and len(n.inputs) == 1 and n.inputs[0] in out:
            out[n.name] = out[n.inputs[0]]
    return out


def with_context(graph: Graph, focus: set[str], hops: int,
             users: dict[str, list[str]] | None = None) -> set[str]:
    """``focus`` and the nodes within ``hops`` edges of it. The output node is reached but not
    gone through: its hundreds of inputs are not context of a change that touched it."""
    users = users if users is not None else users_of(graph)
    keep, frontier = set(focus), set(focus)
    for _ in range(hops):
        nxt = set()
        for name in frontier:
            n = graph.get(name)
            if n is None or n.op == "output":
                continue
            for o in n.inputs + users.get(name, []):
                if o not in keep and o in graph:
                    nxt.add(o)
        keep |= nxt
        frontier = nxt
    return keep


@dataclass
class Visible:
    """The FX nodes a drawing shows, and what it says about those it leaves out."""

    nodes: list[Node]
    hidden: int = 0  # FX nodes left out (far from any change of a diff)
    notes: list[str] = field(default_factory=list)
    hidden_ins: dict[str, list[str]] = field(default_factory=dict)  # drawn -> inputs not drawn
    hidden_outs: dict[str, list[str]] = field(default_factory=dict)  # drawn -> users not drawn


def visible_nodes(graph: Graph, status: dict[str, str] | None, budget: int) -> Visible:
    """Every node, except in a diff over the budget: its changes with 2, 1 or 0 hops of context,
    whichever fits (with none, stubs name each change's hidden inputs and users)."""
    nodes = list(graph)
    if status is None or len(nodes) <= budget:
        return Visible(nodes)
    focus = {n.name for n in nodes if status.get(n.name, "same") != "same"}
    if not focus:  # nothing changed: the whole graph, greyed (and collapsed as any other)
        return Visible(nodes)
    keep = focus
    users = users_of(graph)
    for hops in (2, 1, 0):  # the changes alone, uncollapsed, before any collapse
        keep = with_context(graph, focus, hops, users)
        if len(keep) <= budget:
            break
    out = Visible([n for n in nodes if n.name in keep], len(nodes) - len(keep))
    if out.hidden:
        out.notes.append(f"{out.hidden} untouched nodes far from the changes are not shown"
                         + (" (stubs name their neighbours)" if hops == 0 else ""))
    if hops == 0:  # no context drawn: stubs name each change's hidden inputs and users
        for n in out.nodes:  # in graph order: the same DOT in every process
            out.hidden_ins[n.name] = [i for i in n.inputs if i in graph and i not in keep]
            out.hidden_outs[n.name] = [u for u in users.get(n.name, []) if u not in keep]
    return out
