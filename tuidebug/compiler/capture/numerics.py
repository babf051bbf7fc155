"""Numerics: what each Inductor graph lowered is kept (its post-grad graph and each buffer's FX
node), so that a compile whose eager check fails can have its first diverging kernel found
(``compiler.localize``) while its compiled graphs are still loaded."""

from __future__ import annotations

from typing import Any, Callable

from tuidebug.compiler import compat
from tuidebug.compiler.capture.state import Concern
from tuidebug.compiler.localize import LoweredGraph, localize


class Numerics(Concern):
    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self._lowered: dict[str, tuple[Any, dict[str, str]]] = {}  # graph id -> (gm, origins)

    def install(self, p: compat.Patcher) -> None:
        p.wrap(compat.GRAPH_LOWERING_RUN, self._wrap_lowering_run)

    def _wrap_lowering_run(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        s = self.session

        def run(lowering: Any, *args: Any, **kwargs: Any) -> Any:
            out = orig(lowering, *args, **kwargs)
            gs = s.current()
            if gs is not None:  # a subgraph's lowering ends first: the graph's own ends last
                s.guarded("the lowered graph",
                          lambda: self._lowered.__setitem__(gs.graph_id,
                                                            compat.lowered_graph(lowering)))
            return out
        return run

    def graphs(self, cid: str) -> list[LoweredGraph]:
        """The Inductor graphs of compile ``cid`` that can be localized (lowered, loaded)."""
        out = []
        for g in list(self.session.graphs.values()):
            mod = g.module() if g.compile_id == cid and g.module is not None else None
            lowered = self._lowered.get(g.graph_id)
            if mod is None or lowered is None or lowered[0] is None:
                continue
            path = vars(mod).get("__file__")
            try:
                with open(str(path), encoding="utf-8") as f:
                    source = f.read()
            except OSError:
                continue
            kernels = [k.name for k in g.kernel_index if not k.extern]
            out.append(LoweredGraph(g.graph_id, g.kind, lowered[0], lowered[1], mod, source,
                                    kernels))
        return out

    def first_divergence(self, cid: str, step: Callable[[], Any], reset_rng: Callable[[], None],
                         tol: float | None) -> dict[str, Any]:
        """Compile ``cid``'s kernels judged one by one on a run of ``step``."""
        graphs = self.graphs(cid)
        if not graphs:
            return {"skipped": "no compiled graph of this compile is loaded with its lowering"}
        return localize(graphs, step, tol, reset_rng,
                        same_random=bool(compat.inductor_config_value("fallback_random")))
