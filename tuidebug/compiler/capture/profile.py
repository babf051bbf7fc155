"""Where the time goes (``tuidebug trace --profile N``): after the eager check of a compile, its
compiled graph and its eager graph each run N more times after a warm-up, under
``torch.profiler``; every kernel call of the compiled graph and every FX node of the eager graph
is measured in its own range. A compile that runs under autograd has its backward measured too
(``profile_backward``). Written to ``profile.json`` (docs/trace-format.md); the join with
provenance (per FX node, source line, module) is ``tuidebug.trace.queries.profile``'s.

Off (the default), nothing of this runs and nothing is written.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from tuidebug.compiler import compat
from tuidebug.compiler.gradients import GradCall, grad_leaves
from tuidebug.compiler.capture import profile_backward
from tuidebug.compiler.capture.kernel_ranges import (
    device_kernel_rows, kernel_rows, kernel_units, measure, node_rows, seconds,
    walls)
from tuidebug.compiler.capture.state import Concern, GraphState

DEFAULT_RUNS = 10
WARMUP = 2
NODE_PREFIX = "tuidebug.n/"  # profiler range of one FX node of the eager graph


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
            self.write()

    def write(self) -> None:
        assert self.session.writer is not None
        self.session.writer.write_profile(self.data)

    # -- one compile ----------------------------------------------------------------------------
    def profile(self, cid: str, gm: Any, again: Callable[[], Any], inputs: list[Any],
                restore: Callable[[], None], grad: GradCall | None = None,
                piece: int = 0) -> None:
        """Profile compile ``cid``: its compiled graph (``again`` runs it once) and its eager
        graph ``gm`` on ``inputs``; with ``grad`` (the call ran under autograd), the backward
        of both too (the backward graph of piece ``piece`` of the compile). ``restore`` (the
        eager check's: ``accuracy.restorer``) puts the inputs the graph writes in place (a
        static KV cache) back as the user's call found them; it runs before every run of
        either side, compiled or eager, under grad or not (the forward before each timed
        backward included), and outside what is clocked: a copy of a whole cache inside the
        runs padded both sides' times (and pulled their ratio to 1), and under grad only the
        eager side paid it. Under the profiler it runs in a range of its own whose ops and
        device kernels are not counted as the graph's (``compat.profiled``)."""
        s = self.session
        graphs = [g for g in list(s.graphs.values()) if g.compile_id == cid
                  and g.kind != "backward" and g.module is not None and g.module() is not None]
        if not graphs:
            return
        s.progress(f"profiling compile {cid}: {self.runs} runs, compiled and eager")
        # the forward runs as the user's call did: under autograd (recording the graph its
        # backward needs, on copies of the inputs that require grad as theirs did), or not
        mode, run, eager_inputs = "no_grad", again, inputs
        if grad is not None:
            leaves = grad_leaves(inputs, grad)
            mode, eager_inputs = "grad", leaves

            def run() -> Any:
                return grad.run(leaves)
        # the device the graph runs on, from its own tensors (not the current CUDA device)
        device = compat.call_device([*inputs, *gm.parameters(), *gm.buffers()])
        with torch.set_grad_enabled(mode == "grad"):
            compiled = self._compiled(graphs, run, restore, device)
            eager = self._eager(gm, eager_inputs, restore, device)
        frame = s.frame_graph.get(cid)
        entry = {"graphs": [g.graph_id for g in graphs],
                 "eager_graph": frame.graph_id if frame is not None else graphs[0].graph_id,
                 "runs": self.runs, "warmup": WARMUP, "device": compat.device_kind(),
                 "forward_grad": mode == "grad",
                 "cudagraphs": any(g.replays_cuda_graphs(compat.device_kind() == "cuda")
                                   for g in graphs), **compiled,
                 "eager": eager.pop("totals"), **eager}
        self.data["compiles"][cid] = entry
        self.write()
        if grad is not None:
            s.progress(f"profiling compile {cid}: its backward, compiled and eager")
            backward = profile_backward.profile_backward(
                s, cid, piece, gm, grad, inputs, self.runs, WARMUP, NODE_PREFIX, restore=restore,
                device=device)
            if "kernels" in backward:
                entry["backward"] = backward
            else:
                entry["note"] = backward["note"]
            self.write()

    def _compiled(self, graphs: list[GraphState], again: Callable[[], Any],
                  restore: Callable[[], None], device: torch.device) -> dict[str, Any]:
        ku = kernel_units(graphs)
        for _ in range(WARMUP):
            restore()
            again()
        timed = compat.wall_times(again, self.runs, device, before_run=restore)
        prof, sizes = measure(ku, again, self.runs, device, before_run=restore)
        restore()
        return {"activities": prof["activities"], "device_peak": compat.device_peaks(),
                "compiled": {**walls(timed), "profiled_wall_s": seconds(prof["wall_us"]),
                             "peak_memory_bytes": compat.peak_memory(again, device)},
                "kernels": kernel_rows(ku, prof, sizes),
                "device_kernels": device_kernel_rows(prof)}

    def _eager(self, gm: Any, inputs: list[Any], restore: Callable[[], None],
               device: torch.device) -> dict[str, Any]:
        def plain() -> Any:
            return gm(*inputs)
        interp = compat.NodeRanges(gm, NODE_PREFIX)

        def by_node() -> Any:
            return interp.run(*inputs)
        for _ in range(WARMUP):
            restore()
            plain()
        timed = compat.wall_times(plain, self.runs, device, before_run=restore)
        prof = compat.profiled(by_node, self.runs, (NODE_PREFIX,), device, before_run=restore)
        restore()
        return {"totals": {**walls(timed), "profiled_wall_s": seconds(prof["wall_us"]),
                           "peak_memory_bytes": compat.peak_memory(plain, device)},
                "eager_nodes": node_rows(prof["ranges"], NODE_PREFIX)}
