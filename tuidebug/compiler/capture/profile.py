"""Where the time goes (``tuidebug trace --profile N``): after the eager check of a compile, its
compiled graph and its eager graph each run N more times after a warm-up, under
``torch.profiler``; every kernel call of the compiled graph and every FX node of the eager graph
is measured in its own range. Written to ``profile.json`` (docs/trace-format.md); the join with
provenance (per FX node, source line, module) is ``tuidebug.trace.profile``'s.

Off (the default), nothing of this runs and nothing is written.
"""

from __future__ import annotations

import statistics
from typing import Any, Callable

import torch

from tuidebug.compiler import compat
from tuidebug.compiler.capture.state import Concern, GraphState

DEFAULT_RUNS = 10
WARMUP = 2
KERNEL_PREFIX = "tuidebug.k/"  # profiler range of one kernel call: tuidebug.k/<graph>/<unit>
NODE_PREFIX = "tuidebug.n/"  # profiler range of one FX node of the eager graph
_TOP_DEVICE_KERNELS = 200
_BACKWARD_NOTE = ("a backward graph runs in the user's backward pass, not in the re-run of the "
                  "forward: it is not profiled")


class Profile(Concern):
    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.runs = int(getattr(session, "profile_runs", 0) or 0)
        self.data: dict[str, Any] = {"runs": self.runs, "warmup": WARMUP, "compiles": {}}

    @property
    def enabled(self) -> bool:
        return self.runs > 0

    def stopping(self) -> None:
        if self.enabled:
            self._write()

    def _write(self) -> None:
        assert self.session.writer is not None
        self.session.writer.write_profile(self.data)

    # -- one compile ----------------------------------------------------------------------------
    def profile(self, cid: str, gm: Any, again: Callable[[], Any], inputs: list[Any]) -> None:
        """Profile compile ``cid``: its compiled graph (``again`` runs it once) and its eager
        graph ``gm`` on ``inputs``."""
        s = self.session
        graphs = [g for g in list(s.graphs.values()) if g.compile_id == cid
                  and g.module is not None and g.module() is not None]
        if not graphs:
            return
        s.progress(f"profiling compile {cid}: {self.runs} runs, compiled and eager")
        with torch.no_grad():
            compiled = self._compiled(graphs, again)
            eager = self._eager(gm, inputs)
        frame = s.frame_graph.get(cid)
        entry = {"graphs": [g.graph_id for g in graphs],
                 "eager_graph": frame.graph_id if frame is not None else graphs[0].graph_id,
                 "runs": self.runs, "warmup": WARMUP, "device": compat.device_kind(),
                 "cudagraphs": any(g.cudagraphs.get("enabled") for g in graphs), **compiled,
                 "eager": eager.pop("totals"), **eager}
        backward = [g.graph_id for g in s.graphs.values()
                    if g.compile_id == cid and g.kind == "backward"]
        if backward:
            entry["note"] = _BACKWARD_NOTE
        self.data["compiles"][cid] = entry
        self._write()

    def _compiled(self, graphs: list[GraphState], again: Callable[[], Any]) -> dict[str, Any]:
        units: dict[str, dict[str, Any]] = {}  # profiler label -> its kernel call
        generated: list[tuple[Any, str, list[str]]] = []
        externs: list[tuple[Any, dict[str, list[str]]]] = []
        estimates: dict[tuple[str, str], dict[str, float]] = {}  # Inductor's, Triton only
        for g in graphs:
            mod = g.module()
            calls: dict[str, list[dict[str, Any]]] = {}
            for k in g.kernel_index:
                name, kind = str(k.get("name")), str(k.get("kind"))
                if kind == "extern":
                    call = str(k.get("call") or "")
                    if call.startswith("extern_kernels."):
                        calls.setdefault(call, []).append(k)
                    continue
                labels = []
                for unit in _call_units(k):
                    label = f"{KERNEL_PREFIX}{g.graph_id}/{unit}"
                    units[label] = {"graph": g.graph_id, "kernel": name, "call": unit,
                                    "kind": kind}
                    labels.append(label)
                generated.append((mod, name, labels))
                estimates[(g.graph_id, name)] = compat.triton_kernel_estimates(
                    mod.__dict__.get(name))
            ext: dict[str, list[str]] = {}
            for call, entries in calls.items():
                for k in sorted(entries, key=lambda e: e.get("wrapper_line") or 0):
                    label = f"{KERNEL_PREFIX}{g.graph_id}/{k.get('name')}"
                    units[label] = {"graph": g.graph_id, "kernel": str(k.get("name")),
                                    "call": str(k.get("name")), "kind": "extern"}
                    ext.setdefault(call, []).append(label)
            externs.append((mod, ext))
        for _ in range(WARMUP):
            again()
        walls = compat.wall_times(again, self.runs)
        with compat.KernelRanges(generated, externs) as ranges:
            prof = compat.profiled(again, self.runs, (KERNEL_PREFIX,), before_run=ranges.new_run)
            sizes = dict(ranges.bytes)
        device = compat.device_kind()
        shares: dict[str, int] = {}
        for unit in units.values():
            shares[unit["kernel"]] = shares.get(unit["kernel"], 0) + 1
        kernels = []
        for label, unit in units.items():
            r = prof["ranges"].get(label) or {}
            row = dict(unit, calls=round(r.get("count", 0), 3),
                       cpu_s=_s(r.get("cpu_us")), device_s=_s(r.get("device_us")) if device
                       == "cuda" else None)
            dk = prof["device_kernels"].get(unit["kernel"])
            fastest = r.get("device_min_us") if row.get("device_s") else r.get("cpu_min_us")
            if dk and (not r or (device == "cuda" and not row.get("device_s"))):
                # not called from Python (CUDA graphs), or its launches not linked to the
                # range by this profiler: the device's own record of the kernel, by its name
                n = shares[unit["kernel"]]
                row.update(calls=round(dk["count"] / n, 3), device_s=_s(dk["device_us"] / n))
                fastest = dk.get("device_min_us", 0.0) / n
            row["time_s"] = row["device_s"] if row.get("device_s") else row["cpu_s"]
            row["time_min_s"] = _s(fastest) if fastest is not None else None
            if label in sizes:  # Triton (GPU): what the roofline needs
                est = estimates.get((unit["graph"], unit["kernel"])) or {}
                row["bytes"] = est.get("bytes", sizes[label])
                row["bytes_from"] = "inductor" if "bytes" in est else "arguments"
                if "flops" in est:
                    row["flops"] = est["flops"]
            kernels.append(row)
        kernels.sort(key=lambda r: -(r["time_s"] or 0))
        dev = sorted(prof["device_kernels"].items(), key=lambda kv: -kv[1]["device_us"])
        return {"activities": prof["activities"], "device_peak": compat.device_peaks(),
                "compiled": {
            **_wall(walls), "profiled_wall_s": _s(prof["wall_us"]),
            "peak_memory_bytes": compat.peak_memory(again)},
            "kernels": kernels,
            "device_kernels": [{"name": n, "device_s": _s(v["device_us"]),
                                "calls": round(v["count"], 3)}
                               for n, v in dev[:_TOP_DEVICE_KERNELS]]}

    def _eager(self, gm: Any, inputs: list[Any]) -> dict[str, Any]:
        def plain() -> Any:
            return gm(*inputs)
        interp = compat.NodeRanges(gm, NODE_PREFIX)

        def by_node() -> Any:
            return interp.run(*inputs)
        for _ in range(WARMUP):
            plain()
        walls = compat.wall_times(plain, self.runs)
        prof = compat.profiled(by_node, self.runs, (NODE_PREFIX,))
        cuda = compat.device_kind() == "cuda"
        nodes = []
        for label, r in prof["ranges"].items():
            cpu, dev = _s(r["cpu_us"]), _s(r["device_us"]) if cuda else None
            # on a GPU a node's time is its device time, as the compiled kernels' is; a view
            # launches nothing (0 s) — its Python time is the call's overhead, not the line's
            nodes.append({"node": label[len(NODE_PREFIX):], "calls": round(r["count"], 3),
                          "cpu_s": cpu, "device_s": dev, "time_s": dev if cuda else cpu})
        nodes.sort(key=lambda r: -(r["time_s"] or 0))
        return {"totals": {**_wall(walls), "profiled_wall_s": _s(prof["wall_us"]),
                           "peak_memory_bytes": compat.peak_memory(plain)},
                "eager_nodes": nodes}


def _call_units(k: dict[str, Any]) -> list[str]:
    """The calls of a generated kernel in one run, in order: its provenance handles
    (``cpp_fused_gelu_0:2``) when Inductor reuses it, else its name."""
    handles = [str(h) for h in k.get("handles") or []]
    if len(handles) < 2:
        return [str(k.get("name"))]
    return sorted(handles, key=lambda h: int(h.rsplit(":", 1)[-1])
                  if h.rsplit(":", 1)[-1].isdigit() else 0)


def _s(us: float | None) -> float | None:
    return None if us is None else round(us / 1e6, 9)


def _wall(walls: list[float]) -> dict[str, Any]:
    if not walls:
        return {"wall_s": None, "wall_min_s": None}
    return {"wall_s": round(statistics.median(walls), 9), "wall_min_s": round(min(walls), 9)}
