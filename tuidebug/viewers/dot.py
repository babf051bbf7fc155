"""A captured FX graph as Graphviz DOT: styling, module/kernel collapse and long-edge stubs.

Pure data in, ``graphviz.Digraph`` out: no trace files, no subprocesses (``svg.py`` does those).
Layout cost in ``dot`` follows long edges, so before anything is emitted the graph is reduced:

- nodes can be collapsed into one box per nn.Module (``depth`` levels of the module path; over
  ``budget``, just enough modules, deepest and largest first) or per generated kernel; a box
  never mixes forward with backward, nor a diff's added, removed, changed and untouched nodes;
- a diff over the budget draws its changes with 2, 1 or 0 hops of context, whichever fits;
- an edge spanning more than ``long_span`` ranks (saved activations, weights used far away, the
  many inputs of the output node) is replaced by labelled stubs at both ends;
- the forward and backward halves of a joint graph go in clusters of their own, linked by stubs.
"""

from __future__ import annotations

import html
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Iterable

import graphviz

from tuidebug.trace.graph import Graph, Node

FONT = "Helvetica"
STUB_NAMES = 3  # names listed on a stub before "+N more"

# fill, border, font colour; one entry per node kind or diff status.
KIND_STYLE: dict[str, dict[str, str]] = {
    "compute": {"shape": "box", "style": "rounded,filled", "fillcolor": "#dce9f7", "color": "#5b7fa8"},
    "placeholder": {"shape": "invhouse", "style": "filled", "fillcolor": "#d5f0d2", "color": "#4b8a45"},
    "output": {"shape": "house", "style": "filled", "fillcolor": "#fde0ae", "color": "#b7791f"},
    "get_attr": {"shape": "cylinder", "style": "filled", "fillcolor": "#f1e8c8", "color": "#8f7a32"},
    "view": {"shape": "box", "style": "rounded,dashed,filled", "fillcolor": "#f3f3f3", "color": "#888888"},
    "inplace": {"shape": "box", "style": "filled,bold", "fillcolor": "#fbd5d5", "color": "#c0392b",
                "penwidth": "2"},
    "module": {"shape": "box3d", "style": "filled", "fillcolor": "#e9e1f7", "color": "#6c4fa3",
               "margin": "0.12,0.07"},
    "kernel": {"shape": "component", "style": "filled", "fillcolor": "#d7ecff", "color": "#1f5fa8"},
    "extern": {"shape": "component", "style": "filled", "fillcolor": "#ffe8cc", "color": "#c2620c"},
}
DIFF_STYLE: dict[str, dict[str, str]] = {
    "added": {"fillcolor": "#b9f3b0", "color": "#2e9e44", "fontcolor": "#000000"},
    "removed": {"fillcolor": "#ffc4c4", "color": "#c62828", "fontcolor": "#000000"},
    "changed": {"fillcolor": "#ffe49a", "color": "#c79100", "fontcolor": "#000000"},
    "same": {"fillcolor": "#f4f4f4", "color": "#c8c8c8", "fontcolor": "#9a9a9a"},
}
CLUSTER_STYLE: dict[str, dict[str, str]] = {
    "kernel": {"style": "rounded,filled", "fillcolor": "#f0f7ff", "color": "#1f5fa8", "fontcolor": "#1f5fa8"},
    "extern": {"style": "rounded,dashed,filled", "fillcolor": "#fff6eb", "color": "#c2620c",
               "fontcolor": "#c2620c"},
    "phase": {"style": "rounded", "color": "#999999", "fontcolor": "#555555", "fontsize": "16"},
    "module": {"style": "rounded,dotted", "color": "#8c7bb5", "fontcolor": "#6c4fa3"},
}
STUB_STYLE = {"shape": "plain", "fontsize": "8", "fontcolor": "#666666"}
STUB_EDGE = {"style": "dashed", "color": "#aaaaaa", "arrowsize": "0.4"}


@dataclass
class Overlay:
    """What a view adds on top of the bare graph."""

    kernel_of: dict[str, str] | None = None  # FX node -> kernel name (kernel view)
    kernel_kind: dict[str, str] = field(default_factory=dict)  # kernel -> "extern" | "cpp" | ...
    kernel_nodes: dict[str, list[str]] = field(default_factory=dict)  # kernel -> all nodes it lists
    kernel_note: dict[str, str] = field(default_factory=dict)  # kernel -> second label line (launch)
    status: dict[str, str] | None = None  # FX node -> added | removed | changed | same (diff view)
    extra_edges: list[tuple[str, str]] = field(default_factory=list)  # edges of removed nodes
    module_hints: dict[str, str] = field(default_factory=dict)  # FX node -> module, for grouping


@dataclass
class DotOptions:
    depth: int | None = None  # collapse to this many module levels; None: automatic
    budget: int = 400  # more nodes than this are collapsed automatically
    collapse: bool = True  # False: never collapse automatically
    split_phases: bool | None = None  # joint graph: forward and backward apart (None: guess)
    module_clusters: bool = False  # draw collapsed modules inside a cluster of their top level
    long_span: int = 8  # edges spanning more ranks than this become stubs
    max_fanout: int = 6  # real edges kept per producer; the rest become stubs
    max_fanin: int = 8  # real edges kept per consumer (the output node has hundreds)
    title: str = ""


@dataclass
class DotResult:
    dot: graphviz.Digraph
    total: int  # FX nodes in the graph
    shown: int  # DOT nodes drawn (boxes and nodes, not stubs)
    depth: int | None  # module depth used for collapse, if any
    kernels_collapsed: bool
    stubs: int
    notes: list[str]


@dataclass
class _Item:
    """One drawn node: an FX node, a collapsed module or a collapsed kernel."""

    id: str
    kind: str  # "node" | "module" | "kernel"
    key: str
    members: list[Node]
    pos: int
    container: tuple[tuple[str, str, str], ...]  # nested clusters: (name, label, style)


# -- node classification ----------------------------------------------------------------------

def node_kind(n: Node) -> str:
    if n.op in ("placeholder", "output", "get_attr"):
        return n.op
    if n.is_inplace:
        return "inplace"
    if n.is_view:
        return "view"
    return "compute"


def target_text(n: Node) -> str:
    """``aten.addmm.default`` -> ``addmm``; ``aten.add.Tensor`` -> ``add.Tensor``."""
    if n.op in ("placeholder", "output", "get_attr"):
        return n.op if n.op != "get_attr" else f"get_attr {n.target}"
    t = n.target
    for prefix in ("aten.", "torch.ops.aten.", "operator.", "prims.", "_operator."):
        if t.startswith(prefix):
            t = t[len(prefix):]
            break
    return t[: -len(".default")] if t.endswith(".default") else t


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


# -- labels -----------------------------------------------------------------------------------

def _esc(s: str) -> str:
    return html.escape(s, quote=False)


def _clip(s: str, n: int = 48) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _tooltip(s: str) -> str:
    return s.replace("\\", "\\\\").replace("\n", "\\n")


def _clip_middle(s: str, n: int = 40) -> str:
    """Long names keep their start and end (``l_self_modules_…_attn_parameters_weight_``)."""
    return s if len(s) <= n else s[: n // 2 - 4] + "…" + s[-(n - n // 2 + 3):]


def node_label(n: Node) -> str:
    rows = [f"<B>{_esc(_clip_middle(n.name))}</B>"]  # the tooltip has it whole
    tt = target_text(n)
    if tt != n.name and n.op != "placeholder":
        rows.append(_esc(_clip(tt)))
    meta = n.meta_label()
    if meta:
        rows.append(f'<FONT POINT-SIZE="8" COLOR="#555555">{_esc(_clip(meta, 56))}</FONT>')
    return "<" + "<BR/>".join(rows) + ">"


def node_tooltip(n: Node) -> str:
    from tuidebug.trace.graph import node_line

    lines = [node_line(n)]
    if n.module:
        lines.append(f"module: {n.module} ({n.module_type})" if n.module_type else f"module: {n.module}")
    if n.source:
        lines.append(f"{n.source.get('file', '?')}:{n.source.get('line', '?')}  {n.source.get('code', '')}")
    return _tooltip("\n".join(lines))


def _ops_summary(members: list[Node], k: int = 4) -> str:
    counts: dict[str, int] = defaultdict(int)
    for m in members:
        if m.op not in ("placeholder", "output"):
            counts[target_text(m).split(".")[0]] += 1
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:k]
    s = ", ".join(f"{op}×{c}" if c > 1 else op for op, c in top)
    return s + (", …" if len(counts) > k else "")


def _diff_counts(members: list[Node], status: dict[str, str]) -> str:
    c: dict[str, int] = defaultdict(int)
    for m in members:
        c[status.get(m.name, "same")] += 1
    parts = [f"+{c['added']}" if c["added"] else "", f"−{c['removed']}" if c["removed"] else "",
             f"~{c['changed']}" if c["changed"] else ""]
    return " ".join(p for p in parts if p)


def group_label(item: _Item, module_type: str, status: dict[str, str] | None) -> str:
    n = len(item.members)
    head = _esc(_clip(item.key, 60))
    sub = f"{_esc(module_type)} · " if module_type else ""
    rows = [f"<B>{head}</B>", f"{sub}{n} node{'s' if n != 1 else ''}"]
    ops = _ops_summary(item.members)
    if ops:
        rows.append(f'<FONT POINT-SIZE="8" COLOR="#555555">{_esc(ops)}</FONT>')
    if status:
        d = _diff_counts(item.members, status)
        if d:
            rows.append(f"<B>{_esc(d)}</B>")
    return "<" + "<BR/>".join(rows) + ">"


def _group_status(members: list[Node], status: dict[str, str]) -> str:
    """A box's diff colour: its one status besides untouched context, else "changed"."""
    st = {status.get(m.name, "same") for m in members} - {"same"}
    return st.pop() if len(st) == 1 else ("same" if not st else "changed")


# -- legend -----------------------------------------------------------------------------------

def _legend_row(text: str, fill: str, border: str, note: str = "") -> str:
    return (f'<TR><TD BGCOLOR="{fill}" COLOR="{border}" BORDER="1" WIDTH="22"> </TD>'
            f'<TD ALIGN="LEFT">{_esc(text)}</TD>'
            f'<TD ALIGN="LEFT"><FONT COLOR="#666666" POINT-SIZE="8">{_esc(note)}</FONT></TD></TR>')


def legend_label(kinds: Iterable[str], *, diff: bool, kernels: bool | Iterable[str],
                 stubs: bool) -> str:
    """The legend table; ``kernels``: the kernel styles drawn ("kernel", "extern"), or True."""
    notes = {
        "placeholder": "graph input (inverted house)", "output": "graph output (house)",
        "get_attr": "attribute read (cylinder)", "compute": "operator (rounded box)",
        "view": "view / reshape (dashed)", "inplace": "in-place op (bold red border)",
        "module": "collapsed nn.Module (node count)",
    }
    rows = ['<TR><TD COLSPAN="3"><B>legend</B></TD></TR>']
    for k in ("placeholder", "output", "compute", "view", "inplace", "get_attr", "module"):
        if k in kinds:
            s = KIND_STYLE[k]
            label = {"inplace": "in-place", "module": "module box"}.get(k, k)
            rows.append(_legend_row(label, s["fillcolor"], s["color"], notes[k]))
    drawn = {"kernel", "extern"} if kernels is True else set(kernels or ())  # styles drawn
    if "kernel" in drawn:
        rows.append(_legend_row("generated kernel", CLUSTER_STYLE["kernel"]["fillcolor"],
                                CLUSTER_STYLE["kernel"]["color"], "cluster / box named after the kernel"))
    if "extern" in drawn:
        rows.append(_legend_row("extern call", CLUSTER_STYLE["extern"]["fillcolor"],
                                CLUSTER_STYLE["extern"]["color"], "extern_kernels.mm / addmm / …"))
    if diff:
        for st, note in (("added", "added by the pass"), ("removed", "removed (from the earlier graph)"),
                         ("changed", "changed"), ("same", "untouched context")):
            rows.append(_legend_row(st, DIFF_STYLE[st]["fillcolor"], DIFF_STYLE[st]["color"], note))
    if stubs:
        rows.append('<TR><TD><FONT POINT-SIZE="8" COLOR="#666666">⇢ a, b</FONT></TD>'
                    '<TD ALIGN="LEFT">stub</TD><TD ALIGN="LEFT"><FONT COLOR="#666666" POINT-SIZE="8">'
                    'long edge cut: value comes from / goes to the named nodes</FONT></TD></TR>')
    return ('<<TABLE BORDER="1" CELLBORDER="0" CELLSPACING="2" CELLPADDING="2" COLOR="#bbbbbb">'
            + "".join(rows) + "</TABLE>>")


def _safe_id(*parts: str) -> str:
    """A DOT node id for a drawn group: no ':' (python-graphviz reads it as a port in edges)."""
    return "/".join(p.replace(":", "#") for p in parts if p)


# -- grouping ---------------------------------------------------------------------------------

def _count_at(nodes: list[Node], group_mod: dict[str, str], depth: int, fixed: dict[str, str],
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


def _context(graph: Graph, focus: set[str], hops: int,
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


# -- the builder ------------------------------------------------------------------------------

class _Builder:
    def __init__(self, graph: Graph, overlay: Overlay, opts: DotOptions) -> None:
        self.graph, self.ov, self.opts = graph, overlay, opts
        self.notes: list[str] = []
        self.hidden = 0  # FX nodes left out of a diff (far from any change)
        self._hidden_ins: dict[str, list[str]] = {}  # drawn node -> its inputs not drawn
        self._hidden_outs: dict[str, list[str]] = {}  # drawn node -> its users not drawn
        self.nodes = self._visible_nodes()
        self.names = {n.name for n in self.nodes}
        split = opts.split_phases if opts.split_phases is not None else looks_joint(graph)
        # (a diff cut down to the changes is many small pieces: stacked in columns in each phase)
        bwd = backward_nodes(graph) if split else set()
        self.phase = {n.name: ("backward" if n.name in bwd else "forward") for n in self.nodes} \
            if bwd else {}
        self.kernels_collapsed = False
        self.depth: int | None = None
        self.items: dict[str, _Item] = {}
        self.item_of: dict[str, str] = {}
        self.module_type: dict[str, str] = {}
        self._stub_edges: list[tuple[str, str]] = []
        self._kernels_of: dict[str, list[str]] = defaultdict(list)  # FX node -> kernels listing it
        for k, listed in overlay.kernel_nodes.items():
            for n in listed:
                self._kernels_of[n].append(k)

    # which FX nodes are drawn at all
    def _visible_nodes(self) -> list[Node]:
        nodes = list(self.graph)
        st = self.ov.status
        if st is None or len(nodes) <= self.opts.budget:
            return nodes
        focus = {n.name for n in nodes if st.get(n.name, "same") != "same"}
        if not focus:  # nothing changed: the whole graph, greyed (and collapsed as any other)
            return nodes
        keep = focus
        users = users_of(self.graph)
        for hops in (2, 1, 0):  # the changes alone, uncollapsed, before any collapse
            keep = _context(self.graph, focus, hops, users)
            if len(keep) <= self.opts.budget:
                break
        self.hidden = len(nodes) - len(keep)
        if self.hidden:
            self.notes.append(f"{self.hidden} untouched nodes far from the changes are not shown"
                              + (" (stubs name their neighbours)" if hops == 0 else ""))
        if hops == 0:  # no context drawn: stubs name each change's hidden inputs and users
            for name in keep:
                n = self.graph.get(name)
                self._hidden_ins[name] = [i for i in n.inputs if i in self.graph and i not in keep]
                self._hidden_outs[name] = [u for u in users.get(name, []) if u not in keep]
        return [n for n in nodes if n.name in keep]

    def _container(self, phase: str, extra: tuple[tuple[str, str, str], ...] = ()):
        base = ((f"cluster_{phase}", phase, "phase"),) if phase else ()
        return base + extra

    def group(self) -> None:
        """Assign every visible FX node to a drawn item."""
        ov, opts = self.ov, self.opts
        kernel_of = {k: v for k, v in (ov.kernel_of or {}).items() if k in self.names}
        # over the budget, or collapsing modules (--depth): a kernel is one box, not a cluster
        # that the module boxes would empty
        if kernel_of and opts.collapse and (len(self.nodes) > opts.budget or opts.depth is not None):
            self.kernels_collapsed = True
        if self.kernels_collapsed:
            kernel_of = absorb_into_kernels(self.nodes, kernel_of)
        fixed = {n: "k:" + k for n, k in kernel_of.items()} if self.kernels_collapsed else {}
        group_mod = infer_modules(self.graph, ov.module_hints)
        group_mod = {k: v for k, v in group_mod.items() if k in self.names}
        diff = ov.status is not None
        status = ov.status or {}
        # boxes never mix forward with backward, nor (in a diff) added, removed and changed nodes
        prefix = {n.name: self.phase.get(n.name, "") + "|" + status.get(n.name, "same")
                  for n in self.nodes} if diff else self.phase
        if opts.depth is not None:
            mod_key = {n.name: truncate_module(group_mod[n.name], opts.depth) for n in self.nodes
                       if n.name not in fixed and n.op != "output" and group_mod.get(n.name)}
        elif opts.collapse and _count_at(self.nodes, {}, 1, fixed) > opts.budget:
            context = {n for n in self.names if status.get(n, "same") == "same"} if diff else None
            mod_key = plan_collapse(self.nodes, group_mod, opts.budget, fixed, prefix, context)
        else:
            mod_key = {}
        depths = sorted({len(module_levels(k)) for k in mod_key.values()})
        self.depth = opts.depth if opts.depth is not None else (depths[0] if depths else None)
        module_type = {n.module: n.module_type for n in self.nodes if n.module}
        for pos, n in enumerate(self.nodes):
            phase = self.phase.get(n.name, "")
            if n.name in fixed:
                key, kind = kernel_of[n.name], "kernel"
                item_id = _safe_id("@kernel", phase, key)
                cont = self._container(phase)
            elif n.name in mod_key:
                key, kind = mod_key[n.name], "module"
                st = status.get(n.name, "same")
                item_id = _safe_id("@module", phase, key, st if st != "same" else "")
                levels = module_levels(key)
                parent = levels[0] if opts.module_clusters and len(levels) > 1 else ""
                extra = ((f"cluster_mod_{phase}_{parent}", parent, "module"),) if parent else ()
                cont = self._container(phase, extra)
            else:
                key, kind, item_id = n.name, "node", n.name
                k = kernel_of.get(n.name)
                extra = (self._kernel_cluster(k),) if k else ()
                cont = self._container(phase, extra)
            item = self.items.get(item_id)
            if item is None:
                item = self.items[item_id] = _Item(item_id, kind, key, [], pos, cont)
            elif item.members and all(m.op == "placeholder" for m in item.members) \
                    and n.op != "placeholder":
                item.pos = pos  # a group sits where its computation starts, not its inputs
            item.members.append(n)
            self.item_of[n.name] = item_id
        self.module_type = module_type
        boxes = sum(1 for it in self.items.values() if it.kind == "module")
        if opts.depth is not None:
            self.notes.append(f"collapsed to module depth {opts.depth}")
        elif depths:
            span = f"{depths[0]}" if len(depths) == 1 else f"{depths[0]}–{depths[-1]}"
            fits = f" to fit {opts.budget} nodes" if len(self.items) <= opts.budget else ""
            self.notes.append(f"{boxes} module box{'es' if boxes != 1 else ''} (module depth {span}){fits}")
        if self.kernels_collapsed:
            kernels = len({kernel_of[n] for n in fixed})
            self.notes.append("kernels collapsed to one box each" + (
                f" ({kernels} kernel calls: over the {opts.budget}-node budget by themselves)"
                if kernels > opts.budget else ""))

    def _kernel_cluster(self, kernel: str) -> tuple[str, str, str]:
        """(cluster name, label, style) of a kernel: its name, and its launch under it."""
        note = self.ov.kernel_note.get(kernel)
        return (f"cluster_{kernel}", f"{kernel}\n{note}" if note else kernel,
                self._kernel_style(kernel))

    def _kernel_style(self, kernel: str) -> str:
        kind = self.ov.kernel_kind.get(kernel, "")
        return "extern" if kind == "extern" or kernel.startswith(("extern_kernels.", "torch.ops.")) else "kernel"

    # edges between drawn items
    def item_edges(self) -> dict[tuple[str, str], list[tuple[str, str]]]:
        edges: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
        seen: set[tuple[str, str]] = set()
        for u, v in list(self.graph.edges()) + list(self.ov.extra_edges):
            if u in self.item_of and v in self.item_of and (u, v) not in seen:
                seen.add((u, v))
                a, b = self.item_of[u], self.item_of[v]
                if a != b:
                    edges[(a, b)].append((u, v))
        return edges

    def ranks(self, edges: Iterable[tuple[str, str]]) -> dict[str, int]:
        """Estimated rank of each item: longest path from the sources (forward edges only)."""
        preds: dict[str, list[str]] = defaultdict(list)
        succs: dict[str, list[str]] = defaultdict(list)
        for a, b in edges:
            if self.items[a].pos < self.items[b].pos and self._phase_of(a) == self._phase_of(b):
                preds[b].append(a)
                succs[a].append(b)
        order = sorted(self.items.values(), key=lambda it: it.pos)
        rank: dict[str, int] = {}
        for it in order:
            rank[it.id] = max((rank[p] + 1 for p in preds[it.id]), default=0)
        for it in reversed(order):  # sink nodes with no more inputs than users to just above them
            near = [s for s in succs[it.id] if not self._is_output(s)]
            if near and len(preds[it.id]) <= len(near):
                rank[it.id] = max(rank[it.id], min(rank[s] for s in near) - 1)
        return rank

    def split_long(self, edges: dict[tuple[str, str], list[tuple[str, str]]]):
        """Edges drawn as lines, and the rest (long, cross-phase, over fan-out/fan-in) as stubs."""
        rank = self.ranks(edges)
        span = {e: abs(rank[e[1]] - rank[e[0]]) for e in edges}  # back edges (cycles) count too
        ok = [e for e in sorted(edges, key=span.__getitem__)
              if span[e] <= self.opts.long_span
              and not (self.phase and self._phase_of(e[0]) != self._phase_of(e[1]))]
        fan_out: dict[str, int] = defaultdict(int)
        fan_in: dict[str, int] = defaultdict(int)
        real: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for a, b in ok:  # shortest first: a producer keeps its nearest users
            if fan_out[a] < self.opts.max_fanout and fan_in[b] < self.opts.max_fanin:
                fan_out[a] += 1
                fan_in[b] += 1
                real[(a, b)] = edges[(a, b)]
        stubbed = [(a, b, pairs) for (a, b), pairs in edges.items() if (a, b) not in real]
        return real, stubbed

    def _is_output(self, item_id: str) -> bool:
        it = self.items[item_id]
        return it.kind == "node" and it.members[0].op == "output"

    def _phase_of(self, item_id: str) -> str:
        return self.phase.get(self.items[item_id].members[0].name, "")

    def _stack_pieces(self, real: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """Invisible edges that stack the disconnected pieces of a cut-down diff in columns,
        in each phase cluster (``pack`` does not reach inside clusters: left alone, dot puts
        every piece side by side in one very wide row)."""
        parent = {i: i for i in self.items}

        def root(x: str) -> str:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for a, b in real:
            parent[root(a)] = root(b)
        pieces: dict[str, list[_Item]] = defaultdict(list)
        for it in sorted(self.items.values(), key=lambda i: i.pos):
            pieces[root(it.id)].append(it)
        by_phase: dict[str, list[list[_Item]]] = defaultdict(list)
        for piece in pieces.values():
            by_phase[self._phase_of(piece[0].id)].append(piece)
        rank = self.ranks(real)
        links = []
        for group in by_phase.values():
            shape = []  # (width in boxes, height in ranks) of each piece
            for piece in group:
                per_rank: dict[int, int] = defaultdict(int)
                for it in piece:
                    per_rank[rank[it.id]] += 1
                shape.append((max(per_rank.values()), max(per_rank) - min(per_rank) + 2))
            # a box and its stubs are about 8 ranks wide: columns this many ranks tall make each
            # phase about square, and forward beside backward about 2:1
            area = sum(8 * w * h for w, h in shape)
            tall = max(max(h for _, h in shape), area ** 0.5)
            used, last = 0, None
            for piece, (_, h) in zip(group, shape):  # in graph order, column by column
                if last is not None and used + h <= tall:
                    links.append((last.id, piece[0].id))
                    used += h
                else:
                    used = h
                last = max(piece, key=lambda it: rank[it.id])
        return links

    # emission
    def build(self) -> DotResult:
        self.group()
        edges = self.item_edges()
        real, stubbed = self.split_long(edges)
        g = graphviz.Digraph(name=self.graph.graph_id or "graph", engine="dot")
        g.attr("graph", rankdir="TB", fontname=FONT, ranksep="0.3", nodesep="0.2",
               outputorder="edgesfirst", labelloc="t", labeljust="l", fontsize="18",
               label=self._title(), tooltip=self._title())
        if self.hidden and not self.phase:  # packing ignores what is inside clusters
            g.attr("graph", pack="true", packmode="array_u")
        g.attr("node", fontname=FONT, fontsize="10", margin="0.08,0.03", height="0.3")
        g.attr("edge", color="#666666", arrowsize="0.6")
        stmts: dict[tuple, list[tuple[str, dict[str, str]]]] = defaultdict(list)
        kinds: set[str] = set()
        for it in sorted(self.items.values(), key=lambda i: i.pos):
            attrs = self._item_attrs(it)
            kinds.add(self._legend_kind(it))
            stmts[it.container].append((it.id, attrs))
        stubs = self._stubs(stubbed, stmts)
        self._kernel_notes(stmts)
        self._emit(g, stmts)
        for (a, b), pairs in real.items():
            g.edge(a, b, **self._edge_attrs(a, b, pairs))
        if self.hidden and self.phase:
            for a, b in self._stack_pieces(real):
                g.edge(a, b, style="invis", weight="0")
        kernel_styles = {self._kernel_style(it.key) for it in self.items.values() if it.kind == "kernel"}
        kernel_styles |= {c[2] for it in self.items.values() for c in it.container}
        g.node("@legend", label=legend_label(kinds, diff=self.ov.status is not None,
                                             kernels=kernel_styles, stubs=bool(stubs)),
               shape="plain", id="legend", tooltip="legend")
        return DotResult(g, len(self.graph), len(self.items), self.depth, self.kernels_collapsed,
                         stubs, self.notes)

    def _title(self) -> str:
        parts = [self.opts.title or self.graph.graph_id]
        parts.append(f"{len(self.graph)} nodes")
        if len(self.items) != len(self.graph):
            parts.append(f"{len(self.items)} shown")
        return " · ".join(p for p in parts if p) + ("\n" + "; ".join(self.notes) if self.notes else "")

    def _id_extra(self, it: _Item) -> list[str]:
        """What keeps a box's SVG id unique: its phase and, in a diff, its status."""
        first = it.members[0].name
        st = self.ov.status.get(first, "same") if self.ov.status is not None and it.kind == "module" else ""
        return [x for x in (self.phase.get(first, ""), st if st != "same" else "") if x]

    def _legend_kind(self, it: _Item) -> str:
        if it.kind == "node":
            return node_kind(it.members[0])
        return it.kind if it.kind == "module" else "kernel"

    def _item_attrs(self, it: _Item) -> dict[str, str]:
        st = self.ov.status
        if it.kind == "node":
            n = it.members[0]
            tip = node_tooltip(n)
            if self._kernels_of.get(n.name):
                tip += _tooltip("\nkernels: " + ", ".join(self._kernels_of[n.name]))
            attrs = dict(KIND_STYLE[node_kind(n)], label=node_label(n), tooltip=tip,
                         id=f"node:{n.name}")
            status = st.get(n.name, "same") if st is not None else None
        else:
            style = "module" if it.kind == "module" else self._kernel_style(it.key)
            mtype = self.module_type.get(it.key, "") if it.kind == "module" else ""
            names = ", ".join(m.name for m in it.members[:12]) + (", …" if len(it.members) > 12 else "")
            attrs = dict(KIND_STYLE[style], label=group_label(it, mtype, st),
                         tooltip=_tooltip(f"{it.key}\n{len(it.members)} nodes: {names}"),
                         id=f"{it.kind}:{it.key}" + "".join(f"@{x}" for x in self._id_extra(it)))
            status = _group_status(it.members, st) if st is not None else None
        if status:
            attrs.update(DIFF_STYLE[status])
            if status == "removed":
                attrs["style"] = attrs["style"].replace("rounded,", "") + ",dashed"
        return attrs

    def _edge_attrs(self, a: str, b: str, pairs: list[tuple[str, str]]) -> dict[str, str]:
        attrs: dict[str, str] = {}
        if self.items[a].pos > self.items[b].pos:
            attrs["constraint"] = "false"
        u = self.graph.get(pairs[0][0])
        meta = u.meta_label() if u else ""
        tip = f"{pairs[0][0]} → {pairs[0][1]}" + (f": {meta}" if meta else "")
        if len(pairs) > 1:
            tip += f" (+{len(pairs) - 1} more)"
            attrs["penwidth"] = str(min(4.0, 1 + len(pairs) / 4))
        attrs["tooltip"] = _tooltip(tip)
        st = self.ov.status
        if st is not None:
            ends = {st.get(x, "same") for p in pairs for x in p}
            if "removed" in ends:
                attrs.update(color=DIFF_STYLE["removed"]["color"], style="dashed")
            elif "added" in ends:
                attrs["color"] = DIFF_STYLE["added"]["color"]
            elif ends == {"same"}:
                attrs["color"] = "#cccccc"
        return attrs

    def _kernel_notes(self, stmts) -> None:
        """A kernel whose every node is drawn in another kernel still gets its cluster: a note
        naming the nodes it shares, linked to the first of them."""
        if self.ov.kernel_of is None or self.kernels_collapsed:
            return
        owning = set(self.ov.kernel_of.values())
        for k, listed in self.ov.kernel_nodes.items():
            shared = [n for n in listed if n in self.item_of]
            if k in owning or not shared:
                continue
            nid = _safe_id("@kernel_note", k)
            label = "also works on " + ", ".join(shared[:STUB_NAMES]) + (
                f" +{len(shared) - STUB_NAMES}" if len(shared) > STUB_NAMES else "")
            cont = self._container("", (self._kernel_cluster(k),))
            stmts[cont].append((nid, dict(STUB_STYLE, label=_clip(label, 60),
                                          tooltip=_tooltip(f"{k} also computes: " + ", ".join(shared)))))
            self._stub_edges.append((nid, self.item_of[shared[0]]))

    def _stubs(self, stubbed, stmts) -> int:
        """One stub per item for its far inputs and one for its far users."""
        ins: dict[str, list[str]] = defaultdict(list)
        outs: dict[str, list[str]] = defaultdict(list)
        for a, b, pairs in stubbed:
            for u, v in pairs:
                if u not in ins[b]:
                    ins[b].append(u)
                if v not in outs[a]:
                    outs[a].append(v)
        for table, hidden in ((ins, self._hidden_ins), (outs, self._hidden_outs)):
            for name, others in hidden.items():
                names = table[self.item_of[name]]
                names.extend(o for o in others if o not in names)
        count = 0
        for direction, table in (("in", ins), ("out", outs)):
            for item_id, names in table.items():
                if not names:
                    continue
                it = self.items[item_id]
                sid = f"@stub_{direction}/{item_id}"
                arrow = "⇢" if direction == "out" else "⇠"
                shown = ", ".join(names[:STUB_NAMES])
                more = f" +{len(names) - STUB_NAMES}" if len(names) > STUB_NAMES else ""
                label = f"{arrow} {shown}{more}"
                tip = ("from: " if direction == "in" else "to: ") + ", ".join(names)
                stmts[it.container].append((sid, dict(STUB_STYLE, label=_clip(label, 60),
                                                      tooltip=_tooltip(tip))))
                count += 1
                self._stub_edges.append((sid, item_id) if direction == "in" else (item_id, sid))
        return count

    def _emit(self, g: graphviz.Digraph, stmts) -> None:
        tree: dict = {}
        for cont, nodes in stmts.items():
            t = tree
            for c in cont:
                t = t.setdefault(c, {})
            t.setdefault(None, []).extend(nodes)
        self._emit_tree(g, tree)
        for a, b in self._stub_edges:
            g.edge(a, b, **STUB_EDGE)

    def _emit_tree(self, g: graphviz.Digraph, tree: dict) -> None:
        for name, attrs in tree.get(None, []):
            g.node(name, **attrs)
        for key, sub in tree.items():
            if key is None:
                continue
            name, label, style = key
            with g.subgraph(name=name) as c:
                c.attr(**{"label": label, "tooltip": label, "fontname": FONT, "fontsize": "11",
                          "margin": "6", **CLUSTER_STYLE[style]})
                self._emit_tree(c, sub)


def build_dot(graph: Graph, overlay: Overlay | None = None, opts: DotOptions | None = None) -> DotResult:
    """Lay a graph out as DOT (not yet run through ``dot``)."""
    return _Builder(graph, overlay or Overlay(), opts or DotOptions()).build()
