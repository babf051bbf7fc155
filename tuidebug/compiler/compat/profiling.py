"""Running a compiled graph and its eager graph under ``torch.profiler``, with every kernel call
of the loaded wrapper module (and every FX node of the eager graph) in a named range, and
handing capture the measurements as plain data.

A generated kernel (a C++ kernel, a Triton kernel) and an extern call made through
``extern_kernels.<op>`` or ``torch.ops.<ns>.<op>.<overload>`` are each wrapped in
``torch.profiler.record_function(label)``; the
caller chooses the labels (per call of the kernel within one run). Nothing of the generated
code or the config changes; ``close()`` puts every original back.
"""

from __future__ import annotations

import collections
import contextlib
import os
import statistics
from typing import Any, Callable, Iterator

import torch

from tuidebug.compiler.compat.device import device_kind, wall_times
from tuidebug.compiler.compat.kernels import wrap_kernel


UNCLOCKED = "tuidebug.unclocked"  # the profiler range before_run runs in: none of it is the run


class _Labelled:
    """Calls of one kernel within a run, numbered: the n-th call gets ``labels[n % len]``."""

    def __init__(self, labels: list[str]) -> None:
        self.labels = labels
        self.n = 0

    def next(self) -> str:
        label = self.labels[self.n % len(self.labels)]
        self.n += 1
        return label


def _ranged(fn: Callable[..., Any], counter: _Labelled,
            sizes: dict[str, int] | None = None) -> Callable[..., Any]:
    """``fn`` in a range; with ``sizes``, the bytes of the tensors of each label's first call
    are recorded (a Triton kernel reads or writes each of its tensor arguments once)."""
    def ranged(*args: Any, **kwargs: Any) -> Any:
        label = counter.next()
        if sizes is not None and label not in sizes:
            sizes[label] = _tensor_bytes(args)
        with torch.profiler.record_function(label):
            return fn(*args, **kwargs)
    return ranged


def _tensor_bytes(args: tuple[Any, ...]) -> int:
    seen: set[int] = set()
    total = 0
    for a in args:
        if isinstance(a, torch.Tensor) and a.device.type != "cpu":
            ptr = a.data_ptr()
            if ptr not in seen:
                seen.add(ptr)
                total += a.numel() * a.element_size()
    return total


class _PathProxy:
    """Stands for a global of the wrapper module (``extern_kernels``, ``torch``): a call through
    one of the dotted paths counted (``extern_kernels.mm``, ``torch.ops.aten.<op>.default``)
    runs the real one inside a range labelled for that call; any other attribute is the real
    one."""

    def __init__(self, real: Any, path: str, counters: dict[str, _Labelled]) -> None:
        self._real = real
        self._path = path
        self._counters = counters

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._real, attr)
        path = f"{self._path}.{attr}"
        counter = self._counters.get(path)
        if counter is not None and callable(value):
            return _ranged(value, counter)
        if any(c.startswith(path + ".") for c in self._counters):
            return _PathProxy(value, path, self._counters)
        return value


class KernelRanges:
    """While open, every call of the given kernels runs in a profiler range.

    ``generated``: ``(module, kernel name, labels)``; ``externs``: ``(module, {call: labels})``
    where ``call`` is the wrapper's dotted text (``extern_kernels.addmm``,
    ``torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default``: the module's
    global named first stands in while open), labels in call order.
    ``new_run()`` restarts the numbering of calls (before each run of the compiled graph).
    ``bytes``: per label of a Triton kernel, the bytes of the tensors its first call was given.
    """

    def __init__(self, generated: list[tuple[Any, str, list[str]]],
                 externs: list[tuple[Any, dict[str, list[str]]]]) -> None:
        self._counters: list[_Labelled] = []
        self._undo: list[Callable[[], None]] = []
        self.bytes: dict[str, int] = {}  # label -> tensor bytes of a Triton kernel's call
        try:
            for module, name, labels in generated:
                counter = _Labelled(labels)
                undo = wrap_kernel(module, name, lambda fn, triton, c=counter: _ranged(
                    fn, c, self.bytes if triton else None))
                if undo is not None:
                    self._counters.append(counter)
                    self._undo.append(undo)
            for module, calls in externs:
                roots: dict[str, dict[str, _Labelled]] = {}
                for call, labels in calls.items():
                    roots.setdefault(call.split(".", 1)[0], {})[call] = _Labelled(labels)
                for root, counters in roots.items():
                    real = module.__dict__.get(root)
                    if real is None:
                        continue
                    self._counters.extend(counters.values())
                    setattr(module, root, _PathProxy(real, root, counters))
                    self._undo.append(lambda m=module, g=root, r=real: setattr(m, g, r))
        except BaseException:
            self.close()
            raise

    def new_run(self) -> None:
        for c in self._counters:
            c.n = 0

    def close(self) -> None:
        while self._undo:
            self._undo.pop()()

    def __enter__(self) -> "KernelRanges":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class NodeRanges(torch.fx.Interpreter):
    """Runs an FX graph node by node, each node in a range named ``prefix + node name``."""

    def __init__(self, gm: Any, prefix: str) -> None:
        super().__init__(gm, garbage_collect_values=True)
        self.prefix = prefix

    def run_node(self, n: Any) -> Any:
        if n.op in ("placeholder", "output"):
            return super().run_node(n)
        with torch.profiler.record_function(self.prefix + n.name):
            return super().run_node(n)


def compiled_autograd_on() -> bool:
    """Whether compiled autograd is on (``torch._dynamo.compiled_autograd`` enabled now, or
    ``torch._dynamo.config.compiled_autograd``): a backward run now would be traced and
    compiled by Dynamo, a compile of its own."""
    import sys

    ca = sys.modules.get("torch._dynamo.compiled_autograd")
    if ca is not None and getattr(ca, "compiled_autograd_enabled", False) is True:
        return True
    config = sys.modules.get("torch._dynamo.config")
    return config is not None and getattr(config, "compiled_autograd", False) is True


def _device_us(e: Any) -> float:
    val = getattr(e, "device_time_total", None)
    if val is None:
        val = getattr(e, "cuda_time_total", 0)
    return float(val or 0)


def _per_run(samples: dict[str, list[float]], runs: int) -> dict[str, float]:
    """Per run: the median call's time times the calls per run (one slow first call — a thread
    pool starting, a cache filling — does not count N times), and ``count`` (calls per run)."""
    out: dict[str, float] = {}
    for key, values in samples.items():
        calls = len(values) / max(runs, 1)
        out["count"] = calls
        out[key] = statistics.median(values) * calls if values else 0.0
        out[key.replace("_us", "_min_us")] = min(values) * calls if values else 0.0
    return out


@contextlib.contextmanager
def cupti_released(on_cuda: bool) -> Iterator[None]:
    """A profiler session on a CUDA machine that lets CUPTI go when it ends.

    Kineto leaves CUPTI attached after a session unless ``TEARDOWN_CUPTI=1``
    (pytorch/pytorch#144455): every later kernel launch of the process pays for it. Measured
    on one H100 (torch 2.11, examples/item_per_layer.py --layers 8, interleaved in one
    process): after one session eager calls took 384 -> 496 µs and compiled ones 957 -> 1085 µs,
    so the program's calls timed after capture's per-graph profiles, its whole-call timing
    included, were not the program's; with ``TEARDOWN_CUPTI=1``, 400 -> 367 and 994 -> 884.
    The variable is set for the session only (Kineto reads it when the session stops) and put
    back as it was; one the program or torch set (torch sets ``0`` for CUDA graphs on CUDA before
    12.6, where a teardown crashes a later session) is left alone."""
    if not on_cuda or "TEARDOWN_CUPTI" in os.environ:
        yield
        return
    os.environ["TEARDOWN_CUPTI"] = "1"
    try:
        yield
    finally:
        if os.environ.get("TEARDOWN_CUPTI") == "1":
            del os.environ["TEARDOWN_CUPTI"]


def profiled(fn: Callable[[], Any], runs: int, prefixes: tuple[str, ...], device: torch.device,
             before_run: Callable[[], None] | None = None,
             backward_of: str | None = None) -> dict[str, Any]:
    """Run ``fn`` ``runs`` times under ``torch.profiler``: plain data with per-run totals.

    ``ranges``: ``{label: {"cpu_us", "device_us", "count", …}}`` (per run, see ``_per_run``) for the ranges whose label starts
    with one of ``prefixes``; ``device_kernels``: ``{kernel name: {"device_us", "count"}}`` for
    every kernel that ran on the device (Triton kernels keep their names: they are the trace's;
    under CUDA graphs this is the only place they show); ``wall_us``: the median run's wall
    time under the profiler (of ``fn``); ``activities``.

    ``before_run`` runs before each run, unclocked and uncounted: in the range ``UNCLOCKED``,
    whose ops reach no range row and whose device kernels (the copy that puts back an input the
    graph writes, a forward run before its backward) are taken out of ``device_kernels``: they
    ran in the same profiler session, and were listed as the graph's.

    With ``backward_of`` (the prefix of ranges a forward ran in, node by node): ``backward``,
    per such range the time of the backward functions its ops created (``backward_other``:
    those of no range; ``backward_from``: how they were matched, or why they could not be:
    then every backward function is in ``backward_other``)."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU]
    on_cuda = device_kind() == "cuda"
    if on_cuda:
        acts.append(ProfilerActivity.CUDA)
    before = _unclocked(before_run) if before_run is not None else None
    with cupti_released(on_cuda), profile(activities=acts) as prof:
        walls = wall_times(fn, runs, device, before)
    events = list(prof.events())
    uncounted = _unclocked_kernels(events)
    ranges: dict[str, dict[str, list[float]]] = {}
    kernels: dict[str, dict[str, list[float]]] = {}
    for e in events:
        on_cpu = _on_cpu(e)
        name = str(e.name)
        if on_cpu and name.startswith(prefixes) and not _in_unclocked(e):
            r = ranges.setdefault(name, {"cpu_us": [], "device_us": []})
            r["cpu_us"].append(float(e.cpu_time_total))
            r["device_us"].append(_device_us(e))
        elif (not on_cpu and not getattr(e, "is_async", False)
              and not name.startswith(prefixes) and name != UNCLOCKED):  # a range's GPU copy
            took = float(getattr(e.time_range, "elapsed_us", lambda: 0)())
            if uncounted[(name, took)] > 0:  # launched by an op of before_run
                uncounted[(name, took)] -= 1
                continue
            k = kernels.setdefault(name, {"device_us": []})
            k["device_us"].append(took)
    out = {"ranges": {n: _per_run(r, runs) for n, r in ranges.items()},
           "device_kernels": {n: _per_run(k, runs) for n, k in kernels.items()},
           "wall_us": statistics.median(walls) * 1e6 if walls else None,
           "activities": [str(a).rsplit(".", 1)[-1].lower() for a in acts]}
    if backward_of is not None:
        out.update(_backward(events, backward_of, runs))
    return out


def _unclocked(before_run: Callable[[], None]) -> Callable[[], None]:
    def before() -> None:
        with torch.profiler.record_function(UNCLOCKED):
            before_run()
    return before


def _on_cpu(e: Any) -> bool:
    return str(getattr(e, "device_type", "")).endswith("CPU")


def _in_unclocked(e: Any) -> bool:
    """Whether CPU event ``e`` ran inside the ``UNCLOCKED`` range (``before_run``)."""
    up = e
    while up is not None:
        if str(up.name) == UNCLOCKED:
            return True
        up = getattr(up, "cpu_parent", None)
    return False


def _unclocked_kernels(events: list[Any]) -> collections.Counter[tuple[str, float]]:
    """The device kernels launched by the ops of ``before_run`` (in the ``UNCLOCKED`` range),
    as (name, elapsed µs): the profiler links each device kernel to the op that launched it
    (``FunctionEvent.kernels``, with the kernel event's own duration), so taking one of each
    such pair out of the device events takes out exactly those kernels' samples."""
    out: collections.Counter[tuple[str, float]] = collections.Counter()
    for e in events:
        if _on_cpu(e) and getattr(e, "kernels", None) and _in_unclocked(e):
            out.update((str(k.name), float(k.duration)) for k in e.kernels)
    return out


_BACKWARD_EVENT = "autograd::engine::evaluate_function: "  # the engine running one grad_fn
_EVENT_FIELDS = ("sequence_nr", "fwd_thread", "thread", "cpu_parent")


def _backward(events: list[Any], prefix: str, runs: int) -> dict[str, Any]:
    """The backward functions the autograd engine ran, by the forward range (``prefix…``) whose
    op created each: a backward function's event carries the ``sequence_nr`` (and the forward
    thread, ``fwd_thread``) of the forward op that recorded it, and that op's event sits inside
    the range. Per range, the per-run time summed over its backward functions."""
    missing = [f for f in _EVENT_FIELDS if events and not hasattr(events[0], f)]
    owner: dict[tuple[Any, int], str] = {}
    if not missing:
        for e in events:
            seq = getattr(e, "sequence_nr", -1)
            if not isinstance(seq, int) or seq < 0 or str(e.name).startswith(_BACKWARD_EVENT):
                continue
            up = e.cpu_parent
            while up is not None and not str(up.name).startswith(prefix):
                up = up.cpu_parent
            if up is not None:
                owner.setdefault((e.thread, seq), str(up.name))
    samples: dict[tuple[str, str], dict[str, list[float]]] = {}
    for e in events:
        name = str(e.name)
        if not name.startswith(_BACKWARD_EVENT):
            continue
        seq = getattr(e, "sequence_nr", -1)
        label = owner.get((getattr(e, "fwd_thread", None), seq), "") if not missing else ""
        r = samples.setdefault((label, name[len(_BACKWARD_EVENT):]),
                               {"cpu_us": [], "device_us": []})
        r["cpu_us"].append(float(e.cpu_time_total))
        r["device_us"].append(_device_us(e))
    by_range: dict[str, dict[str, float]] = {}
    for (label, _fn), r in samples.items():  # per backward function, then summed per range
        total = by_range.setdefault(label, {})
        for key, value in _per_run(r, runs).items():
            total[key] = total.get(key, 0.0) + value
    other = by_range.pop("", None)
    return {"backward": by_range, "backward_other": other,
            "backward_from": (f"not available in torch {torch.__version__}: profiler events "
                              f"without {', '.join(missing)}") if missing else "sequence_nr"}
