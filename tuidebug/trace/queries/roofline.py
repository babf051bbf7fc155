"""The roofline of a profiled GPU trace: per Triton kernel call, the bytes it moves and the FLOPs
it does (Inductor's estimate when it made one, else the bytes of the call's tensor arguments),
its achieved bandwidth and FLOP/s against the device's peak, and what limits the kernels far
below the roof. Pure data: no torch. Empty for a CPU trace (no device times, no bytes)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from tuidebug.trace.format import safefile

if TYPE_CHECKING:  # profile calls roofline_rows; only the type is needed here
    from tuidebug.trace.queries.profile import ProfileView

FAR_BELOW = 0.3  # a kernel under this fraction of its roof is flagged
LAUNCH_BOUND_S = 10e-6  # a call shorter than this is bound by its launch, not by the roof


def _positive(v: Any) -> float | None:
    return safefile.number(v, above=0)


def _peak_tflops(peak: dict[str, Any]) -> tuple[float, str] | None:
    """The lowest of the device's FLOP/s peaks (TFLOP/s) and its dtype. A kernel's dtype is not
    recorded, so it is judged against the lowest roof it could have (float32's on an H100 is 67
    TFLOP/s, bfloat16's 989): a kernel flagged far below that is far below every roof; judged
    against the highest, a float32 kernel at its roof would read as 7% of peak."""
    tflops = peak.get("tflops") if isinstance(peak.get("tflops"), dict) else {}
    vals = [(v, str(k)) for k, v in tflops.items() if _positive(v) is not None]
    return min(vals) if vals else None


def roofline_rows(view: ProfileView) -> list[dict[str, Any]]:
    """One row per Triton kernel call with bytes and a device time, slowest first: ``{key,
    kernel, graph, phase, time_s (per call), bytes, flops, gbps, tflops, bandwidth_fraction,
    flops_fraction, bound ("memory" | "compute" | "launch"), flagged, why}``."""
    peak = view.totals.get("device_peak") or {}
    peak = peak if isinstance(peak, dict) else {}
    peak_gbps = _positive(peak.get("dram_gbps"))
    lowest = _peak_tflops(peak)
    peak_tflops, peak_dtype = lowest if lowest is not None else (None, "")
    ridge = (peak_tflops * 1e12) / (peak_gbps * 1e9) if peak_gbps and peak_tflops else None
    out = []
    for r in view.kernels:
        if not r.bytes or not r.device_s:
            continue
        calls = r.calls if isinstance(r.calls, (int, float)) and r.calls > 0 else 1.0
        t = r.device_s / calls
        if not t > 0:  # a time too small to hold once shared among the calls
            continue
        gbps = r.bytes / t / 1e9
        row: dict[str, Any] = {"key": r.key, "kernel": r.kernel, "graph": r.graph,
                               "phase": r.phase, "time_s": t,
                               "bytes": r.bytes, "flops": r.flops, "gbps": round(gbps, 3),
                               "tflops": round(r.flops / t / 1e12, 4) if r.flops else None,
                               "bandwidth_fraction": round(gbps / peak_gbps, 4) if peak_gbps
                               else None}
        row["flops_fraction"] = (round(row["tflops"] / peak_tflops, 4)
                                 if row["tflops"] is not None and peak_tflops else None)
        intensity = r.flops / r.bytes if r.flops else 0.0
        compute = ridge is not None and intensity > ridge
        row["bound"] = "compute" if compute else "memory"
        fraction = row["flops_fraction"] if compute else row["bandwidth_fraction"]
        row["flagged"] = fraction is not None and fraction < FAR_BELOW
        if t < LAUNCH_BOUND_S:
            row["bound"] = "launch"
            row["why"] = (f"a call lasts {t * 1e6:.1f} µs: too short to reach the roof (launch "
                          "and tail effects); fuse it or give it more work")
        elif row["flagged"]:
            # rounded down: a kernel flagged under 30% never reads "30% of peak"
            pct = math.floor(fraction * 100)
            row["why"] = (f"{pct}% of peak FLOP/s ({row['tflops']:.1f} of "
                          f"{peak_tflops:.0f} TFLOP/s, the {peak_dtype} peak)" if compute else
                          f"{pct}% of peak bandwidth "
                          f"({gbps:.0f} of {peak_gbps:.0f} GB/s)")
        out.append(row)
    out.sort(key=lambda row: -row["time_s"])
    return out
