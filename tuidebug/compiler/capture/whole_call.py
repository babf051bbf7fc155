"""The user's whole call, compiled against eager (``--profile``): what a user calling the
``torch.compile`` result pays — Dynamo's frame evaluation and guards, AOTAutograd's wrappers,
each compiled graph, the eager code a graph break leaves between graphs, CUDA graphs — against
the original module or function, on the inputs of its first call.

``torch.compile`` is wrapped while the capture runs: the result (an ``OptimizedModule`` gets a
forward hook; a compiled function is returned wrapped) is measured once, right after its first
call returns (its graphs compiled, checked and profiled by then). Eager and compiled calls
alternate in rounds (``fair_timing``); a call that ran under autograd with tensors that require
grad is measured as a training step: the forward, then ``autograd.grad`` of its outputs (seeded
output gradients) with respect to the parameters and inputs that require grad (``.grad`` is
never touched). The ledger: compiled calls with each compiled graph's start and end clocked
(``session.call_clock``) split the call into Dynamo before the first graph, each graph, each
eager island between two graphs (its break is the earlier graph's compile's), the backward,
and the remainder of the measured wall time (``other``). On the CPU the clocked calls are the
timed ones (a clock read per graph call, a µs or so); on a GPU the marks are CUDA events on
the device's own timeline (nothing waits for the device inside the call, so a clocked call runs
as an unclocked one and its parts partition its time), read from 15 further calls.

Written to ``profile.json``'s ``calls`` (docs/trace-format.md); the verdict and the ledger as
answers are ``tuidebug.trace.queries.whole_call``'s. The user's tensors, the random state and
the module's buffers are as they were after the call.
"""

from __future__ import annotations

import functools
import statistics
from typing import Any, Callable

import torch

from tuidebug.compiler import accuracy, compat, fair_timing
from tuidebug.compiler.capture import profile
from tuidebug.compiler.gradients import seeded, tensors
from tuidebug.compiler.capture.state import Concern
from tuidebug.trace.queries.verdict import ratio_interval, spread

LEDGER_CALLS = 15


class WholeCall(Concern):
    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.busy = False
        self.seen: set[int] = set()
        self.machine: fair_timing.Machine | None = None
        self._threads: Any = None

    @property
    def prof(self) -> profile.Profile:
        return self.session.concern(profile.Profile)

    def install(self, p: compat.Patcher) -> None:
        if not self.prof.enabled:
            return
        # Inductor's C++ kernels keep the thread count of their compile (``#pragma omp parallel
        # num_threads(N)``): the threads are chosen before anything compiles
        self.machine = fair_timing.free_threads()
        self._threads = fair_timing.threads(self.machine.threads)
        self._threads.__enter__()
        self.prof.data["machine"] = self.machine.as_json()
        p.wrap(compat.TORCH_COMPILE, self._wrap_compile)

    def uninstall(self) -> None:
        if self._threads is not None:
            self._threads.__exit__(None, None, None)
            self._threads = None

    def _wrap_compile(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        def compile(*args: Any, **kwargs: Any) -> Any:
            if not args and "model" not in kwargs:  # @torch.compile(mode=…): a decorator
                return lambda model: compile(model, **kwargs)
            result = orig(*args, **kwargs)
            model = args[0] if args else kwargs["model"]
            watched = self.session.guarded("the whole call", lambda: self._watch(model, result))
            return result if watched is None else watched
        return functools.wraps(orig)(compile)

    def _watch(self, model: Any, result: Any) -> Any:
        if result is model or not callable(result):
            return result
        name = type(model).__name__ if isinstance(model, torch.nn.Module) else getattr(
            model, "__qualname__", str(model))
        if isinstance(result, torch.nn.Module):
            def hook(mod: Any, args: Any, kwargs: Any, out: Any) -> None:
                self._first_call(name, result, model, args, kwargs)
            result.register_forward_hook(hook, with_kwargs=True)
            return result

        @functools.wraps(result)
        def call(*args: Any, **kwargs: Any) -> Any:
            out = result(*args, **kwargs)
            self._first_call(name, result, model, args, kwargs)
            return out
        return call

    # -- the first call returned: measure it ---------------------------------------------------
    def _first_call(self, name: str, compiled: Any, eager: Any, args: Any, kwargs: Any) -> None:
        if self.busy or id(compiled) in self.seen or not self.session.graphs:
            return
        self.seen.add(id(compiled))
        self.busy = True
        rng = accuracy._rng_state()
        buffers = _buffers(eager)
        try:
            self.session.progress(f"timing the whole call of {name}: compiled and eager, "
                                  "interleaved")
            entry = self.session.guarded("the whole call", lambda: self._measure(
                name, compiled, eager, args, kwargs))
            if entry:
                self.prof.data.setdefault("calls", []).append(entry)
                self.session.guarded("the profile", self.prof.write)
        finally:
            _restore(buffers)
            accuracy._set_rng_state(rng)
            self.busy = False

    def _measure(self, name: str, compiled: Any, eager: Any, args: Any,
                 kwargs: Any) -> dict[str, Any]:
        grad_on = torch.is_grad_enabled()
        leaves = [_leaf(a) for a in args]
        kw = {k: _leaf(v) for k, v in (kwargs or {}).items()}
        wrt = [x for x in [*leaves, *kw.values()] if isinstance(x, torch.Tensor)
               and x.requires_grad]
        if isinstance(eager, torch.nn.Module):
            wrt += [p for p in eager.parameters() if p.requires_grad]
        c_step = _Step(lambda: compiled(*leaves, **kw), wrt, grad_on)
        e_step = _Step(lambda: eager(*leaves, **kw), wrt, grad_on)
        training = c_step.training()
        e_step.grads = c_step.grads
        machine = fair_timing.free_threads() if self.machine is None else self.machine
        load_before = fair_timing.load1()
        # on the CPU the timed compiled calls are the clocked ones (a clock read per graph: the
        # parts come from the very calls whose wall time is measured); on a GPU clocking a
        # graph synchronizes the device, so the clocked calls are further ones
        clocked: list[list[tuple[str, str, str, float]]] = []
        cpu = compat.device_kind() == "cpu"
        cg = self._cudagraph_ids()
        run_c = (lambda: clocked.append(self._clocked_call(c_step, cg))) if cpu else c_step.run
        rounds = max(self.prof.runs, fair_timing.MIN_ROUNDS)
        if _ranks() > 1:  # every rank must make the same calls (their collectives pair up):
            tc, te = fair_timing.interleaved(  # a fixed number of rounds, not adaptive
                run_c, e_step.run, min_rounds=rounds, max_rounds=rounds, cap_s=float("inf"))
        else:
            tc, te = fair_timing.interleaved(run_c, e_step.run, min_rounds=rounds)
        load_after = fair_timing.load1()
        r = ratio_interval(te, tc)
        comp = spread(tc)
        entry: dict[str, Any] = {
            "callable": name, "training": training, "rounds": len(tc),
            "device": compat.device_kind(), "threads": torch.get_num_threads(),
            "machine": {**machine.as_json(), "load1_during": [round(load_before, 2),
                                                              round(load_after, 2)],
                        "oversubscribed": machine.oversubscribed or max(
                            load_before, load_after) - 1.0 > machine.cores},
            "compiled": comp.as_json(), "eager": spread(te).as_json(),
            "ratio": r.value, "ratio_low": r.low, "ratio_high": r.high,
            "times": {"compiled_s": [round(t, 9) for t in tc],
                      "eager_s": [round(t, 9) for t in te]}}
        clocked = clocked[fair_timing.WARMUP:] if cpu else [
            self._clocked_call(c_step, cg) for _ in range(LEDGER_CALLS)]
        entry["ledger"] = self._ledger(clocked, comp.median_s)
        return entry

    def _clocked_call(self, step: "_Step",
                      cudagraphs: set[str]) -> list[tuple[str, str, str, float]]:
        """One call of ``step`` with each compiled graph's start and end clocked: its parts."""
        s = self.session
        clock: list[tuple[str, str, Any, Any]] = []
        s.call_clock = clock
        try:
            compat.synchronize()
            t0 = compat.clock_mark()
            fwd_end, t1 = step.run_split()
            compat.synchronize()  # every mark reached (on a GPU: events read after this)
        finally:
            s.call_clock = None

        def sec(mark: Any) -> float:
            return compat.clock_seconds(t0, mark)
        return _parts([(g, c, sec(a), sec(b)) for g, c, a, b in clock], 0.0, sec(fwd_end),
                      sec(t1), cudagraphs, step.training())

    def _ledger(self, runs: list[list[tuple[str, str, str, float]]],
                wall: float) -> list[dict[str, Any]]:
        """The call's parts: per part, its mean over the clocked calls of the usual shape whose
        wall time is in the middle fifth (p40–p60; a call's parts add up to its wall time, so
        these parts add up to a median call's, where medians per part, on a busy machine's
        skewed times, would not); ``other`` is the measured wall time less the others."""
        runs = [r for r in runs if r]
        if not runs:
            return []
        shapes = [tuple((p, g, c) for p, g, c, _ in r) for r in runs]
        shape = max(set(shapes), key=shapes.count)  # the calls took one path: the usual one
        same = sorted((r for r, sh in zip(runs, shapes) if sh == shape),
                      key=lambda r: sum(x[3] for x in r))
        lo, hi = int(len(same) * 0.4), max(int(len(same) * 0.6), int(len(same) * 0.4) + 1)
        middle = same[lo:hi]
        out = []
        for i, (part, graph, cid) in enumerate(shape):
            secs = statistics.fmean(r[i][3] for r in middle)
            row: dict[str, Any] = {"part": part, "seconds": round(secs, 9)}
            if graph:
                row["graph"] = graph
            if cid:
                row["compile_id"] = cid
            if part == "graph" and graph != BACKWARD:
                row["reason"] = self._skipped(graph)
            if part == "graph" and graph == BACKWARD:
                row.update(graph=",".join(self._backward_ids()) or None, phase="bwd")
            out.append({k: v for k, v in row.items() if v is not None})
        out.append({"part": "other", "seconds": round(wall - sum(p["seconds"] for p in out), 9)})
        return out

    def _cudagraph_ids(self) -> set[str]:
        """The graphs replayed as CUDA graphs (on, and not skipped by Inductor)."""
        return {g.graph_id for g in list(self.session.graphs.values())
                if g.cudagraphs.get("enabled") and not g.cudagraphs.get("skipped")}

    def _skipped(self, graph: str) -> str | None:
        """Why Inductor did not capture graph ``graph`` as a CUDA graph, when it was on."""
        for g in list(self.session.graphs.values()):
            if g.graph_id == graph and g.cudagraphs.get("enabled") and g.cudagraphs.get("skipped"):
                return f"CUDA graphs skipped: {str(g.cudagraphs['skipped'][0])[:200]}"
        return None

    def _backward_ids(self) -> list[str]:
        return [g.graph_id for g in list(self.session.graphs.values()) if g.kind == "backward"]


BACKWARD = "(backward)"


def _parts(clock: list[tuple[str, str, float, float]], t0: float, fwd_end: float, t1: float,
           cudagraphs: set[str], training: bool) -> list[tuple[str, str, str, float]]:
    """One clocked call as its parts, in order."""
    if not clock:
        return []
    out: list[tuple[str, str, str, float]] = [("dynamo", "", "", clock[0][2] - t0)]
    for i, (gid, cid, g0, g1) in enumerate(clock):
        out.append(("cudagraph" if gid in cudagraphs else "graph", gid, cid, g1 - g0))
        if i + 1 < len(clock):
            out.append(("eager_island", "", cid, clock[i + 1][2] - g1))
    # from the last graph's end to the forward's: Dynamo's frame returning, the module's and
    # AOTAutograd's wrappers handing back the outputs
    out.append(("dynamo", "", "", fwd_end - clock[-1][3]))
    if training:
        out.append(("graph", BACKWARD, "", t1 - fwd_end))
    return out


class _Step:
    """One call as the user's ran: under the grad mode it had; a training call (outputs that
    require grad) also runs ``autograd.grad`` of them with respect to ``wrt``."""

    def __init__(self, forward: Callable[[], Any], wrt: list[torch.Tensor], grad_on: bool):
        self.forward = forward
        self.wrt = wrt
        self.grad_on = grad_on
        self.grads: list[torch.Tensor] | None = None
        self._training: bool | None = None

    def training(self) -> bool:
        if self._training is None:
            with torch.set_grad_enabled(self.grad_on):
                outs = [o for o in tensors(self.forward()) if o.requires_grad]
            self._training = bool(outs and self.wrt and self.grad_on)
            if self._training:
                self.grads = seeded(outs)
        return self._training

    def run(self) -> Any:
        with torch.set_grad_enabled(self.grad_on):
            out = self.forward()
            if self.training():
                outs = [o for o in tensors(out) if o.requires_grad]
                return torch.autograd.grad(outs, self.wrt, grad_outputs=self.grads,
                                           allow_unused=True)
            return out

    def run_split(self) -> tuple[Any, Any]:
        """One run, as ``run``, with clock marks (``compat.clock_mark``: nothing waits for the
        device) where the forward ended and where the call ended."""
        with torch.set_grad_enabled(self.grad_on):
            out = self.forward()
            fwd_end = compat.clock_mark()
            if self.training():
                outs = [o for o in tensors(out) if o.requires_grad]
                torch.autograd.grad(outs, self.wrt, grad_outputs=self.grads, allow_unused=True)
            return fwd_end, compat.clock_mark()


def _ranks() -> int:
    """The world size of an initialized process group (1 without one)."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return int(dist.get_world_size())
    return 1


def _leaf(x: Any) -> Any:
    """A copy of a tensor argument (requiring grad as it did), anything else as it is."""
    if isinstance(x, torch.Tensor):
        return x.detach().clone().requires_grad_(x.requires_grad)
    return x


def _buffers(model: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    if not isinstance(model, torch.nn.Module):
        return []
    return [(b, b.detach().clone()) for b in model.buffers()]


def _restore(buffers: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    with torch.no_grad():
        for b, saved in buffers:
            b.copy_(saved)
