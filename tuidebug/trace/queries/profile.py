"""Where the time goes: ``profile.json`` (``tuidebug trace --profile``) joined with provenance.

Each measured kernel call is shared equally among the FX nodes it computes (``kernel_calls``:
a reused kernel's calls each have their own nodes); each FX node goes to its user source line
and module; the eager graph's FX nodes (the Dynamo graph, measured one by one) go to theirs.
So per line and per module, compiled and eager sit side by side. Totals split the compiled
call's wall time into generated kernels, extern calls (ATen, matmul libraries) and the rest
(Python, launches, allocation).

Every row has a phase: "fwd" (the forward or inference call) or "bwd" (its backward, when the
compile ran under autograd: the backward graph's kernels and FX nodes — which carry the forward
lines they differentiate — and the eager backward per forward FX node). A line or module has a
row per phase; ``totals["backward"]`` has the backward's totals. Pure data: no torch, no
Textual.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tuidebug.trace.format import safefile
from tuidebug.trace.format.graph import Graph
from tuidebug.trace.queries.graph_times import GraphTimes, run_spread, summed
from tuidebug.trace.queries.provenance import kernel_calls
from tuidebug.trace.queries.roofline import roofline_rows
from tuidebug.trace.queries.whole_call import CallVerdict, call_verdicts
from tuidebug.trace.format.reader import GraphRecord, Trace

NO_NODE = "(no FX node)"
NO_LINE = "(no source line)"
TOP_LEVEL = "(top level)"


@dataclass
class Row:
    """One row of a profile table: a kernel call, an FX node, a source line or a module."""

    key: str
    compiled_s: float | None = None
    eager_s: float | None = None
    kind: str = ""  # a kernel's kind (cpp, triton, extern); a node's target
    graph: str = ""
    kernel: str = ""  # the kernel to jump to (kernels, nodes)
    calls: float | None = None
    file: str | None = None
    line: int | None = None
    code: str = ""
    device_s: float | None = None  # kernels on a GPU: the device's time
    cpu_s: float | None = None
    node: str = ""  # FX node rows: the node's name
    bytes: float | None = None  # Triton kernel calls (GPU): bytes moved and FLOPs per call
    flops: float | None = None
    top: float = 0.0  # lines, modules: the largest share of one kernel (``kernel`` is that one)
    phase: str = "fwd"  # "fwd": the forward (or inference) call; "bwd": its backward

    def as_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, "") and k != "top"}


@dataclass
class ProfileView:
    compiles: list[str]
    kernels: list[Row] = field(default_factory=list)
    nodes: list[Row] = field(default_factory=list)
    lines: list[Row] = field(default_factory=list)
    modules: list[Row] = field(default_factory=list)
    totals: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # the user's whole call, compiled against eager, and its ledger (queries/whole_call.py)
    calls: list[CallVerdict] = field(default_factory=list)

    def table(self, which: str) -> list[Row]:
        return {"kernels": self.kernels, "nodes": self.nodes, "lines": self.lines,
                "modules": self.modules}[which]


def _num(v: Any) -> float:
    """A measured time: a finite number that is not negative, else 0 (NaN, infinities and
    negative times from a damaged profile.json add nothing)."""
    return safefile.number(v, minimum=0) or 0.0


def _opt(v: Any) -> float | None:
    """A measured quantity kept on a row (device time, bytes, FLOPs, calls): finite and not
    negative, else None (not measured)."""
    return safefile.number(v, minimum=0)


def _add(table: dict[tuple[str, str], Row], key: str, phase: str, compiled: float = 0.0,
         eager: float = 0.0, via: tuple[str, str] | None = None, **attrs: Any) -> None:
    """Add time to row ``key`` of ``phase``; ``via``: the (graph, kernel) the compiled time is
    from (a line or module row jumps to the kernel with the largest share in it)."""
    row = table.get((phase, key))
    if row is None:
        row = table[(phase, key)] = Row(key, phase=phase, **attrs)
    if compiled:
        row.compiled_s = (row.compiled_s or 0.0) + compiled
        if via is not None and compiled > row.top:
            row.top, (row.graph, row.kernel) = compiled, via
    if eager:
        row.eager_s = (row.eager_s or 0.0) + eager


def _graph_of(trace: Trace, gid: str, cache: dict[str, tuple[GraphRecord | None, Graph | None,
                                                             Graph | None]]) -> tuple[Any, Any, Any]:
    """(record, final graph, Dynamo graph) of graph ``gid`` (Nones when it is not there)."""
    if gid not in cache:
        try:
            g: GraphRecord | None = trace.graph(gid)
        except Exception:  # a profile naming a graph the trace lacks
            g = None
        final = g.final_graph() if g is not None else None
        dynamo = None
        if g is not None:
            stage = g.find_stage("dynamo") or (g.snapshots()[0] if g.snapshots() else None)
            dynamo = g.stage_graph(stage) if stage is not None else None
        cache[gid] = (g, final, dynamo)
    return cache[gid]


def _place(graph: Graph | None, node: str) -> tuple[str, int | None, str, str, str]:
    """(line key, line, file, code, module) of FX node ``node``."""
    n = graph.get(node) if graph is not None else None
    if n is None or not isinstance(n.source, dict) or not n.source.get("file"):
        return NO_LINE, None, "", "", (n.module if n is not None and n.module else TOP_LEVEL)
    line = n.source.get("line")
    line = line if isinstance(line, int) and not isinstance(line, bool) else None
    file = str(n.source.get("file"))
    return f"{file}:{line}", line, file, str(n.source.get("code") or ""), n.module or TOP_LEVEL


def _kernel_nodes(g: GraphRecord | None, kernel: str, call: str) -> list[str]:
    if g is None:
        return []
    prov = ((g.provenance or {}).get("kernels") or {}).get(kernel) or {}
    entry = g.kernel(kernel)
    if not prov.get("fx_nodes"):
        return list(entry.source_nodes) if entry else []
    calls = kernel_calls(g, kernel, prov)
    return calls.get(call) or calls.get(kernel) or [str(n) for n in prov["fx_nodes"]]


def computed_nodes(graph: Graph | None, kind: str, kernel: str, nodes: list[str]) -> list[str]:
    """The FX nodes a kernel's time is credited to, of those provenance lists for it: an extern
    call computes only the node it is named after (``extern_kernels.addmm`` → ``addmm_3``;
    provenance also lists the nodes feeding it — a LayerNorm's ``mul``, a ``permute`` of the
    weight — which it does not compute); a view (``permute``, ``view``, …) launches nothing and
    gets no time while the kernel computes another node."""
    if kind == "extern":
        op = kernel.split(":", 1)[0].rsplit(".", 1)[-1]
        if op == "default":  # torch.ops.aten.<op>.default
            op = kernel.split(":", 1)[0].rsplit(".", 2)[-2]
        named = [n for n in nodes if re.fullmatch(rf"{re.escape(op)}(_\d+)?", n) or (
            graph is not None and graph.get(n) is not None and graph.get(n).short_target == op)]
        return named or nodes[:1]
    if graph is None:
        return nodes
    kept = [n for n in nodes if not (graph.get(n) is not None and graph.get(n).is_view)]
    return kept or nodes


def _kernels_into(tables: dict[str, dict[tuple[str, str], Row]], view: ProfileView,
                  trace: Trace, cache: dict[str, Any], kernels: list[dict[str, Any]],
                  phase: str, tot: dict[str, Any]) -> None:
    """Each measured kernel call of one phase: a kernel row, and its time shared among its FX
    nodes, their lines and modules."""
    nodes, lines, modules = tables["nodes"], tables["lines"], tables["modules"]
    for k in kernels:
        t = _num(k.get("time_s"))
        kind = str(k.get("kind") or "")
        tot["extern_s" if kind == "extern" else "generated_s"] += t
        g, final, _ = _graph_of(trace, k["graph"], cache)
        call = str(k.get("call") or k["kernel"])
        view.kernels.append(Row(call, compiled_s=t, kind=kind, graph=k["graph"],
                                kernel=k["kernel"], calls=_opt(k.get("calls")),
                                device_s=_opt(k.get("device_s")), cpu_s=_opt(k.get("cpu_s")),
                                bytes=_opt(k.get("bytes")), flops=_opt(k.get("flops")),
                                phase=phase))
        names = computed_nodes(final, kind, k["kernel"], _kernel_nodes(g, k["kernel"], call))
        share = t / len(names) if names else t
        for name in names or [NO_NODE]:
            key, line, file, code, module = _place(final, name)
            target = final.get(name).target if final is not None and final.get(name) else ""
            _add(nodes, f"{k['graph']}:{name}", phase, share, graph=k["graph"],
                 kernel=k["kernel"], kind=target, file=file or None, line=line, code=code,
                 node=name if name != NO_NODE else "")
            via = (k["graph"], k["kernel"])
            _add(lines, key, phase, share, via=via, file=file or None, line=line, code=code)
            _add(modules, module, phase, share, via=via)


def _eager_into(tables: dict[str, dict[tuple[str, str], Row]], dynamo: Graph | None,
                eager_nodes: list[dict[str, Any]], phase: str) -> None:
    """The eager graph's FX nodes of one phase (measured one by one) to their lines, modules."""
    for n in eager_nodes:
        t = _num(n.get("time_s"))
        key, line, file, code, module = _place(dynamo, n["node"])
        _add(tables["lines"], key, phase, eager=t, file=file or None, line=line, code=code)
        _add(tables["modules"], module, phase, eager=t)


def _shares(tot: dict[str, Any], spreads: dict[str, list[Any]]) -> None:
    """The compiled call's wall time split into generated kernels, extern calls and the rest;
    each side's spread over the compiles (``spreads``) and the verdict they allow."""
    wall = tot["compiled_wall_s"]
    tot["overhead_s"] = max(0.0, wall - tot["generated_s"] - tot["extern_s"])
    # a kernel's range includes the profiler's own cost: on a tiny graph the kernels can add up
    # to more than the unprofiled call, and then the shares are of their sum
    whole = max(wall, tot["generated_s"] + tot["extern_s"])
    if whole > 0:
        for part in ("generated", "extern", "overhead"):
            tot[f"{part}_share"] = round(tot[f"{part}_s"] / whole, 4)
    if wall > 0 and tot["eager_wall_s"] > 0:
        tot["speedup"] = round(tot["eager_wall_s"] / wall, 4)
    tot.update(GraphTimes(summed(spreads["compiled"]), summed(spreads["eager"])).as_json())


def _phase_totals() -> dict[str, Any]:
    return {"compiled_wall_s": 0.0, "eager_wall_s": 0.0, "generated_s": 0.0, "extern_s": 0.0}


def _timed(tot: dict[str, Any], spreads: dict[str, list[Any]], entry: dict[str, Any]) -> None:
    """One compile's (or its backward's) compiled and eager wall times into ``tot``."""
    for side in ("compiled", "eager"):
        run = entry.get(side) or {}
        tot[f"{side}_wall_s"] += _num(run.get("wall_s"))
        spreads[side].append(run_spread(run))


def profile_view(trace: Trace) -> ProfileView | None:
    """The joined profile of a trace; None when it was not profiled."""
    prof = trace.profile
    compiles = prof.get("compiles") or {}
    calls = call_verdicts(trace)
    if not compiles and not calls:
        return None
    view = ProfileView(compiles=sorted(compiles), calls=calls)
    for c in prof.get("calls") or []:  # a whole call not timed, and why
        if isinstance(c, dict) and isinstance(c.get("not_measured"), str):
            view.notes.append(f"whole call of {c.get('callable') or '?'} not measured: "
                              f"{c['not_measured']}")
    cache: dict[str, Any] = {}
    tables: dict[str, dict[tuple[str, str], Row]] = {"nodes": {}, "lines": {}, "modules": {}}
    tot = {**_phase_totals(), "runs": None, "device": None, "cudagraphs": False,
           "compiled_peak_memory_bytes": None, "eager_peak_memory_bytes": None,
           "device_peak": None}
    back: dict[str, Any] | None = None
    spreads: dict[str, list[Any]] = {"compiled": [], "eager": []}
    back_spreads: dict[str, list[Any]] = {"compiled": [], "eager": []}
    for cid in view.compiles:
        c = compiles[cid]
        tot["runs"] = c.get("runs")
        tot["device"] = c.get("device")
        tot["cudagraphs"] = bool(tot["cudagraphs"] or c.get("cudagraphs"))
        tot["device_peak"] = tot["device_peak"] or c.get("device_peak")
        _timed(tot, spreads, c)
        for side in ("compiled", "eager"):
            peak = (c.get(side) or {}).get("peak_memory_bytes")
            if isinstance(peak, int):
                key = f"{side}_peak_memory_bytes"
                tot[key] = max(tot[key] or 0, peak)
        if c.get("note"):
            view.notes.append(f"{cid}: {c['note']}")
        _kernels_into(tables, view, trace, cache, c.get("kernels") or [], "fwd", tot)
        eager_graph = str(c.get("eager_graph") or "")
        _, _, dynamo = _graph_of(trace, eager_graph, cache) if eager_graph else (None, None, None)
        _eager_into(tables, dynamo, c.get("eager_nodes") or [], "fwd")
        b = c.get("backward")
        if not b:
            continue
        back = back or _phase_totals()
        _timed(back, back_spreads, b)
        _kernels_into(tables, view, trace, cache, b.get("kernels") or [], "bwd", back)
        _eager_into(tables, dynamo, b.get("eager_nodes") or [], "bwd")
        if b.get("note"):
            view.notes.append(f"{cid}: backward: {b['note']}")
        if b.get("eager_nodes_from") not in (None, "sequence_nr"):
            view.notes.append(f"{cid}: the eager backward per FX node: {b['eager_nodes_from']}")
    _shares(tot, spreads)
    if back is not None:
        _shares(back, back_spreads)
        tot["backward"] = back
    view.totals = tot

    def by_time(rows: list[Row]) -> list[Row]:
        return sorted(rows, key=lambda r: (-max(r.compiled_s or 0.0, r.eager_s or 0.0), r.key,
                                           r.phase))
    view.kernels = by_time(view.kernels)
    view.nodes = by_time(list(tables["nodes"].values()))
    view.lines = by_time(list(tables["lines"].values()))
    view.modules = by_time(list(tables["modules"].values()))
    return view


def profile_summary(view: ProfileView, top: int = 20) -> dict[str, Any]:
    """What ``info --json`` says under ``profile``: totals, the ``top`` kernels, FX nodes,
    lines and modules by time, and the roofline of the GPU's Triton kernels."""

    whole = ({"verdict": view.calls[0].verdict_json(),
              "ledger": [p.as_json() for p in view.calls[0].ledger],
              "verdicts": [c.verdict_json() for c in view.calls]} if view.calls else {})
    return {**whole, "compiles": view.compiles, "totals": view.totals, "notes": view.notes,
            **{which: [r.as_json() for r in view.table(which)[:top]]
               for which in ("kernels", "nodes", "lines", "modules")},
            "roofline": roofline_rows(view)}
