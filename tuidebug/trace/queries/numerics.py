"""Which kernel made it wrong: the first diverging kernel of a compile's eager check.

The check (runtime.json, ``numerics``) judged every generated kernel's written buffers against
the post-grad FX graph run eagerly and in float64 (trace-format.md); this joins the first kernel
judged wrong with what the trace knows of it: its FX nodes and source lines (provenance), each
wrong buffer's node and the line that node came from. Pure data: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.numerics_classes import classified
from tuidebug.trace.queries.numerics_reruns import unjudged
from tuidebug.trace.queries.provenance import kernel_infos


@dataclass
class WrongBuffer:
    buffer: str
    node: str
    err_compiled: float | None
    err_eager: float | None
    rule: str
    detail: str
    value_range: list[float] | None
    eager_range: list[float] | None
    source: dict[str, Any] | None  # the node's user line: {file, line, fn, code}
    # the calls that wrote the buffer before this kernel (a wrong value may be theirs)
    also_written_by: list[str] = field(default_factory=list)


@dataclass
class FirstDivergence:
    """The first kernel, in execution order, whose output departs from float64 by more than
    eager's does."""

    compile_id: str
    graph: str
    kind: str
    kernel: str
    call: int
    err_compiled: float | None
    err_eager: float | None
    buffers: list[WrongBuffer] = field(default_factory=list)
    fx_nodes: list[str] = field(default_factory=list)
    source: list[dict[str, Any]] = field(default_factory=list)
    judged: int = 0  # kernel calls judged in all

    def to_json(self) -> dict[str, Any]:
        return {"compile_id": self.compile_id, "graph": self.graph, "kind": self.kind,
                "kernel": self.kernel, "call": self.call, "err_compiled": self.err_compiled,
                "err_eager": self.err_eager, "fx_nodes": self.fx_nodes, "source": self.source,
                "judged": self.judged,
                "buffers": [vars(b) for b in self.buffers]}


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _node_source(trace: Trace, graph: str, node: str) -> dict[str, Any] | None:
    try:
        g = trace.graph(graph).final_graph()
    except KeyError:  # a graph the trace does not hold
        return None
    n = g.get(node) if g is not None else None
    return n.source if n is not None and isinstance(n.source, dict) else None


def first_divergence(trace: Trace, compile_id: str,
                     check: dict[str, Any]) -> FirstDivergence | None:
    """The first diverging kernel of ``check`` (a runtime.json check), or None (none judged
    wrong, or the kernels not judged)."""
    report = check.get("numerics")
    first = report.get("first") if isinstance(report, dict) else None
    if not isinstance(first, dict):
        return None
    graph, kernel = str(first.get("graph") or ""), str(first.get("kernel") or "")
    judged = sum(len(g.get("kernels") or []) for g in report.get("graphs") or []
                 if isinstance(g, dict))
    out = FirstDivergence(compile_id, graph, str(first.get("kind") or ""), kernel,
                          int(first.get("call") or 0), _num(first.get("err_compiled")),
                          _num(first.get("err_eager")), judged=judged)
    for b in first.get("buffers") or []:
        if not isinstance(b, dict) or b.get("ok") is not False:
            continue
        node = str(b.get("node") or "")
        out.buffers.append(WrongBuffer(
            str(b.get("buffer") or ""), node, _num(b.get("err_compiled")),
            _num(b.get("err_eager")), str(b.get("rule") or ""), str(b.get("detail") or ""),
            b.get("range") if isinstance(b.get("range"), list) else None,
            b.get("eager_range") if isinstance(b.get("eager_range"), list) else None,
            _node_source(trace, graph, node),
            [str(k) for k in b.get("also_written_by") or [] if isinstance(k, str)]
            if isinstance(b.get("also_written_by"), list) else []))
    try:
        info = next((k for k in kernel_infos(trace.graph(graph)) if k.name == kernel), None)
    except KeyError:  # no such graph in the trace
        info = None
    if info is not None:
        out.fx_nodes, out.source = list(info.fx_nodes), list(info.source)
    return out


def first_divergences(trace: Trace) -> list[FirstDivergence]:
    """The first diverging kernel of each compile whose check found one."""
    out = []
    for cid, check in (trace.runtime.get("checks") or {}).items():
        if isinstance(check, dict):
            found = first_divergence(trace, str(cid), check)
            if found is not None:
                out.append(found)
    return out


def numerics_summary(trace: Trace) -> dict[str, Any]:
    """``info --json``'s ``numerics``: per compile whose kernels were judged, each kernel call
    (graph, kernel, call, its worst error against float64, eager's, the verdict, what it was
    classified as when it differs for a reason that is not a bug), the first
    diverging kernel, and the note or the reason it was not judged."""
    classes = classified(trace)  # numerics.json: `tuidebug numerics`'s re-runs
    out: dict[str, Any] = {}
    for cid, check in (trace.runtime.get("checks") or {}).items():
        report = check.get("numerics") if isinstance(check, dict) else None
        if not isinstance(report, dict):
            continue
        kernels = [{"graph": g.get("graph"), "kind": g.get("kind"), "kernel": k.get("kernel"),
                    "call": k.get("call"), "err_compiled": _num(k.get("err_compiled")),
                    "err_eager": _num(k.get("err_eager")), "ok": k.get("ok"),
                    "classified": k.get("classified"), "judged": not unjudged(k)}
                   for g in report.get("graphs") or [] if isinstance(g, dict)
                   for k in g.get("kernels") or [] if isinstance(k, dict)]
        first = first_divergence(trace, str(cid), check)
        c = classes.get(str(cid))
        out[str(cid)] = {"kernels": kernels, "first": first.to_json() if first else None,
                         "note": report.get("note") or report.get("skipped"),
                         "classified": c.to_json() if c else None}
    return out


@dataclass
class KernelNumerics:
    """One generated kernel of a graph as the numerics check judged it, over its calls: the
    worst error against float64, eager's beside it, the verdict. A kernel judged wrong after
    the first diverging one may only carry that one's error forward (each kernel is compared
    with eager on the graph's inputs, not on its own): ``first`` tells them apart."""

    kernel: str
    calls: int  # calls judged
    ok: bool
    err_compiled: float | None
    err_eager: float | None
    classified: str | None = None  # differs for a reason that is not a bug (random numbers)
    first: bool = False  # the first diverging kernel of its compile


@dataclass
class NodeNumerics:
    """An FX node whose value a judged buffer held (the post-grad graph's node)."""

    node: str
    kernel: str
    ok: bool
    err_compiled: float | None
    err_eager: float | None
    first: bool = False  # a wrong buffer of the first diverging kernel
    source: dict[str, Any] | None = None  # a wrong node's user line: {file, line, fn, code}


@dataclass
class GraphNumerics:
    """What the numerics check judged in one graph: by kernel, and by post-grad FX node."""

    kernels: dict[str, KernelNumerics] = field(default_factory=dict)
    nodes: dict[str, NodeNumerics] = field(default_factory=dict)


def _worse(old: float | None, new: float | None) -> float | None:
    return new if old is None or (new is not None and new > old) else old


def graph_numerics(trace: Trace, graph_id: str) -> GraphNumerics:
    """The kernels and FX nodes of ``graph_id`` that a numerics check judged (none when the
    kernels were not judged)."""
    out = GraphNumerics()
    for check in (trace.runtime.get("checks") or {}).values():
        report = check.get("numerics") if isinstance(check, dict) else None
        if not isinstance(report, dict):
            continue
        first = report.get("first") if isinstance(report.get("first"), dict) else {}
        for g in report.get("graphs") or []:
            if not isinstance(g, dict) or str(g.get("graph")) != graph_id:
                continue
            for k in g.get("kernels") or []:
                if not isinstance(k, dict) or not k.get("kernel") or unjudged(k):
                    continue
                name = str(k["kernel"])
                is_first = first.get("graph") == graph_id and first.get("kernel") == name \
                    and first.get("call") == k.get("call")
                kn = out.kernels.get(name)
                if kn is None:
                    kn = out.kernels[name] = KernelNumerics(name, 0, True, None, None)
                kn.calls += 1
                kn.ok = kn.ok and k.get("ok") is not False
                if is_first or not kn.first:
                    kn.err_compiled = _num(k.get("err_compiled")) if is_first else \
                        _worse(kn.err_compiled, _num(k.get("err_compiled")))
                    kn.err_eager = _num(k.get("err_eager")) if is_first else \
                        _worse(kn.err_eager, _num(k.get("err_eager")))
                kn.first = kn.first or is_first
                if k.get("classified"):
                    kn.classified = str(k["classified"])
                for b in k.get("buffers") or []:
                    if not isinstance(b, dict) or not b.get("node"):
                        continue
                    node = str(b["node"])
                    bad = b.get("ok") is False
                    old = out.nodes.get(node)
                    if old is not None and (old.first or (not old.ok and not bad)):
                        continue  # the first kernel's verdict, else a wrong one, is kept
                    out.nodes[node] = NodeNumerics(node, name, not bad,
                                                   _num(b.get("err_compiled")),
                                                   _num(b.get("err_eager")), is_first and bad)
    for n in out.nodes.values():
        if not n.ok:
            n.source = _node_source(trace, graph_id, n.node)
    return out


def testing_only_flags(trace: Trace) -> list[tuple[str, str]]:
    """The ``*_TESTING_ONLY`` Inductor flags the trace's config set (a planted bug, a forced
    failure): ``(name, value as text)``, sorted. A trace that sets one does not show what
    Inductor does, and every view says so at its top (``testing_only_banner``)."""
    changed = trace.config.get("changed") if isinstance(trace.config, dict) else None
    out = []
    for name, entry in (changed or {}).items():
        value = entry.get("value") if isinstance(entry, dict) else entry
        if str(name).endswith("_TESTING_ONLY") and value not in (None, False, 0, ""):
            out.append((str(name), repr(value)))
    return sorted(out)


def testing_only_banner(flags: list[tuple[str, str]]) -> str:
    """One line for the top of a view, or "" when no testing-only flag is set."""
    if not flags:
        return ""
    return ("TESTING-ONLY flag set: " + ", ".join(f"{n}={v}" for n, v in flags)
            + " — Inductor was broken on purpose; results here are not Inductor's own")
