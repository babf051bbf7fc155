"""What goes into a DOT drawing and what comes out: the overlay a view adds, the options, the
result, and one drawn item."""

from __future__ import annotations

from dataclasses import dataclass, field

import graphviz

from tuidebug.trace.format.graph import Node


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
    # the first diverging kernel (trace/queries/numerics.py), drawn red: kernel or FX node -> why
    # (its tooltip); flag_label: the same keys -> a short line written under its label
    flagged: dict[str, str] = field(default_factory=dict)
    flag_label: dict[str, str] = field(default_factory=dict)


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
    row_width: int = 12  # a row of more boxes side by side than this wraps (see dot/shape.py)
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
class Item:
    """One drawn node: an FX node, a collapsed module or a collapsed kernel."""

    id: str
    kind: str  # "node" | "module" | "kernel"
    key: str
    members: list[Node]
    pos: int
    container: tuple[tuple[str, str, str], ...]  # nested clusters: (name, label, style)
