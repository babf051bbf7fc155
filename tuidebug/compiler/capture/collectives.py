"""Collectives and DDP buckets: the collectives each graph issues, in program order, with their
process groups, sizes, FX node, kernel and user line (``collectives.json``); which DDPOptimizer
bucket each graph is (``meta.json`` ``ddp_bucket``)."""

from __future__ import annotations

import os
from typing import Any, Callable

import torch

from tuidebug.compiler import compat, snapshot
from tuidebug.compiler.capture.state import Concern, GraphState
from tuidebug.trace.format import layout, schema

# a frame in torch's own files is not the user's line
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
# tuidebug's own frames (a rank's collective wrappers, capture/rank_progress.py) are no user's
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


def _metas(values: Any) -> list[dict[str, Any] | None]:
    if isinstance(values, (list, tuple)):
        return [snapshot.tensor_meta(v) for v in values]
    return [snapshot.tensor_meta(values)]


def _bytes(metas: list[dict[str, Any] | None]) -> int | None:
    total = 0
    for m in metas:
        if not m or any(not isinstance(d, int) for d in m.get("shape") or []):
            return None
        n = 1
        for d in m["shape"]:
            n *= d
        dtype = getattr(torch, str(m.get("dtype")), None)
        if not isinstance(dtype, torch.dtype):
            return None
        total += n * dtype.itemsize
    return total


def user_frame(stack: str | None, cache: dict[str, Any]) -> dict[str, Any] | None:
    """The innermost frame of ``stack`` outside torch's own files (the line that called into
    ``torch.distributed``), None when every frame is torch's."""
    frames = [f for f in layout.stack_frames(stack, cache)
              if not os.path.abspath(f["file"]).startswith((_TORCH_DIR, _OWN_DIR))]
    return frames[-1] if frames else None


def _line(source: Any) -> str | None:
    """``file.py:LINE`` of a ``user_source``, as the progress log names lines."""
    if not isinstance(source, dict) or not source.get("file"):
        return None
    return f"{os.path.basename(str(source['file']))}:{source.get('line')}"


def _issuing(order: list[str], by_node: dict[str, dict[str, Any]]) -> list[str]:
    """The collectives of ``order`` without the waits (a wait moved is no reordering)."""
    return [n for n in order if "waits_for" not in by_node[n]]


class Collectives(Concern):
    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self._fx: dict[str, list[dict[str, Any]]] = {}  # graph id -> collectives in FX order
        self._groups: dict[str, dict[str, Any] | None] = {}
        self._ddp: dict[str, dict[str, Any]] = {}  # compile id -> DDPOptimizer's buckets
        # graph id -> {wrapper line: (index, user line)} of the collectives its wrapper issues
        self._issued: dict[str, dict[int, tuple[int, str | None]]] = {}
        self._files: dict[str, str] = {}  # a loaded wrapper module's file -> its graph id
        self._communicating: set[str] = set()  # the graphs that issue a collective

    def install(self, p: compat.Patcher) -> None:
        p.wrap(compat.POST_GRAD_PASSES, self._wrap_post_grad)
        p.wrap(compat.DDP_COMPILE_FN, self._wrap_ddp_compile)

    # -- collectives ------------------------------------------------------------------------------
    def _wrap_post_grad(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        s = self.session

        def post_grad(*args: Any, **kwargs: Any) -> Any:
            with s.reentrant("collectives_post_grad") as outer:
                result = orig(*args, **kwargs)
                gs = s.current() if outer else None
                if gs is not None:
                    gm = compat.stage_fn_result(result, compat.stage_fn_graph(args, kwargs))
                    s.guarded("the collectives", lambda: self._record(gs, gm))
                return result
        return post_grad

    def _group(self, name: str | None) -> dict[str, Any] | None:
        if name is None:
            return None
        if name not in self._groups:
            self._groups[name] = compat.process_group_info(name)
        return self._groups[name]

    def _record(self, gs: GraphState, gm: Any) -> None:
        graph = getattr(gm, "graph", gm)
        cache = self.session.stack_cache
        out = []
        for c in compat.collective_nodes(graph):
            n = c.pop("fx")
            inputs = c.pop("inputs")
            stack = n.meta.get("stack_trace")
            ins = [m for i in inputs for m in _metas(i.meta.get("val"))]
            outs = _metas(n.meta.get("val"))
            group = self._group(c["group"])
            c.update(inputs=ins, outputs=outs, bytes=_bytes(ins),
                     group_ranks=(group or {}).get("ranks"),
                     source=layout.parse_stack_trace(stack, cache),
                     user_source=user_frame(stack, cache))
            out.append(c)
        if out:
            self._fx[gs.graph_id] = out

    def graph_finished(self, gs: GraphState) -> None:
        ddp = self._ddp.get(gs.compile_id)
        if ddp is not None:
            self._set_bucket(gs, ddp)
        fx = self._fx.pop(gs.graph_id, None)
        if fx:
            self._communicating.add(gs.graph_id)
            self.session.guarded("the collectives", lambda: self._write(gs, fx))

    def _write(self, gs: GraphState, fx: list[dict[str, Any]]) -> None:
        """``collectives.json``: program order is the order the wrapper issues them (Inductor's
        scheduler may move a collective from its FX position: comms reordering)."""
        by_node = {c["node"]: c for c in fx}
        issued: list[str] = []
        for k in sorted((k for k in gs.kernel_index if k.extern),
                        key=lambda k: k.wrapper_line or 0):
            nodes = [x for h in k.handles for x in
                     (gs.provenance.get(h) or {}).get("fx_nodes") or []]
            nodes += k.source_nodes
            node = next((x for x in nodes if x in by_node and x not in issued), None)
            if node is not None:
                issued.append(node)
                by_node[node].update(kernel=k.name, wrapper_line=k.wrapper_line)
        order = issued + [c["node"] for c in fx if c["node"] not in issued]
        entries = []
        for i, name in enumerate(order):
            c = by_node[name]
            entries.append({"index": i, "fx_index": fx.index(c), **c})
        groups = {c["group"]: self._groups.get(c["group"]) for c in fx if c["group"] is not None}
        gs.out.trace.write_json(gs.out.path(schema.COLLECTIVES), {
            "graph": gs.graph_id, "rank": compat.this_rank(), "groups": groups,
            "collectives": entries,
            "reordered": _issuing(order, by_node) != _issuing([c["node"] for c in fx], by_node),
            "issued_by_wrapper": bool(issued)})
        self._issued[gs.graph_id] = {
            e["wrapper_line"]: (e["index"], _line(e.get("user_source")))
            for e in entries if isinstance(e.get("wrapper_line"), int)}

    def issues_collectives(self, graph_id: str) -> bool:
        """Whether graph ``graph_id`` issues a collective (or waits for one)."""
        return graph_id in self._communicating

    def where(self, filename: str, line: int) -> dict[str, Any] | None:
        """A collective issued at ``filename:line`` by a compiled graph's wrapper: ``graph``,
        ``index`` (in its collectives.json) and the user's ``line``; None when no graph of
        this capture has that wrapper. Called by the rank's progress log as the collective is
        issued (``rank_progress``)."""
        graph = self._files.get(filename)
        if graph is None:
            for gs in list(self.session.graphs.values()):
                mod = gs.module() if gs.module is not None else None
                if mod is not None and getattr(mod, "__file__", None) == filename:
                    graph = self._files[filename] = gs.graph_id
                    break
        if graph is None:
            return None
        index, user = self._issued.get(graph, {}).get(line, (None, None))
        return {"graph": graph, "index": index, "line": user}

    # -- DDPOptimizer buckets ---------------------------------------------------------------------
    def _wrap_ddp_compile(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        s = self.session

        def compile_fn(optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            result = orig(optimizer, *args, **kwargs)
            s.guarded("DDPOptimizer's buckets", lambda: self._record_ddp(optimizer))
            return result
        return compile_fn

    def _record_ddp(self, optimizer: Any) -> None:
        buckets, cap, first = compat.ddp_buckets(optimizer)
        cid = compat.current_compile_id()
        if cid is None or not buckets:
            return
        ddp = {"buckets": buckets, "bucket_bytes_cap": cap, "first_bucket_cap": first}
        self._ddp[cid] = ddp
        for gs in list(self.session.graphs.values()):
            if gs.compile_id == cid and gs.status != "running":
                self._set_bucket(gs, ddp)
                self.session.write_meta(gs)

    @staticmethod
    def _set_bucket(gs: GraphState, ddp: dict[str, Any]) -> None:
        buckets = ddp["buckets"]
        if gs.piece >= len(buckets):
            return
        b = buckets[gs.piece]
        gs.extra_meta["ddp_bucket"] = {
            "index": gs.piece, "buckets": len(buckets), "bytes": b["bytes"],
            "params": b["params"], "extended_ops": b["extended_ops"],
            "bucket_bytes_cap": ddp["bucket_bytes_cap"],
            "first_bucket_cap": ddp["first_bucket_cap"],
            "all_bytes": [x["bytes"] for x in buckets]}
