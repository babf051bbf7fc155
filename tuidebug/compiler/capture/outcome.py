"""How each compile ended: its errors (``error.json``, the manifest's ``error``) and, when the
compiled graph runs, the comparison with eager (``runtime.json``) that also times its kernels."""

from __future__ import annotations

import traceback
import weakref
from typing import Any, Callable

from tuidebug.compiler import accuracy, compat
from tuidebug.compiler import judge
from tuidebug.compiler.capture import kernels, numerics, profile, returned
from tuidebug.compiler.capture.collectives import Collectives
from tuidebug.compiler.output_paths import rename_outputs
from tuidebug.compiler.capture.state import Concern, GraphState
from tuidebug.trace.format.error_record import ErrorRecord


class Outcome(Concern):
    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.runtime: dict[str, Any] = {"checks": {}}
        self._named: set[str] = set()  # checks whose outputs the user's return will name

    def stopping(self) -> None:
        s = self.session
        assert s.writer is not None
        self._write_runtime()
        mismatches = {cid: c for cid, c in self.runtime["checks"].items()
                      if c.get("close") is False}
        if mismatches and not s.errors:
            cid, c = next(iter(mismatches.items()))
            graphs = c.get("graphs") or []
            s.errors.append(ErrorRecord(
                phase="accuracy", type="AccuracyMismatch",
                message=f"compiled output differs from eager for compile {cid}: "
                        f"{c.get('detail') or ''} (rule {c.get('rule')}; max abs err "
                        f"{c.get('max_abs'):.3g})",
                traceback="", graph=graphs[0] if graphs else None, compile_id=cid))
            s.writer.update(accuracy_mismatch=sorted(mismatches))

    # -- the compiled graph runs ----------------------------------------------------------------
    def wrap_runtime(self, compiled: Callable[..., Any], gm: Any,
                     gs: GraphState) -> Callable[..., Any]:
        """``compiled`` checked against eager on its first call (and its kernels then timed);
        a failure while it runs is recorded as a runtime error of ``gs``."""
        s = self.session
        cid = gs.compile_id
        # Dynamo wraps what the backend returns in ``disable``, unwrapping the backend's own:
        # this wrapper goes around the graph itself, or every call would pay for two
        compiled = compat.undisabled(compiled)
        timer = s.concern(kernels.Kernels)
        prof = s.concern(profile.Profile)
        profiling = None
        if prof.enabled:
            def profiling(again: Callable[[], Any], inputs: list[Any],
                          grad: accuracy.GradCall | None, restore: Callable[[], None]) -> None:
                s.guarded("the profile", lambda: prof.profile(cid, gm, again, inputs, restore,
                                                              grad=grad, piece=gs.piece))

        def record(result: dict[str, Any]) -> None:
            self.runtime["checks"][cid] = {"graphs": s.compiles.get(cid, {}).get("graphs", []),
                                           **result}
            s.guarded("the eager comparison", self._write_runtime)

        def wrote(named: list[tuple[str, Any]]) -> None:
            gs.wrote = [(n, weakref.ref(t)) for n, t in named]

        checked = accuracy.checked(compiled, gm, record, time_kernels=lambda again, before: s.guarded(
            "kernel run times", lambda: timer.time_kernels(cid, again, before)), tol=s.accuracy_tol,
            same_random=bool(compat.inductor_config_value("fallback_random")), profile=profiling,
            localize=lambda step, reset: s.concern(numerics.Numerics).first_divergence(
                cid, step, reset, s.accuracy_tol), localize_always=s.numerics,
            wrote=wrote, issues=lambda: s.concern(Collectives).issues_collectives(gs.graph_id))

        first = [True]  # the graph's first call (checked) has not returned yet

        def run(*args: Any) -> Any:
            tls = s.tls
            if tls.bare and not first[0]:  # this thread's timed calls: as untraced
                return checked(*args)
            tls.wrapped_calls += 1
            tls.last_called[gs.graph_id] = tls.wrapped_calls
            with s.as_current(gs):
                try:
                    clock = s.call_clock
                    if clock is None:
                        out = checked(*args)
                    else:
                        from tuidebug.compiler.gradients import tensors

                        # the inputs' autograd nodes (an earlier graph's, not this one's), read
                        # before the call: a boxed call empties its argument list
                        inputs = ([t.grad_fn for t in tensors(args) if t.grad_fn is not None]
                                  if clock.backward is not None else [])
                        start = clock.mark_graph()  # never waits: the call runs as unclocked
                        out = checked(*args)
                        clock.graphs.append((gs.graph_id, cid, start, clock.mark_graph()))
                        if clock.backward is not None:
                            s.guarded("the backward's timing", lambda: self._watch_backward(
                                clock, cid, out, inputs))
                    if cid not in self._named and cid in self.runtime["checks"]:
                        self._named.add(cid)  # the check's call: name its outputs by the return
                        s.concern(returned.Returned).expect(
                            judge.flatten_outputs(out), lambda names: self._rename(cid, names))
                    first[0] = False
                    return out
                except BaseException as e:
                    if not isinstance(e, (KeyboardInterrupt, SystemExit)):
                        s.phase("runtime")
                        self.record_error(e, gs, phase="runtime")
                    raise
        compat.copy_calling_convention(checked, run)
        return run

    def _watch_backward(self, clock: Any, cid: str, out: Any, inputs: list[Any]) -> None:
        try:
            clock.watch_backward(cid, out, inputs)
        except compat.NotAvailable as e:  # kept once in the manifest: a fact about this torch
            assert self.session.writer is not None
            self.session.writer.not_available(f"backward timing: {e}")

    def _rename(self, cid: str, names: dict[int, str]) -> None:
        check = self.runtime["checks"].get(cid)
        if isinstance(check, dict) and rename_outputs(check, names):
            self._write_runtime()

    def _write_runtime(self) -> None:
        assert self.session.writer is not None
        self.session.writer.write_runtime(self.runtime)

    # -- errors ---------------------------------------------------------------------------------
    def record_error(self, e: BaseException, gs: GraphState | None,
                     phase: str | None = None) -> None:
        s = self.session
        if getattr(e, "_tuidebug_recorded", False) or (gs is not None and gs.status == "failed"):
            return  # the same failure, propagating through an outer hook
        if compat.is_restart(e):
            if gs is not None:
                s.set_status(gs, "restarted")
            return
        try:
            e._tuidebug_recorded = True  # type: ignore[attr-defined]
        except Exception:
            pass
        writer = s.writer
        assert writer is not None
        inner = compat.backend_error_cause(e)
        err = ErrorRecord(
            phase=phase or writer.manifest.get("phase") or "unknown",
            type=f"{type(inner).__module__}.{type(inner).__qualname__}",
            message=clip_message(str(inner)),
            traceback=short_traceback(e),
            graph=gs.graph_id if gs else None,
            compile_id=gs.compile_id if gs else None)
        s.errors.append(err)
        if gs is not None:
            gs.status = "failed"
            s.guarded("the error", lambda: gs.out.write_error(err))
            for c in s.concerns:
                c.graph_failed(gs)
            s.set_status(gs, "failed")
        if writer.manifest.get("error") is None:
            writer.update(error=err.to_json())


def clip_message(msg: str, head: int = 6000, tail: int = 6000) -> str:
    """A long message (a C++ compiler's output can be megabytes) cut to its head and tail, with
    every line that reports an error kept from the middle."""
    if len(msg) <= head + tail:
        return msg
    middle = msg[head:-tail]
    errors = [ln for ln in middle.splitlines() if "error" in ln.lower()][:200]
    kept = "\n".join(errors)
    return (msg[:head] + f"\n… [{len(middle)} characters cut; their error lines follow]\n"
            + kept + "\n…\n" + msg[-tail:])


def short_traceback(e: BaseException, message_limit: int = 2000) -> str:
    """The traceback frames of ``e`` and its causes, each message cut to ``message_limit``
    characters (a C++ compiler's output can be megabytes; the full text is in "message")."""
    chain: list[BaseException] = []
    cur: BaseException | None = e
    while cur is not None and cur not in chain and len(chain) < 4:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    parts = []
    for i, exc in enumerate(reversed(chain)):
        if i:
            parts.append("\nThe above exception was the direct cause of the following:\n\n")
        msg = str(exc)
        if len(msg) > message_limit:
            msg = msg[:message_limit] + f"… [{len(msg) - message_limit} more characters]"
        parts.append("Traceback (most recent call last):\n")
        parts.extend(traceback.format_tb(exc.__traceback__))
        parts.append(f"{type(exc).__module__}.{type(exc).__qualname__}: {msg}\n")
    return "".join(parts)
