"""Kernel ↔ IR node ↔ FX node ↔ user source line, from a graph's ``provenance.json``.

One answer each for every viewer: the kernels computing an FX node (``kernels_for_node``,
following pre-grad → post-grad names), what is known of each kernel (``kernel_infos``), the FX
nodes of each call of a kernel Inductor reuses (``kernel_calls``), and which kernel a drawing
puts each FX node in (``kernel_owners``). Pure data: no torch, no Textual.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tuidebug.trace.format.graph import Graph
from tuidebug.trace.format.reader import GraphRecord
from tuidebug.trace.format.kernel_entry import KernelEntry
from tuidebug.trace.format import safefile


def kernel_launches(g: GraphRecord) -> dict[str, dict[str, Any]]:
    """Each Triton kernel's launch (``code/launches.jsonl``: grid, block sizes, warps…) by
    kernel name; empty for a graph without Triton kernels (the file is not read)."""
    if not any(k.kind == "triton" for k in g.kernels):
        return {}
    out = {}
    for name, rec in g.launches.items():
        launch = rec.get("launch") if isinstance(rec, dict) else None
        if isinstance(launch, dict):
            out[name] = launch
    return out


def kernels_for_node(g: GraphRecord, node: str) -> list[str]:
    """Kernels that compute an FX node, whatever stage's name it has: a post-grad name directly,
    a pre-grad name through the post-grad nodes it became (``pre_to_post``)."""
    prov = g.provenance or {}
    fx_to_kernels = prov.get("fx_to_kernels") or {}
    direct = list(fx_to_kernels.get(node, []))
    if direct:
        return direct
    out: list[str] = []
    for post in (prov.get("pre_to_post") or {}).get(node, []):
        for k in fx_to_kernels.get(post, []):
            if k not in out:
                out.append(k)
    return out


def generated_kernels(g: GraphRecord, kernels: list[KernelEntry] | None = None) -> int | None:
    """The kernels Inductor generated for ``g`` (C++, Triton): every count of them (``info``,
    the overview, the code and errors screens) is this one. Its extern calls (addmm) are not
    kernels it generated; meta.json's count, which holds both, only where the kernel index
    (``code/kernels.json``) is missing; None where neither was recorded. ``kernels``: ``g``'s
    kernel index where it is at hand already (a comparison's other graph holds the same)."""
    kernels = g.kernels if kernels is None else kernels
    if kernels:
        return sum(1 for k in kernels if not k.extern)
    return g.meta.kernels


@dataclass
class KernelInfo:
    name: str
    kind: str
    file: str | None
    lines: int | None
    wrapper_line: int | None
    ir_nodes: list[str] = field(default_factory=list)
    fx_nodes: list[str] = field(default_factory=list)
    source: list[dict[str, Any]] = field(default_factory=list)
    original_aten: list[str] = field(default_factory=list)
    launch: dict[str, Any] | None = None  # Triton: grid, block sizes, warps, registers…


def kernel_infos(g: GraphRecord) -> list[KernelInfo]:
    """Every kernel of the graph with its IR nodes, FX nodes, source lines and launch."""
    prov = (g.provenance or {}).get("kernels") or {}
    launches = kernel_launches(g)
    out = []
    for k in g.kernels:
        name = k.name
        p = prov.get(name) or {}
        fx = list(p.get("fx_nodes") or k.source_nodes)
        out.append(KernelInfo(
            name=name, kind=k.kind or "?", file=k.file, lines=k.lines,
            wrapper_line=k.wrapper_line, ir_nodes=list(p.get("ir_nodes") or []),
            fx_nodes=fx, source=[s for s in p.get("source") or [] if isinstance(s, dict)],
            original_aten=list(k.original_aten or []),
            launch=launches.get(name)))
    return out


def kernel_calls(g: GraphRecord, name: str, prov: dict[str, Any]) -> dict[str, list[str]]:
    """The FX nodes of each call of a kernel. Inductor reuses one kernel for identical work (a
    layer's GELU, 24 times in 24 layers): each call is its own scheduler node(s) in
    ir_post_fusion.json, in schedule order, named in the wrapper by a handle
    (``cpp_fused_gelu_view_3:21``)."""
    nodes = [str(n) for n in prov.get("fx_nodes") or []]
    entry = g.kernel(name)
    handles = sorted(entry.handles if entry else [],
                     key=lambda h: safefile.to_int(h.rsplit(":", 1)[-1], 0))
    if len(handles) < 2 or (entry is not None and entry.extern):
        return {name: nodes}
    ops = set(prov.get("ir_nodes") or [])
    groups = [n for n in (g.ir_post or {}).get("nodes") or []
              if isinstance(n, dict) and ops & set(n.get("members") or [])]
    if not groups or len(groups) % len(handles):
        return {name: nodes}
    per = len(groups) // len(handles)  # a call may run several loop nests, in schedule order
    return {h: [str(o) for grp in groups[i * per:(i + 1) * per] for o in grp.get("origins") or []]
            for i, h in enumerate(handles)}


@dataclass
class KernelOwners:
    """Which kernel (or kernel call) a drawing puts each FX node in."""

    kernel_of: dict[str, str]  # FX node -> the one kernel drawn around it
    kind: dict[str, str]  # kernel (or call) -> its kind ("extern", "cpp", "triton"…)
    listed: dict[str, list[str]]  # kernel (or call) -> every FX node it lists


def kernel_owners(g: GraphRecord, graph: Graph) -> KernelOwners | None:
    """From provenance.json: each FX node's one kernel (None: no kernel provenance).

    A node can be listed under several kernels: an extern call lists the nodes feeding it, and a
    generated kernel may finish what an extern call started (a convolution's bias). An extern
    call owns the node it is named after (the first it lists); any other node goes to the first
    generated kernel listing it, else to an extern call that is alone in listing it. A tuple
    access (``getitem``) goes with the node it reads.
    """
    prov = (g.provenance or {}).get("kernels") or {}
    if not prov:
        return None
    kind = {k.name: k.kind or "" for k in g.kernels}
    for name, k in prov.items():
        kind.setdefault(name, str(k.get("kind", "")))
    listed: dict[str, list[str]] = {}
    for name, k in prov.items():
        for unit, nodes in kernel_calls(g, name, k).items():
            listed[unit] = nodes
            kind[unit] = kind.get(name, "")
    claims: dict[str, list[str]] = {}
    for name, nodes in listed.items():
        for n in nodes:
            claims.setdefault(n, []).append(name)
    kernel_of: dict[str, str] = {}
    for name, nodes in listed.items():
        if kind.get(name) == "extern" and nodes:
            kernel_of.setdefault(nodes[0], name)
    for node, ks in claims.items():
        if node in kernel_of:
            continue
        generated = [k for k in ks if kind.get(k) != "extern"]
        if generated:
            kernel_of[node] = generated[0]
        elif len(ks) == 1:
            kernel_of[node] = ks[0]
    for n in graph:
        if n.name not in kernel_of and n.target.endswith("getitem") and len(n.inputs) == 1:
            if n.inputs[0] in kernel_of:
                kernel_of[n.name] = kernel_of[n.inputs[0]]
    return KernelOwners(kernel_of, kind, listed)
