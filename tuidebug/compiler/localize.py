"""The first diverging kernel: which kernel of a compiled graph made its result wrong.

The compiled graphs of a compile are run once more (``step``: the forward, and the backward
when the call ran under autograd) with every generated kernel's written buffers recorded
(``compat.IntermediateValues``; which arguments a call writes is read from the wrapper code,
``wrapper_writes``). Each graph's post-grad FX graph is then run eagerly on the same inputs,
and again on them upcast to float64 under ``judge.KeptWide``, the graph verdict's float64 rule
(``compat.NodeValues``); each recorded buffer is matched to
the FX node whose value it holds (Inductor's buffer origins) and judged with the eager check's
rule (``judge.judge_output``: compiled vs eager vs float64). The first kernel in execution
order with a buffer judged wrong is the first diverging kernel: its inputs were right (every
kernel before it matched), its outputs are not.

Extern kernels (``extern_kernels.mm``, ATen fallbacks) are not recorded: a buffer they write is
judged where a generated kernel first reads it, under that kernel's name, so a wrong extern
kernel is not told apart from its first reader. A buffer several kernels write (one zeroes it,
a later one accumulates) is judged after the last, the others named with it
(``also_written_by``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable

import torch

from tuidebug.compiler import accuracy, compat, judge
from tuidebug.compiler.wrapper_writes import CallSite, call_sites


@dataclass
class LoweredGraph:
    """What capture keeps of one Inductor graph for the localization."""

    graph_id: str
    kind: str
    gm: Any  # the post-grad FX graph module
    origins: dict[str, str]  # buffer -> FX node
    module: Any  # the loaded wrapper module
    source: str  # its code
    kernels: list[str]  # its generated kernels


def _value_range(t: torch.Tensor) -> list[float] | None:
    if not t.is_floating_point() or t.numel() == 0:
        return None
    f = t.detach().float()
    f = f[f.isfinite()]
    return [float(f.min()), float(f.max())] if f.numel() else None


def _values(gm: Any, inputs: list[Any], wide: bool,
            reset_rng: Callable[[], None]) -> tuple[dict[str, Any], str, dict[str, str]]:
    """Every node's value (eager, or the float64 reference under ``judge.KeptWide``), why
    there is none from some node on ("" when every node ran), and, for the float64 run, the
    nodes whose value is no float64 reference, each with why (still computed in a narrower
    float: ``KeptWide.narrow_at``). A float64 run that drew random numbers gives no reference
    (``judge.RANDOM_WHY``, as the graph's verdict and repro.py)."""
    reset_rng()  # a graph drawing random numbers draws eager's from the compiled run's state
    args = [judge.upcast(x) if wide else (x.clone() if isinstance(x, torch.Tensor) else x)
            for x in inputs]
    run = compat.NodeValues(gm)
    mode = judge.KeptWide() if wide else None
    try:
        with torch.no_grad(), mode if mode is not None else contextlib.nullcontext():
            run.run(*args)
    except Exception as e:  # an op without float64 support: no reference for what follows
        text = str(e).strip().splitlines()[0][:160] if str(e).strip() else ""
        return _narrowed(run.values, mode), f"{type(e).__name__}: {text}", {}
    if mode is not None and mode.drew:
        return {}, judge.RANDOM_WHY, {}
    notes = {node: f"the float64 run computed it in a narrower float at {w}"
             for node, v in run.values.items() if mode is not None
             for w in [mode.narrow_at(v)] if w}
    return _narrowed(run.values, mode), "", notes


def _narrowed(values: dict[str, Any], mode: Any) -> dict[str, Any]:
    """``values`` without those ``mode`` (a ``KeptWide``, or None) saw computed narrow."""
    if mode is None:
        return values
    return {node: v for node, v in values.items() if not mode.narrow_at(v)}


def _judge_buffer(buf: str, node: str, value: torch.Tensor, eager: Any, wide: Any,
                  tol: float | None, why: str) -> dict[str, Any] | None:
    if not isinstance(eager, torch.Tensor) or eager.numel() != value.numel():
        return None
    e = eager.reshape(value.shape) if eager.shape != value.shape else eager
    r = wide.reshape(value.shape) if isinstance(wide, torch.Tensor) and \
        wide.numel() == value.numel() else None
    entry = judge.judge_output(value, e, r, tol, why or "no float64 value of this node")
    return {"buffer": buf, "node": node, "range": _value_range(value),
            "eager_range": _value_range(e), **entry}


def _judge_graph(g: LoweredGraph, inputs: list[Any], calls: list[tuple[str, dict[int, Any]]],
                 sites: dict[str, list[CallSite]], tol: float | None,
                 reset_rng: Callable[[], None], same_random: bool) -> dict[str, Any]:
    eager, why_eager, _ = _values(g.gm, inputs, False, reset_rng)
    wide, why, narrow = _values(g.gm, inputs, True, reset_rng)
    try:
        random = accuracy.random_ops(g.gm)
    except Exception:  # an odd graph: judged as one without random ops
        random = []
    kernels: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    for name, got in calls:
        n = counts[name] = counts.get(name, -1) + 1
        site = sites[name][n] if n < len(sites.get(name, [])) else None
        buffers = []
        for pos, value in sorted(got.items()):
            buf = site.args[pos] if site is not None else f"arg {pos}"
            node = g.origins.get(buf)
            if node is None or node not in eager:
                continue
            entry = _judge_buffer(buf, node, value, eager[node], wide.get(node), tol,
                                   narrow.get(node) or why)
            if entry is not None:
                earlier = site.also_written_by.get(pos) if site is not None else None
                if earlier:  # a wrong value here may be one of theirs: said with it
                    entry["also_written_by"] = earlier
                buffers.append(entry)
        kernel = {"kernel": name, "call": n, "buffers": buffers,
                  "ok": all(b["ok"] for b in buffers),
                  "err_compiled": _worst(buffers, "err_compiled"),
                  "err_eager": _worst(buffers, "err_eager")}
        if random and not same_random and not kernel["ok"]:
            kernel.update(ok=True, classified="random numbers")  # not a bug: other draws
        kernels.append(kernel)
    out = {"graph": g.graph_id, "kind": g.kind, "kernels": kernels,
           "reference": "float64" if not why else f"eager only: {why}"}
    if random:
        out["random_ops"] = random
        out["classified"] = (
            "random numbers: the graph draws them (" + ", ".join(random) + "); Inductor's "
            "kernels draw other numbers than eager, so a kernel that differs is classified, not "
            "flagged (trace with --set fallback_random=True to judge them)" if not same_random
            else "random numbers drawn by eager's ops from the same state (fallback_random): "
                 "the kernels are judged")
    if why_eager:
        out["note"] = f"the eager run of the post-grad graph stopped: {why_eager}"
    return out


def _worst(buffers: list[dict[str, Any]], key: str) -> float | None:
    vals = [b[key] for b in buffers if isinstance(b.get(key), (int, float))]
    return max(vals) if vals else None


def localize(graphs: list[LoweredGraph], step: Callable[[], Any], tol: float | None,
             reset_rng: Callable[[], None] = lambda: None,
             same_random: bool = False) -> dict[str, Any]:
    """``{"graphs": [per graph run, in execution order: its kernels judged], "first": the first
    diverging kernel or None, "not_run": graphs the step did not run}``. ``reset_rng`` puts
    the RNG state ``step`` started from back (before each eager run of a graph);
    ``same_random``: Inductor's ``fallback_random`` was on (a graph drawing random numbers
    draws eager's, so its kernels are judged; otherwise a kernel that differs there is
    classified as random numbers, not flagged)."""
    sites = {g.graph_id: _by_kernel(call_sites(g.source, set(g.kernels))) for g in graphs}

    def writes(key: str, kernel: str, n: int) -> list[int]:
        calls = sites[key].get(kernel, [])
        return calls[n].writes if n < len(calls) else []

    with compat.IntermediateValues({g.graph_id: g.module for g in graphs},
                                   {g.graph_id: g.kernels for g in graphs}, writes) as rec:
        step()
    by_id = {g.graph_id: g for g in graphs}
    report: dict[str, Any] = {"graphs": [], "first": None,
                              "not_run": [g.graph_id for g in graphs if g.graph_id not in rec.inputs]}
    if not rec.inputs:
        report["note"] = "the run did not call any compiled graph of this compile"
    for gid, inputs in rec.inputs.items():
        judged = _judge_graph(by_id[gid], inputs, rec.calls[gid], sites[gid], tol, reset_rng,
                              same_random)
        report["graphs"].append(judged)
        if report["first"] is None:
            bad = next((k for k in judged["kernels"] if not k["ok"]), None)
            if bad is not None:
                report["first"] = {"graph": gid, "kind": judged["kind"], **bad}
    classified = [g["classified"] for g in report["graphs"] if g.get("classified")]
    if classified:
        report["note"] = classified[0]
    return report


def _by_kernel(sites: list[CallSite]) -> dict[str, list[CallSite]]:
    out: dict[str, list[CallSite]] = {}
    for s in sites:
        out.setdefault(s.kernel, []).append(s)
    return out
