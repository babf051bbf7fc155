"""The DOT builder: assigns FX nodes to drawn items, routes edges (long ones as stubs) and
emits the Graphviz source."""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

import graphviz

from tuidebug.trace.format.graph import Graph
from tuidebug.viewers.dot.collapse import (absorb_into_kernels, backward_nodes, count_boxes,
                                          infer_modules, looks_joint, module_levels,
                                          plan_collapse, truncate_module, visible_nodes)
from tuidebug.viewers.dot.alike import AlikeDrawing, alike_drawing
from tuidebug.viewers.dot.groups import NOTE as DERIVED_NOTE
from tuidebug.viewers.dot.groups import derived_groups, pieces
from tuidebug.viewers.dot.labels import (clip, group_label, group_status, node_label, node_tooltip,
                                        safe_id)
from tuidebug.viewers.dot.options import DotOptions, DotResult, Item, Overlay
from tuidebug.viewers.dot.shape import fold_bands, wrap_rows
from tuidebug.viewers.dot.style import (CLUSTER_STYLE, DIFF_STYLE, FLAGGED_STYLE, FONT, KIND_STYLE,
                                       STUB_EDGE, STUB_NAMES, STUB_STYLE, legend_label, node_kind)
from tuidebug.viewers.dotescape import dot_attrs, dot_id, dot_string


class _Builder:
    def __init__(self, graph: Graph, overlay: Overlay, opts: DotOptions) -> None:
        self.graph, self.ov, self.opts = graph, overlay, opts
        shown = visible_nodes(graph, overlay.status, opts.budget)
        self.notes: list[str] = shown.notes
        self.hidden = shown.hidden  # FX nodes left out of a diff (far from any change)
        self._hidden_ins = shown.hidden_ins  # drawn node -> its inputs not drawn
        self._hidden_outs = shown.hidden_outs  # drawn node -> its users not drawn
        self.nodes = shown.nodes
        self.names = {n.name for n in self.nodes}
        split = opts.split_phases if opts.split_phases is not None else looks_joint(graph)
        # (a diff cut down to the changes is many small pieces: stacked in columns in each phase)
        bwd = backward_nodes(graph) if split else set()
        self.phase = {n.name: ("backward" if n.name in bwd else "forward") for n in self.nodes} \
            if bwd else {}
        self.kernels_collapsed = False
        self.alike: AlikeDrawing | None = None  # an optimizer's alike chains, drawn once
        self.depth: int | None = None
        self.items: dict[str, Item] = {}
        self.item_of: dict[str, str] = {}
        self.module_type: dict[str, str] = {}
        self._stub_edges: list[tuple[str, str]] = []
        self._kernels_of: dict[str, list[str]] = defaultdict(list)  # FX node -> kernels listing it
        for k, listed in overlay.kernel_nodes.items():
            for n in listed:
                self._kernels_of[n].append(k)

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
        derived = not group_mod  # no node has a module path: group by chains of ops instead
        if derived:
            split = pieces(self.graph)
            group_mod = derived_groups(self.graph, split)
            if opts.collapse and opts.depth is None and ov.kernel_of is None and ov.status is None:
                self.alike = alike_drawing(self.graph, split)  # repeated chains drawn once
        alike = {k: v for k, v in self.alike.key_of.items() if k in self.names} if self.alike else {}
        group_mod = {k: v for k, v in group_mod.items() if k in self.names and k not in alike}
        fixed.update((n, "a:" + k) for n, k in alike.items())  # boxes already, as kernels are
        diff = ov.status is not None
        status = ov.status or {}
        # boxes never mix forward with backward, nor (in a diff) added, removed and changed nodes
        prefix = {n.name: self.phase.get(n.name, "") + "|" + status.get(n.name, "same")
                  for n in self.nodes} if diff else self.phase
        if opts.depth is not None:
            mod_key = {n.name: truncate_module(group_mod[n.name], opts.depth) for n in self.nodes
                       if n.name not in fixed and n.op != "output" and group_mod.get(n.name)}
        elif opts.collapse and derived and count_boxes(self.nodes, {}, 1, fixed) > opts.budget:
            # every chain alike: the deepest level at which all of them fit (not a mix of levels)
            top = max((len(module_levels(m)) for m in group_mod.values()), default=1)
            d = next((d for d in range(top, 1, -1)
                      if count_boxes(self.nodes, group_mod, d, fixed, prefix) <= opts.budget), 1)
            mod_key = {n: truncate_module(m, d) for n, m in group_mod.items() if n not in fixed}
        elif opts.collapse and count_boxes(self.nodes, {}, 1, fixed) > opts.budget:
            context = {n for n in self.names if status.get(n, "same") == "same"} if diff else None
            mod_key = plan_collapse(self.nodes, group_mod, opts.budget, fixed, prefix, context)
        else:
            mod_key = {}
        depths = sorted({len(module_levels(k)) for k in mod_key.values()})
        self.depth = opts.depth if opts.depth is not None else (depths[0] if depths else None)
        module_type = {n.module: n.module_type for n in self.nodes if n.module}
        computes: set[str] = set()  # items with a member other than an input
        for pos, n in enumerate(self.nodes):
            phase = self.phase.get(n.name, "")
            if n.name in alike:
                key, kind = alike[n.name], "alike"
                item_id = safe_id("@alike", key)
                cont = self._container(phase, self.alike.cluster(key))
            elif n.name in fixed:
                key, kind = kernel_of[n.name], "kernel"
                item_id = safe_id("@kernel", phase, key)
                cont = self._container(phase)
            elif n.name in mod_key:
                key, kind = mod_key[n.name], "module"
                st = status.get(n.name, "same")
                item_id = safe_id("@module", phase, key, st if st != "same" else "")
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
                item = self.items[item_id] = Item(item_id, kind, key, [], pos, cont)
            elif item_id not in computes and n.op != "placeholder":
                item.pos = pos  # a group sits where its computation starts, not its inputs
            if n.op != "placeholder":
                computes.add(item_id)
            item.members.append(n)
            self.item_of[n.name] = item_id
        self.module_type = module_type
        boxes = sum(1 for it in self.items.values() if it.kind == "module")
        if opts.depth is not None:
            self.notes.append(f"collapsed to module depth {opts.depth}")
        elif depths:
            span = f"{depths[0]}" if len(depths) == 1 else f"{depths[0]}–{depths[-1]}"
            fits = f" to fit {opts.budget} nodes" if len(self.items) <= opts.budget else ""
            what = "group" if derived else "module"
            self.notes.append(f"{boxes} {what} box{'es' if boxes != 1 else ''} ({what} depth {span}){fits}")
            if derived:
                self.notes.append(DERIVED_NOTE)
        if self.alike:
            self.notes += self.alike.notes()
        if self.kernels_collapsed:
            kernels = len({kernel_of[n] for n in fixed if n in kernel_of})
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
        pieces: dict[str, list[Item]] = defaultdict(list)
        for it in sorted(self.items.values(), key=lambda i: i.pos):
            pieces[root(it.id)].append(it)
        by_phase: dict[str, list[list[Item]]] = defaultdict(list)
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
        # shaped to fit a screen, at collapsed size (``--full`` is dot's own layout, which
        # these constraints slow down at thousands of nodes)
        shape = self.opts.collapse and not self.hidden and len(self.items) <= 2 * self.opts.budget
        rank = self.ranks(real) if shape else {}
        phase_of = {i: self._phase_of(i) for i in self.items}
        for a, b in fold_bands(list(real), rank, phase_of) if shape else ():
            stubbed.append((a, b, real.pop((a, b))))
        g = graphviz.Digraph(name=dot_id(self.graph.graph_id or "graph"), engine="dot")
        g.attr("graph", rankdir="TB", fontname=FONT, ranksep="0.3", nodesep="0.2",
               outputorder="edgesfirst", labelloc="t", labeljust="l", fontsize="18",
               label=dot_string(self._title()), tooltip=dot_string(self._title()))
        if self.hidden and not self.phase:  # packing ignores what is inside clusters
            g.attr("graph", pack="true", packmode="array_u")
        g.attr("node", fontname=FONT, fontsize="10", margin="0.08,0.03", height="0.3")
        g.attr("edge", color="#666666", arrowsize="0.6")
        stmts: dict[tuple, list[tuple[str, dict[str, str]]]] = defaultdict(list)
        kinds: set[str] = set()
        for it in sorted(self.items.values(), key=lambda i: i.pos):
            attrs = self._item_attrs(it)
            kinds.update((self._legend_kind(it), it.kind))  # "alike": its ×N row as well
            stmts[it.container].append((it.id, attrs))
        stubs = self._stubs(stubbed, stmts)
        self._kernel_notes(stmts)
        self._emit(g, stmts)
        for (a, b), pairs in real.items():
            g.edge(dot_id(a), dot_id(b), **dot_attrs(self._edge_attrs(a, b, pairs)))
        if self.hidden and self.phase:
            for a, b in self._stack_pieces(real):
                g.edge(dot_id(a), dot_id(b), style="invis", weight="0")
        elif shape:
            rank = self.ranks(real)  # without the edges stubbed between bands
            order = [it.id for it in sorted(self.items.values(), key=lambda i: i.pos)
                     if not self._is_output(it.id)]
            for a, b in wrap_rows(order, rank, phase_of, self.opts.row_width):
                g.edge(dot_id(a), dot_id(b), style="invis", weight="0", minlen="2")
        kernel_styles = {self._kernel_style(it.key) for it in self.items.values() if it.kind == "kernel"}
        kernel_styles |= {c[2] for it in self.items.values() for c in it.container}
        g.node(dot_id("@legend"), label=legend_label(kinds, diff=self.ov.status is not None,
                                             kernels=kernel_styles, stubs=bool(stubs),
                                             flagged=bool(self.ov.flagged)),
               shape="plain", id="legend", tooltip="legend")
        return DotResult(g, len(self.graph), len(self.items), self.depth, self.kernels_collapsed,
                         stubs, self.notes)

    def _title(self) -> str:
        parts = [self.opts.title or self.graph.graph_id]
        parts.append(f"{len(self.graph)} nodes")
        if len(self.items) != len(self.graph):
            parts.append(f"{len(self.items)} shown")
        return " · ".join(p for p in parts if p) + ("\n" + "; ".join(self.notes) if self.notes else "")

    def _id_extra(self, it: Item) -> list[str]:
        """What keeps a box's SVG id unique: its phase and, in a diff, its status."""
        first = it.members[0].name
        st = self.ov.status.get(first, "same") if self.ov.status is not None and it.kind == "module" else ""
        return [x for x in (self.phase.get(first, ""), st if st != "same" else "") if x]

    def _legend_kind(self, it: Item) -> str:
        if it.kind in ("node", "alike"):
            return node_kind(it.members[0])
        return it.kind if it.kind == "module" else "kernel"

    def _item_attrs(self, it: Item) -> dict[str, str]:
        st = self.ov.status
        key = it.members[0].name if it.kind == "node" else it.key.split(":")[0]
        flag = self.ov.flag_label.get(key, "") if it.kind != "module" else ""
        if it.kind == "alike":
            return self.alike.attrs(it.key, it.members)
        if it.kind == "node":
            n = it.members[0]
            tip = node_tooltip(n)
            if self._kernels_of.get(n.name):
                tip += "\nkernels: " + ", ".join(self._kernels_of[n.name])
            attrs = dict(KIND_STYLE[node_kind(n)], label=node_label(n, flag), tooltip=tip,
                         id=f"node:{n.name}")
            status = st.get(n.name, "same") if st is not None else None
        else:
            style = "module" if it.kind == "module" else self._kernel_style(it.key)
            mtype = self.module_type.get(it.key, "") if it.kind == "module" else ""
            names = ", ".join(m.name for m in it.members[:12]) + (", …" if len(it.members) > 12 else "")
            attrs = dict(KIND_STYLE[style], label=group_label(it, mtype, st, flag),
                         tooltip=f"{it.key}\n{len(it.members)} nodes: {names}",
                         id=f"{it.kind}:{it.key}" + "".join(f"@{x}" for x in self._id_extra(it)))
            status = group_status(it.members, st) if st is not None else None
        why = self.ov.flagged.get(key) if it.kind != "module" else None
        if why:
            attrs.update(FLAGGED_STYLE, tooltip=attrs["tooltip"] + "\n" + why)
            if "filled" not in attrs.get("style", ""):
                attrs["style"] = (attrs.get("style", "") + ",filled").lstrip(",")
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
            if "alike" not in (self.items[a].kind, self.items[b].kind):  # ×N: one edge, N times
                attrs["penwidth"] = str(min(4.0, 1 + len(pairs) / 4))
        attrs["tooltip"] = tip
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
            nid = safe_id("@kernel_note", k)
            label = "also works on " + ", ".join(shared[:STUB_NAMES]) + (
                f" +{len(shared) - STUB_NAMES}" if len(shared) > STUB_NAMES else "")
            cont = self._container("", (self._kernel_cluster(k),))
            stmts[cont].append((nid, dict(STUB_STYLE, label=clip(label, 60),
                                          tooltip=f"{k} also computes: " + ", ".join(shared))))
            self._stub_edges.append((nid, self.item_of[shared[0]]))

    def _stub_name(self, item_id: str, node: str) -> str:
        """How a stub names a far node: by name, or a box of alike nodes by its op (``addcdiv
        ×219``, not 219 names)."""
        it = self.items[item_id]
        return self.alike.name(it.key, it.members) if it.kind == "alike" and self.alike else node

    def _stubs(self, stubbed, stmts) -> int:
        """One stub per item for its far inputs and one for its far users."""
        ins: dict[str, list[str]] = defaultdict(list)
        outs: dict[str, list[str]] = defaultdict(list)
        for a, b, pairs in stubbed:
            for u, v in pairs:
                u, v = self._stub_name(a, u), self._stub_name(b, v)
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
                stmts[it.container].append((sid, dict(STUB_STYLE, label=clip(label, 60),
                                                      tooltip=tip)))
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
            g.edge(dot_id(a), dot_id(b), **dot_attrs(STUB_EDGE))

    def _emit_tree(self, g: graphviz.Digraph, tree: dict) -> None:
        for name, attrs in tree.get(None, []):
            g.node(dot_id(name), **dot_attrs(attrs))
        for key, sub in tree.items():
            if key is None:
                continue
            name, label, style = key
            with g.subgraph(name=dot_string(name)) as c:  # quoted whole: a ":" is no port here
                kernel = name.removeprefix("cluster_").split(":")[0]
                flagged = self.ov.flagged.get(kernel) if style == "kernel" else None
                tip = f"{label}\n{flagged}" if flagged else label
                if flagged and self.ov.flag_label.get(kernel):
                    label = f"{label}\n{self.ov.flag_label[kernel]}"
                c.attr(**dot_attrs({"label": label, "tooltip": tip, "fontname": FONT,
                                    "fontsize": "11", "margin": "6", **CLUSTER_STYLE[style],
                                    **({**FLAGGED_STYLE, "style": "rounded,filled,bold"}
                                       if flagged else {})}))
                self._emit_tree(c, sub)


def build_dot(graph: Graph, overlay: Overlay | None = None, opts: DotOptions | None = None) -> DotResult:
    """Lay a graph out as DOT (not yet run through ``dot``)."""
    return _Builder(graph, overlay or Overlay(), opts or DotOptions()).build()
