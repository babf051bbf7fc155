"""The kernel calls of compiled graphs as ``--profile`` measures them: which profiler range each
call of a generated kernel or an extern call runs in (``tuidebug.k/<graph>/<call>``), and the
per-call rows of ``profile.json`` made of what was measured in those ranges. Shared by the
forward (``profile``) and the backward (``profile_backward``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from tuidebug.compiler import compat
from tuidebug.compiler.capture.state import GraphState
from tuidebug.trace.format.kernel_entry import KernelEntry
from tuidebug.trace.queries.verdict import spread

KERNEL_PREFIX = "tuidebug.k/"  # profiler range of one kernel call: tuidebug.k/<graph>/<unit>
TOP_DEVICE_KERNELS = 200
_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")  # a call through a global of the wrapper


@dataclass
class KernelUnits:
    """Every kernel call of some graphs, each with its range label."""

    units: dict[str, dict[str, Any]] = field(default_factory=dict)  # label -> its kernel call
    generated: list[tuple[Any, str, list[str]]] = field(default_factory=list)
    externs: list[tuple[Any, dict[str, list[str]]]] = field(default_factory=list)
    estimates: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)

    def ranges(self) -> compat.KernelRanges:
        """While open, each call runs in its range (``new_run()`` before each run)."""
        return compat.KernelRanges(self.generated, self.externs)


def kernel_units(graphs: list[GraphState]) -> KernelUnits:
    """The kernel calls of ``graphs`` (their wrapper modules loaded): a generated kernel per
    call of it in one run, an extern call (``extern_kernels.<op>``,
    ``torch.ops.aten.<op>.<overload>``) per wrapper line."""
    out = KernelUnits()
    for g in graphs:
        mod = g.module()
        calls: dict[str, list[KernelEntry]] = {}
        for k in g.kernel_index:
            name, kind = k.name, str(k.kind)
            if k.extern:
                call = k.call or ""
                if _DOTTED.fullmatch(call):  # extern_kernels.mm, torch.ops.aten.<op>.default
                    calls.setdefault(call, []).append(k)
                continue
            labels = []
            for unit in _call_units(k):
                label = f"{KERNEL_PREFIX}{g.graph_id}/{unit}"
                out.units[label] = {"graph": g.graph_id, "kernel": name, "call": unit,
                                    "kind": kind}
                labels.append(label)
            out.generated.append((mod, name, labels))
            out.estimates[(g.graph_id, name)] = compat.triton_kernel_estimates(
                mod.__dict__.get(name))
        ext: dict[str, list[str]] = {}
        for call, entries in calls.items():
            for k in sorted(entries, key=lambda e: e.wrapper_line or 0):
                label = f"{KERNEL_PREFIX}{g.graph_id}/{k.name}"
                out.units[label] = {"graph": g.graph_id, "kernel": k.name, "call": k.name,
                                    "kind": "extern"}
                ext.setdefault(call, []).append(label)
        out.externs.append((mod, ext))
    return out


def measure(ku: KernelUnits, fn: Callable[[], Any], runs: int, device: torch.device,
            before_run: Callable[[], None] | None = None) -> tuple[dict[str, Any], dict[str, int]]:
    """``fn`` run ``runs`` times under the profiler with every kernel call in its range
    (``before_run``, unclocked, before each; ``device``: the one ``fn`` runs on): the
    profiler's data and each Triton call's argument bytes."""
    with ku.ranges() as ranges:
        def before() -> None:
            ranges.new_run()
            if before_run is not None:
                before_run()
        prof = compat.profiled(fn, runs, (KERNEL_PREFIX,), device, before_run=before)
        return prof, dict(ranges.bytes)


def kernel_rows(ku: KernelUnits, prof: dict[str, Any], sizes: dict[str, int],
                only_called: bool = False) -> list[dict[str, Any]]:
    """One row per kernel call, slowest first (docs/trace-format.md, ``kernels``);
    ``only_called``: leave out the calls the profile never saw."""
    device = compat.device_kind()
    shares: dict[str, int] = {}
    for unit in ku.units.values():
        shares[unit["kernel"]] = shares.get(unit["kernel"], 0) + 1
    kernels = []
    for label, unit in ku.units.items():
        r = prof["ranges"].get(label) or {}
        row = dict(unit, calls=round(r.get("count", 0), 3),
                   cpu_s=seconds(r.get("cpu_us")), device_s=seconds(r.get("device_us"))
                   if device == "cuda" else None)
        dk = prof["device_kernels"].get(unit["kernel"])
        fastest = r.get("device_min_us") if row.get("device_s") else r.get("cpu_min_us")
        if dk and (not r or (device == "cuda" and not row.get("device_s"))):
            # not called from Python (CUDA graphs), or its launches not linked to the
            # range by this profiler: the device's own record of the kernel, by its name
            n = shares[unit["kernel"]]
            row.update(calls=round(dk["count"] / n, 3), device_s=seconds(dk["device_us"] / n))
            fastest = dk.get("device_min_us", 0.0) / n
        if only_called and not row["calls"]:
            continue
        row["time_s"] = row["device_s"] if row.get("device_s") else row["cpu_s"]
        row["time_min_s"] = seconds(fastest) if fastest is not None else None
        if label in sizes:  # Triton (GPU): what the roofline needs
            est = ku.estimates.get((unit["graph"], unit["kernel"])) or {}
            row["bytes"] = est.get("bytes", sizes[label])
            row["bytes_from"] = "inductor" if "bytes" in est else "arguments"
            if "flops" in est:
                row["flops"] = est["flops"]
        kernels.append(row)
    kernels.sort(key=lambda r: -(r["time_s"] or 0))
    return kernels


def device_kernel_rows(prof: dict[str, Any]) -> list[dict[str, Any]]:
    dev = sorted(prof["device_kernels"].items(), key=lambda kv: -kv[1]["device_us"])
    return [{"name": n, "device_s": seconds(v["device_us"]), "calls": round(v["count"], 3)}
            for n, v in dev[:TOP_DEVICE_KERNELS]]


def _call_units(k: KernelEntry) -> list[str]:
    """The calls of a generated kernel in one run, in order: its provenance handles
    (``cpp_fused_gelu_0:2``) when Inductor reuses it, else its name."""
    handles = k.handles
    if len(handles) < 2:
        return [k.name]
    return sorted(handles, key=lambda h: int(h.rsplit(":", 1)[-1])
                  if h.rsplit(":", 1)[-1].isdigit() else 0)


def seconds(us: float | None) -> float | None:
    return None if us is None else round(us / 1e6, 9)


def walls(times: list[float]) -> dict[str, Any]:
    """``wall_s`` (the median), ``wall_min_s``, ``wall_p10_s``, ``wall_p90_s`` and ``wall_n``
    (how many) of some calls' seconds: the compiled and the eager graph are timed apart, and
    only their spreads tell a difference from noise (``trace/queries/graph_times.py``)."""
    if not times:
        return {"wall_s": None, "wall_min_s": None}
    s = spread(times)
    return {"wall_s": round(s.median_s, 9), "wall_min_s": round(s.min_s, 9),
            "wall_p10_s": round(s.p10_s, 9), "wall_p90_s": round(s.p90_s, 9), "wall_n": s.n}


def node_rows(ranges: dict[str, dict[str, float]], prefix: str) -> list[dict[str, Any]]:
    """Per FX node range (``prefix + node``) its row (``eager_nodes``), slowest first: on a GPU a
    node's time is its device time, as the compiled kernels' is (a view launches nothing: 0 s;
    its Python time is the call's overhead, not the line's)."""
    cuda = compat.device_kind() == "cuda"
    nodes = []
    for label, r in ranges.items():
        if not label.startswith(prefix):
            continue
        cpu, dev = seconds(r["cpu_us"]), seconds(r["device_us"]) if cuda else None
        nodes.append({"node": label[len(prefix):], "calls": round(r["count"], 3),
                      "cpu_s": cpu, "device_s": dev, "time_s": dev if cuda else cpu})
    nodes.sort(key=lambda r: -(r["time_s"] or 0))
    return nodes
