"""The backward half of ``--profile``: a compile whose first call ran under autograd has its
backward measured too, compiled and eager.

Each run calls the graph forward with grad enabled (unclocked) on copies of its inputs that
require grad as the user's did, then ``torch.autograd.grad`` of the outputs that require grad
(with fixed, seeded output gradients) with respect to those copies and the graph's own
parameters that require grad. Before each forward the inputs the graph writes in place (a
step counter, a cache it indexes, BatchNorm's running statistics) are put back as the user's
call found them (``restore``, the forward profile's): run again and again from what the last
run left, a graph that advances an index into a cache ran past its end (the backward was not
profiled: index out of bounds) and one that updates statistics timed other values. ``autograd.grad`` returns the gradients; it never accumulates
into a ``.grad``: the user's training is untouched. Only the backward is clocked.

Compiled: the backward graph's kernel calls each in their range (as the forward's). AOTAutograd
compiles a backward graph lazily, on its first backward: the warm-up here compiles it then, at
the first call of the forward (``compiled_by_profile``). Eager: the Dynamo graph node by node,
each backward function the autograd engine runs attributed to the FX node whose op created it
(the profiler's ``sequence_nr``, ``compat.profiled(backward_of=…)``).

A failure here never breaks the capture or the user's program: it becomes the compile's note.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from tuidebug.compiler import compat
from tuidebug.compiler.gradients import GradCall, grad_leaves, seeded, tensors
from tuidebug.compiler.capture.kernel_ranges import (
    device_kernel_rows, kernel_rows, kernel_units, measure, node_rows, seconds, walls)

NOT_PROFILED = "the backward graph was not profiled: "


def profile_backward(s: Any, cid: str, piece: int, gm: Any, grad: GradCall, inputs: list[Any],
                     runs: int, warmup: int, node_prefix: str, *,
                     restore: Callable[[], None], device: torch.device) -> dict[str, Any]:
    """The ``backward`` section of compile ``cid``'s profile, or ``{"note": why not}``;
    ``restore`` puts the inputs the graph writes back before each forward, and at the end;
    ``device``: the one the graph runs on (``compat.call_device``)."""
    if compat.compiled_autograd_on():
        return {"note": f"{NOT_PROFILED}compiled autograd is on: a backward run by the profile "
                        "would be compiled by Dynamo as a graph of its own"}
    try:
        with torch.enable_grad():
            return _profile(s, cid, piece, gm, grad, inputs, runs, warmup, node_prefix, restore,
                            device)
    except Exception as e:  # measuring is a bonus: the user's call goes on
        return {"note": f"{NOT_PROFILED}it failed: {_why(e)}"}
    finally:
        restore()


class _Step:
    """One forward (kept) and its backward, on leaves that require grad; ``restore`` before
    each forward (unclocked: the forward is the backward's ``before_run``)."""

    def __init__(self, forward: Callable[[], Any], wrt: list[torch.Tensor],
                 restore: Callable[[], None]) -> None:
        self.forward_fn = forward
        self.wrt = wrt
        self.restore = restore
        self.outs: list[torch.Tensor] = []
        self.grads: list[torch.Tensor] | None = None

    def forward(self) -> None:
        self.restore()
        self.outs = [o for o in tensors(self.forward_fn()) if o.requires_grad]
        if self.grads is None:
            self.grads = seeded(self.outs)

    def backward(self) -> Any:
        outs, self.outs = self.outs, []
        return torch.autograd.grad(outs, self.wrt, grad_outputs=self.grads, allow_unused=True)

    def both(self) -> Any:
        self.forward()
        return self.backward()


def _profile(s: Any, cid: str, piece: int, gm: Any, grad: GradCall, inputs: list[Any],
             runs: int, warmup: int, node_prefix: str,
             restore: Callable[[], None], device: torch.device) -> dict[str, Any]:
    leaves = grad_leaves(inputs, grad)
    params = list(dict.fromkeys(p for p in gm.parameters() if p.requires_grad))
    wrt = [x for x, flag in zip(leaves, grad.requires_grad) if flag] + params
    compiled = _Step(lambda: grad.run(leaves), wrt, restore)
    compiled.forward()
    if not compiled.outs:
        return {"note": f"{NOT_PROFILED}no output of the compiled graph requires grad"}
    before = {g.graph_id for g in _backward_graphs(s, cid, piece)}
    compiled.backward()  # AOTAutograd compiles the backward graph now, if it has not yet
    for _ in range(warmup):
        compiled.both()
    graphs = _backward_graphs(s, cid, piece)
    if not graphs:
        return {"note": f"{NOT_PROFILED}no compiled backward graph of compile {cid} ran"}
    ku = kernel_units(graphs)
    timed = compat.wall_times(compiled.backward, runs, device, before_run=compiled.forward)
    prof, sizes = measure(ku, compiled.backward, runs, device, before_run=compiled.forward)
    compiled.forward()
    peak = compat.peak_memory(compiled.backward, device)
    out: dict[str, Any] = {
        "graphs": [g.graph_id for g in graphs],
        "compiled_by_profile": any(g.graph_id not in before for g in graphs),
        "compiled": {**walls(timed), "profiled_wall_s": seconds(prof["wall_us"]),
                     "peak_memory_bytes": peak},
        "kernels": kernel_rows(ku, prof, sizes, only_called=True),
        "device_kernels": device_kernel_rows(prof)}
    try:
        out.update(_eager(gm, leaves, wrt, compiled.grads, runs, warmup, node_prefix, restore,
                          device))
    except Exception as e:  # the compiled backward's measurements stand
        out["note"] = f"the eager backward was not profiled: it failed: {_why(e)}"
    return out


def _why(e: Exception) -> str:
    msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
    return f"{type(e).__name__}: {msg}"


def _eager(gm: Any, leaves: list[Any], wrt: list[torch.Tensor], grads: Any, runs: int,
           warmup: int, node_prefix: str, restore: Callable[[], None],
           device: torch.device) -> dict[str, Any]:
    """The eager graph's backward: its wall time per call, and per FX node the time of the
    backward functions that node's ops created."""
    plain = _Step(lambda: gm(*leaves), wrt, restore)
    plain.grads = grads
    for _ in range(warmup):
        plain.both()
    timed = compat.wall_times(plain.backward, runs, device, before_run=plain.forward)
    interp = compat.NodeRanges(gm, node_prefix)
    by_node = _Step(lambda: interp.run(*leaves), wrt, restore)
    by_node.grads = grads
    prof = compat.profiled(by_node.backward, runs, (node_prefix,), device,
                           before_run=by_node.forward,
                           backward_of=node_prefix)
    plain.forward()
    out: dict[str, Any] = {
        "eager": {**walls(timed), "profiled_wall_s": seconds(prof["wall_us"]),
                  "peak_memory_bytes": compat.peak_memory(plain.backward, device)},
        "eager_nodes": node_rows(prof.get("backward") or {}, node_prefix),
        "eager_nodes_from": prof.get("backward_from")}
    other = prof.get("backward_other")
    if other:
        out["eager_other"] = {"calls": round(other["count"], 3), "cpu_s": seconds(
            other["cpu_us"]), "device_s": seconds(other["device_us"])}
    return out


def _backward_graphs(s: Any, cid: str, piece: int) -> list[Any]:
    return [g for g in list(s.graphs.values()) if g.compile_id == cid and g.kind == "backward"
            and g.piece == piece and g.module is not None and g.module() is not None]
