"""The device a compiled graph runs on, measured: which it is (``call_device``: from the call's
own tensors), synchronizing with it, a call's clock marks (CallClock: CUDA events made once),
wall times and peak memory of calls, its free memory, and the device's peak bandwidth and
FLOP/s (Inductor's datasheet table, Triton's estimate).

Every measure of a call takes the device the call runs on (``call_device``), never the
current CUDA device: a rank of a multi-GPU job that never calls ``torch.cuda.set_device`` but
puts its model and inputs on ``cuda:LOCAL_RANK`` has ``cuda:0`` current; synchronizing and
recording events there timed GPU 0, not the kernels of the call. The current device is not
switched around the call either: the user's code runs as it did."""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Sequence, Union

import torch


def device_kind() -> str:
    """``cuda`` when a CUDA device is in use in this process, else ``cpu``."""
    return "cuda" if torch.cuda.is_available() and torch.cuda.is_initialized() else "cpu"


def call_devices(tensors: Iterable[Any]) -> list[torch.device]:
    """The devices off the CPU of a call's own ``tensors`` (what is not a tensor is passed
    over), each once: CUDA devices first, in the order met (a model spread over several GPUs:
    ``device_map="auto"``), then any other (``meta``: no clock, no memory of its own)."""
    seen: dict[torch.device, None] = {}
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.device.type != "cpu":
            seen.setdefault(t.device, None)
    return sorted(seen, key=lambda d: d.type != "cuda")  # stable: the order met within each


def call_device(tensors: Iterable[Any]) -> torch.device:
    """The device a call runs on, from its own ``tensors`` (its arguments, parameters, buffers):
    the first CUDA device among them, else the first other device off the CPU (``meta``: a
    meta tensor met before a CUDA one does not make a CUDA call timed on the host's clock);
    where none is, the current CUDA device when CUDA is in use in this process (the call may
    reach device tensors through what it names), else the CPU."""
    found = call_devices(tensors)
    if found:
        return found[0]
    if device_kind() == "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


# one device, or every device a call runs on (``call_devices``: a model over several GPUs)
Devices = Union[torch.device, Sequence[torch.device]]


def synchronize(device: Devices) -> None:
    """Wait for the work queued on ``device`` (a CUDA device; nothing to wait for elsewhere),
    or on each of several devices (a call over several GPUs)."""
    for d in ([device] if isinstance(device, torch.device) else device):
        if d.type == "cuda":
            torch.cuda.synchronize(d)


class CallClock:
    """Marks of one call's timeline, taken without waiting, from a pool made once: on a GPU
    CUDA events (made up front: an event made per mark costs host time inside the call it
    clocks, which made the clocked calls slower than the unclocked ones they split), recorded on
    ``device``'s current stream (the device the call runs on: ``call_device``) and read on its
    own timeline; on any other device the host's clock.

    ``reset`` before a call, ``mark`` at each point (its index), ``synchronize``, then
    ``seconds``: each mark's time after the first. The marks of one call partition its time."""

    def __init__(self, device: torch.device, size: int = 64) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self._events = [torch.cuda.Event(enable_timing=True) for _ in range(size)] \
            if self.cuda else []
        self._host: list[float] = []
        self.n = 0

    def reset(self) -> None:
        self.n = 0
        self._host.clear()

    def mark(self) -> int:
        i = self.n
        if self.cuda:
            if i == len(self._events):  # more marks than the pool: grown once, kept
                self._events.append(torch.cuda.Event(enable_timing=True))
            self._events[i].record(torch.cuda.current_stream(self.device))
        else:
            self._host.append(time.perf_counter())
        self.n = i + 1
        return i

    def seconds(self) -> list[float]:
        """Each mark's seconds after mark 0 (on a GPU: once the device reached them all)."""
        if not self.n:
            return []
        if self.cuda:
            e0 = self._events[0]
            return [0.0] + [float(e0.elapsed_time(self._events[k])) / 1000.0
                            for k in range(1, self.n)]
        t0 = self._host[0]
        return [t - t0 for t in self._host[:self.n]]


def wall_times(fn: Callable[[], Any], runs: int, device: Devices,
               before_run: Callable[[], None] | None = None) -> list[float]:
    """Seconds of each of ``runs`` calls of ``fn``, ``device`` (each of them, where several)
    synchronized around each (``before_run``, unclocked, before each)."""
    out = []
    for _ in range(runs):
        if before_run is not None:
            before_run()
        synchronize(device)
        t0 = time.perf_counter()
        fn()
        synchronize(device)
        out.append(time.perf_counter() - t0)
    return out


def peak_memory(fn: Callable[[], Any], device: torch.device) -> int | None:
    """Peak bytes of ``device``'s memory allocated during one call of ``fn``, above what was
    allocated when it began (None off CUDA, or where it cannot be told). The device's peak
    statistics are not reset: the user's program reads them (a script printing
    ``torch.cuda.max_memory_allocated()`` at its end prints what it prints untraced). The
    call's peak is read where it raised the process's peak so far; where it stayed under it,
    it is not known (None)."""
    if device.type != "cuda":
        return None
    synchronize(device)
    before = torch.cuda.max_memory_allocated(device)
    base = torch.cuda.memory_allocated(device)
    fn()
    synchronize(device)
    after = torch.cuda.max_memory_allocated(device)
    if after <= before:  # under the process's peak so far: the call's own is not known
        return None
    return int(after - base)


def triton_kernel_estimates(kernel: Any) -> dict[str, float]:
    """What Inductor estimated for a Triton kernel (``kernel_num_gb``, ``kernel_flop`` in its
    inductor_meta: only when compiled with ``benchmark_kernel`` or ``profile_bandwidth``)."""
    meta = getattr(kernel, "inductor_meta", None) or {}
    out: dict[str, float] = {}
    if isinstance(meta.get("kernel_num_gb"), (int, float)):
        out["bytes"] = float(meta["kernel_num_gb"]) * 1e9
    if isinstance(meta.get("kernel_flop"), (int, float)):
        out["flops"] = float(meta["kernel_flop"])
    return out


def device_peaks() -> dict[str, Any] | None:
    """The device's peak DRAM bandwidth (GB/s) and dense FLOP/s per dtype (Inductor's datasheet
    table where it knows the device, else Triton's estimate); None on the CPU or when unknown.
    ``source`` says where the numbers came from; a figure that cannot be right (Triton's
    estimate under 1 TFLOP/s: its clock-rate unit changed between releases) is left out."""
    if device_kind() != "cuda":
        return None
    out: dict[str, Any] = {"name": torch.cuda.get_device_name()}
    info = _datasheet(out["name"])
    dtypes = (torch.float32, torch.bfloat16, torch.float16)
    if info is not None:
        out["dram_gbps"] = float(info.dram_bw_gbs)
        factor = getattr(info, "tops_sparsity_factor", None)
        if factor is None:  # older tables: Hopper's and later datasheets quote 2:4 sparsity
            factor = 2 if torch.cuda.get_device_capability() >= (9, 0) else 1
        out["tflops"] = {str(dt).replace("torch.", ""): float(info.tops[dt]) / (
            factor if dt is not torch.float32 else 1) for dt in dtypes if dt in info.tops}
        out["source"] = "Inductor's datasheet table (dense)"
        return out
    out["source"] = "Triton's estimate"
    try:
        from torch._inductor.utils import get_gpu_dram_gbps

        out["dram_gbps"] = float(get_gpu_dram_gbps())
    except Exception:
        pass
    try:
        from torch._inductor.utils import get_device_tflops

        tflops = {str(dt).replace("torch.", ""): float(get_device_tflops(dt)) for dt in dtypes}
        out["tflops"] = {k: v for k, v in tflops.items() if v >= 1.0}
    except Exception:
        pass
    return out


def _datasheet(name: str) -> Any:
    """Inductor's datasheet entry for a device name (``NVIDIA H100 80GB HBM3`` is listed as
    ``NVIDIA H100``: the longest listed prefix of its words), or None."""
    try:
        from torch._inductor.analysis.device_info import lookup_device_info
    except Exception:
        return None
    words = name.split()
    for n in range(len(words), 0, -1):
        try:
            info = lookup_device_info(" ".join(words[:n]))
        except Exception:
            info = None
        if info is not None and getattr(info, "tops", None) and getattr(info, "dram_bw_gbs", 0):
            return info
    return None


def free_device_bytes(device: torch.device) -> int | None:
    """The bytes free on CUDA device ``device`` (``torch.cuda.mem_get_info``); None off CUDA,
    or where this torch cannot tell."""
    if device.type != "cuda":
        return None
    try:
        free, _total = torch.cuda.mem_get_info(device)
    except (AttributeError, RuntimeError):
        return None
    return int(free)
