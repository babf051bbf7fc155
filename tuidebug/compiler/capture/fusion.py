"""IR and fusion: the scheduler's nodes before and after fusion (``ir_*_fusion.json/.txt``) and
every fusion decision, made or refused with its reason (``fusion.jsonl``)."""

from __future__ import annotations

from typing import Any, Callable

from tuidebug.compiler import compat
from tuidebug.compiler.capture.state import Concern, FuseCheck, GraphState


class Fusion(Concern):
    def install(self, p: compat.Patcher) -> None:
        p.wrap(compat.IR_PRE_FUSION, lambda f: self._wrap_ir(f, "pre"), everywhere=True)
        p.wrap(compat.IR_POST_FUSION, lambda f: self._wrap_ir(f, "post"), everywhere=True)
        p.wrap(compat.WHY_NO_FUSE, self._wrap_why_no_fuse)
        p.wrap(compat.FUSE_TWO_NODES, self._wrap_fuse_two_nodes)
        p.wrap(compat.CAN_FUSE, self._wrap_can_fuse)
        for dotted in compat.BACKEND_CAN_FUSE:
            p.wrap(dotted, lambda f, m=dotted.rsplit(".", 1)[-1]: self._wrap_backend_can_fuse(f, m))

    def graph_failed(self, gs: GraphState) -> None:
        self.session.guarded("fusion decisions", lambda: self.flush(gs))

    def graph_finished(self, gs: GraphState) -> None:
        if gs.fusion:
            self.flush(gs)

    def flush(self, gs: GraphState) -> None:
        gs.out.write_fusion(gs.fusion)

    # the scheduler's nodes, logged before and after fusion
    def _wrap_ir(self, orig: Callable[..., Any], which: str) -> Callable[..., Any]:
        s = self.session

        def log_ir(*args: Any, **kwargs: Any) -> Any:
            gs = s.current()
            if gs is not None:
                s.phase("scheduling" if which == "pre" else "codegen")
                s.guarded(f"IR {which} fusion", lambda: self._write_ir(gs, args, kwargs, which))
            return orig(*args, **kwargs)
        return log_ir

    def _write_ir(self, gs: GraphState, args: Any, kwargs: Any, which: str) -> None:
        nodes, text = compat.logged_scheduler_nodes(args, kwargs)
        gs.out.write_ir(which, nodes, text)
        if which == "post":
            self.flush(gs)

    # decisions
    def _wrap_why_no_fuse(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        s = self.session

        def __call__(*args: Any, **kwargs: Any) -> Any:
            out = orig(*args, **kwargs)
            gs = s.current()
            if gs is not None:
                checks = s.tls.can_fuse
                if checks:
                    checks[-1].explained = True
                s.guarded("a fusion decision", lambda: self._reject(
                    gs, *compat.why_no_fuse_call(args, kwargs)))
            return out
        return __call__

    def _reject(self, gs: GraphState, name1: str, name2: str, reason: str) -> None:
        key = (name1, name2, reason)
        if key not in gs.fusion_seen:
            gs.fusion_seen.add(key)
            gs.fusion.append({"action": "rejected", "node1": name1, "node2": name2,
                              "reason": reason})

    def _wrap_can_fuse(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        """A pair Scheduler.can_fuse turns down without a WhyNoFuse reason is recorded too,
        naming the backend check that said no when one did."""
        s = self.session

        def can_fuse(*args: Any, **kwargs: Any) -> Any:
            gs = s.current()
            if gs is None:
                return orig(*args, **kwargs)
            checks = s.tls.can_fuse
            check = FuseCheck()
            checks.append(check)
            try:
                ok = orig(*args, **kwargs)
            finally:
                checks.pop()
            if not ok and not check.explained:
                who = f"backend {check.backend}" if check.backend else "Scheduler.can_fuse"
                s.guarded("a fusion decision", lambda: self._reject(
                    gs, *compat.fusion_pair_names(args, kwargs),
                    f"{who} returned False (no reason given)"))
            return ok
        return can_fuse

    def _wrap_backend_can_fuse(self, orig: Callable[..., Any], method: str) -> Callable[..., Any]:
        s = self.session

        def backend_check(backend: Any, *args: Any, **kwargs: Any) -> Any:
            ok = orig(backend, *args, **kwargs)
            checks = s.tls.can_fuse
            if not ok and checks and checks[-1].backend is None:
                checks[-1].backend = f"{type(backend).__name__}.{method}"
            return ok
        return backend_check

    def _wrap_fuse_two_nodes(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        s = self.session

        def fuse_two_nodes(*args: Any, **kwargs: Any) -> Any:
            n1, n2 = compat.fusion_pair_names(args, kwargs)
            out = orig(*args, **kwargs)
            gs = s.current()
            if gs is not None:
                def rec() -> None:
                    name, members = compat.fused_node(out)
                    gs.fusion.append({"action": "fused", "node1": n1, "node2": n2,
                                      "result": name, "members": members})
                s.guarded("a fusion", rec)
            return out
        return fuse_two_nodes
