"""Alike pieces of a graph without module paths: the chain an optimizer step repeats for every
parameter (the same ops, wired the same way to each other and to the same shared inputs) is
drawn once, each box standing for that node of every parameter (``×148``), and a foreach op is
one box with the values it hands out (its ``getitem``s), instead of a wall of identical boxes."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable

from tuidebug.trace.format.graph import Graph, Node, node_line, tensor_label
from tuidebug.viewers.dot.groups import Pieces, is_foreach
from tuidebug.viewers.dot.labels import clip, esc, ops_summary, target_text
from tuidebug.viewers.dot.style import KIND_STYLE, node_kind
from tuidebug.viewers.dotescape import html_label

MIN_ALIKE = 3  # pieces of one shape folded into one drawing when there are at least this many
SLOT_BUDGET = 160  # more boxes than this for the alike pieces drawn once: one box per family
FOREACH_NOTE = "a foreach op is one box with the values it hands out (getitem)"


@dataclass
class Alike:
    """Pieces of one shape: ``slots[j]`` is the j-th node of every piece (``_canonical``)."""

    leads: list[str]  # each piece's first input, in graph order
    slots: list[list[str]]
    param: int | None = None  # the slot of the first input written in place (a parameter)
    inputs: int = 1  # inputs (placeholders, attributes) of each piece

    @property
    def updated(self) -> bool:
        """An input of each piece is written in place: the pieces are parameters' updates."""
        return self.param is not None

    @property
    def what(self) -> str:
        """``28 params`` (a parameter's update: it, its state and its gradient), ``12 tensors``
        (one tensor written in place, a foreach op's output), ``12 alike chains``."""
        n = len(self.leads)
        if not self.updated:
            return f"{n} alike chains"
        return f"{n} params" if self.inputs > 1 else f"{n} tensors"


@dataclass
class AlikeDrawing:
    """Which box each folded node goes to, what each box stands for, and how it is drawn."""

    graph: Graph = field(repr=False)
    families: list[Alike]
    key_of: dict[str, str] = field(default_factory=dict)  # FX node -> box key
    count: dict[str, int] = field(default_factory=dict)  # box key -> pieces (tensors) it stands for
    family_of: dict[str, int] = field(default_factory=dict)  # box key -> its family's index
    foreach: dict[str, str] = field(default_factory=dict)  # box key -> its foreach op

    _titles: dict[int, str] = field(default_factory=dict, repr=False)  # family -> cluster label
    _lead_shapes: dict[int, str] = field(default_factory=dict, repr=False)  # family -> shapes_row

    @staticmethod
    def foreach_key(op: str) -> str:
        return f"foreach:{op}"

    def notes(self) -> list[str]:
        """The title's lines: the families, and what a foreach box is."""
        return ([family_note(self.families)] if self.families else []) + \
            ([FOREACH_NOTE] if self.foreach else [])

    def cluster(self, key: str) -> tuple[tuple[str, str, str], ...]:
        """The cluster (name, label, style) around a family's nodes drawn once (none for a
        piece of one or two nodes, a foreach box or a family drawn as one box)."""
        i = self.family_of.get(key)
        if i is None or len(self.families[i].slots) < 3 or "." not in key:
            return ()
        if i not in self._titles:
            self._titles[i] = family_title(self.graph, self.families[i])
        return ((f"cluster_alike{i}", self._titles[i], "module"),)

    def name(self, key: str, members: list[Node]) -> str:
        """A box in a few words: ``addcdiv ×219``, ``_foreach_add_.Scalar ×48``."""
        rep = next((m for m in members if m.name == self.foreach.get(key)), members[0])
        return f"{target_text(rep) if rep.op not in LEAVES else rep.op} ×{self.count.get(key, 1)}"

    def attrs(self, key: str, members: list[Node]) -> dict[str, str]:
        """A box's DOT attributes: its nodes' own style with a double border, ``×count``."""
        count, fam = self.count.get(key, 1), self.family_of.get(key)
        whole = self.families[fam] if fam is not None and "." not in key else None
        rep = next((m for m in members if m.name == self.foreach.get(key)), members[0])
        names = ", ".join(m.name for m in members[:12]) + (", …" if len(members) > 12 else "")
        role = input_role(self.graph, rep.name, self.families[fam], int(key.rsplit(".", 1)[1])) \
            if rep.op in LEAVES and fam is not None and not whole else ""
        if fam is not None and fam not in self._lead_shapes:
            self._lead_shapes[fam] = shapes_row([n for x in self.families[fam].leads
                                                 if (n := self.graph.get(x)) is not None])
        return dict(KIND_STYLE["module" if whole else node_kind(rep)], peripheries="2",
                    label=alike_label(members, count, self.foreach.get(key, ""), whole, role,
                                      self._lead_shapes.get(fam, "") if fam is not None else ""),
                    tooltip=f"{node_line(rep)}\n×{count}: {names}", id=f"alike:{key}")


LEAVES = ("placeholder", "get_attr")  # a piece's inputs: told apart by where they are used


def _canonical(graph: Graph, names: list[str], hubs: set[str]) -> tuple[list[str], tuple]:
    """A piece's nodes in an order that does not depend on the order the graph lists them in
    (Dynamo reads a parameter's state at its first use in one loop turn, all at once in the
    next), and its shape in that order: each node's op and target (an input's by where it is
    used), its inputs as positions (or the hub's name) and the hubs it feeds. Nodes are
    ordered by a hash of what they compute from (inputs, recursively) and what computes from
    them (users, recursively), ties kept in graph order."""
    inside = set(names)
    nodes = {x: graph.get(x) for x in names}
    if any(n is None for n in nodes.values()):
        return names, tuple(names)
    up: dict[str, int] = {}
    for x in names:  # graph order: inputs first
        n = nodes[x]
        up[x] = hash((n.op, "" if n.op in LEAVES else n.target,
                      tuple(up[i] if i in inside else (i if i in hubs else "?") for i in n.inputs)))
    down: dict[str, int] = {}
    for x in reversed(names):
        n = nodes[x]
        uses = sorted((down[u], nodes[u].inputs.index(x)) for u in dict.fromkeys(n.users)
                      if u in inside and u in down)
        down[x] = hash((up[x], tuple(uses), tuple(sorted(u for u in n.users if u in hubs))))
    pos = {x: i for i, x in enumerate(names)}
    order = sorted(names, key=lambda x: (down[x], pos[x]))
    at = {x: i for i, x in enumerate(order)}
    sig = tuple((down[x], tuple(at[i] if i in at else (i if i in hubs else "?")
                                for i in nodes[x].inputs)) for x in order)
    return order, sig


def _foreach_outputs(graph: Graph, split: Pieces) -> tuple[dict[str, int], dict[str, str]]:
    """Each foreach op handing out at least ``MIN_ALIKE`` values (its ``getitem`` users) -> how
    many; and each of those ``getitem``s alone in its piece -> its op (drawn in the op's box)."""
    ops: dict[str, int] = {}
    taken: dict[str, str] = {}
    for hub in sorted(split.hubs):
        n = graph.get(hub)
        if n is None or not is_foreach(n):
            continue
        items = [u for u in n.users if (g := graph.get(u)) is not None and g.short_target == "getitem"]
        if len(items) < MIN_ALIKE:
            continue
        ops[hub] = len(items)
        taken.update((u, hub) for u in items if split.members.get(split.lead.get(u, "")) == [u])
    return ops, taken


def _written(graph: Graph, name: str) -> bool:
    """An input written in place (the first argument of an in-place op: ``copy_``, ``mul_``)."""
    n = graph.get(name)
    return n is not None and n.op in LEAVES and any(
        (u := graph.get(x)) is not None and u.is_inplace and u.inputs[:1] == [name] for x in n.users)


def alike_drawing(graph: Graph, split: Pieces) -> AlikeDrawing | None:
    """The folded drawing of ``graph``'s repeated pieces; None when nothing repeats
    ``MIN_ALIKE`` times (and no foreach op hands out values)."""
    ops, taken = _foreach_outputs(graph, split)
    by_sig: dict[tuple, list[str]] = {}
    ordered: dict[str, list[str]] = {}  # lead -> its piece in canonical order
    for lead, names in split.members.items():
        if lead not in taken:
            ordered[lead], sig = _canonical(graph, names, split.hubs)
            by_sig.setdefault(sig, []).append(lead)
    families = []
    for leads in by_sig.values():
        if len(leads) >= MIN_ALIKE:
            first = split.members[leads[0]]
            written = next((x for x in first if _written(graph, x)), None)
            families.append(Alike(leads, [list(s) for s in zip(*(ordered[x] for x in leads))],
                                  ordered[leads[0]].index(written) if written else None,
                                  sum(1 for x in first if (n := graph.get(x)) and n.op in LEAVES)))
    if not families and not ops:
        return None
    out = AlikeDrawing(graph, families)
    for op, count in ops.items():
        out.key_of[op] = out.foreach_key(op)
        out.foreach[out.foreach_key(op)] = op
        out.count[out.foreach_key(op)] = count
    for item, op in taken.items():
        out.key_of[item] = out.foreach_key(op)
    whole = sum(len(f.slots) for f in families) > SLOT_BUDGET  # one box per family
    for i, fam in enumerate(families):
        for j, slot in enumerate(fam.slots):
            key = f"alike{i}" if whole else f"alike{i}.{j}"
            out.count[key] = len(fam.leads)
            out.family_of[key] = i
            for name in slot:
                out.key_of[name] = key
    return out


def shapes_summary(nodes: Iterable[Node | None], k: int = 3) -> str:
    """``f32[128, 128] ×96 · f32[128] ×48 · …``: the shapes of the values ``nodes`` hold."""
    counts = Counter(tensor_label(n.tensor) for n in nodes if n is not None and n.tensor)
    top = [f"{s} ×{c}" if len(counts) > 1 else s for s, c in counts.most_common(k)]
    return " · ".join(top) + (" · …" if len(counts) > k else "")


def family_note(families: list[Alike], k: int = 2) -> str:
    """The title's line: ``148 params updated alike: their chain drawn once, each box ×148``."""
    texts = Counter(f"{f.what} updated alike" if f.updated else f.what
                    for f in sorted(families, key=lambda f: -len(f.leads) * len(f.slots)))
    parts = [t if c == 1 else f"{t} ({c} kinds)" for t, c in list(texts.items())[:k]]
    more = f" and {len(texts) - k} more" if len(texts) > k else ""
    return ", ".join(parts) + more + ": each chain drawn once, a box ×N stands for that node of each"


def family_title(graph: Graph, fam: Alike) -> str:
    """A family's cluster label: how many pieces, how big each is, their leads' shapes."""
    return (f"{fam.what} updated alike: {len(fam.slots)} nodes each, drawn once (×{len(fam.leads)})"
            if fam.updated else
            f"{fam.what}: {len(fam.slots)} nodes each, drawn once (×{len(fam.leads)})") + \
        "\n" + shapes_summary(graph.get(x) for x in fam.leads)


def alike_label(members: list[Node], count: int, foreach: str = "", family: Alike | None = None,
                role: str = "", lead_shapes: str = "") -> str:
    """The label of a box of alike nodes: the op (an input: its ``role``) and ``×count``, the
    shapes it covers (unless they are the chains' leads' ``lead_shapes``); a foreach op with the values it hands out; a whole family (``family``:
    drawn as one box when its nodes drawn once would be too many)."""
    grey = '<FONT POINT-SIZE="8" COLOR="#555555">{}</FONT>'
    if family is not None:
        rows = [f"<B>{esc(family.what)}{' updated alike' if family.updated else ''}</B>",
                f"{len(family.slots)} nodes each (×{count})", grey.format(esc(ops_summary(members)))]
    elif foreach:
        op = next((m for m in members if m.name == foreach), members[0])
        rows = [f"<B>{esc(clip(target_text(op)))}</B>",
                f"foreach over {count} tensor{'s' if count != 1 else ''}"]
    else:
        rep = members[0]
        what = role or clip(target_text(rep))
        rows = [f"<B>{esc(what)} ×{count}</B>"]
        shapes = shapes_row(members)
        if shapes and (shapes != lead_shapes or rep.op in LEAVES):
            rows.append(grey.format(esc(shapes)))
    return html_label("<BR/>".join(rows))


def shapes_row(members: list[Node]) -> str:
    """One shape (``f32[]``: a step counter's scalar), else the dtypes and how many shapes."""
    metas = {(str(m.tensor.get("dtype", "?")), str(m.tensor.get("shape"))): m.tensor
             for m in members if m.tensor}
    if len(metas) <= 1:
        return tensor_label(metas.popitem()[1]) if metas else ""
    dtypes = sorted({d for d, _ in metas})
    return f"{', '.join(dtypes)} · {len({s for _, s in metas})} shapes"


def input_role(graph: Graph, name: str, fam: Alike, slot: int) -> str:
    """What a family's input is: its parameter (the first input written in place), state
    written in place (a step counter, a moment), or an input (a gradient)."""
    if not _written(graph, name):
        return "input"
    if slot == fam.param:
        return "param" if fam.inputs > 1 else "tensor (written)"
    return "state (written)"
