"""The user's whole call, compiled against eager (``--profile``): what a user calling the
``torch.compile`` result pays — Dynamo's frame evaluation and guards, AOTAutograd's wrappers,
each compiled graph, the eager code a graph break leaves between graphs, CUDA graphs — against
the original module or function, on the inputs of its first call.

Each callable ``torch.compile`` returned (a listener of ``compiled_calls``: the module, the
function, the module's ``_call_impl`` that ``model.compile()`` compiles in place, measured as
that module) is measured once, right after its first call returns (its graphs compiled,
checked and profiled by then), from the thread that called it: while the measured calls run,
what that thread prints is dropped (``quiet.quiet_thread``), every other thread's output goes
where it went. Eager and compiled calls
alternate in rounds (``fair_timing``); a call that ran under autograd with tensors that require
grad is measured as a training step: the forward, then ``autograd.grad`` of its outputs (seeded
output gradients) with respect to the parameters and inputs that require grad (``.grad`` is
never touched). The ledger: compiled calls with each compiled graph's start and end marked
(``session.call_clock``, a ``compat.CallClock`` made once per measured call) split the call
into Dynamo before the first graph, each graph, each eager island between two graphs (its break
is the earlier graph's compile's), the backward, and the remainder of the measured wall time
(``other``). Each part is stated as its share of the clocked call's own wall time, then scaled
to the timed calls' median: a clocked call's parts add up to its time whether or not clocking
made it slower. The timed calls carry no marks and no hooks, as the eager ones carry none (a
hook on each compiled backward's autograd node made the compiled side alone pay for it): they
run under ``session.bare`` — compiled modules called through torch's own ``__call__``, its
wrapper around each compiled graph passing straight through (measured here: about 7 µs per
graph call on the loaded 2-core machine, against under 1 µs for the bare call); the
clocked calls are up to 40 further ones, alternating with eager calls as the timed ones did (on
a GPU the marks are pre-made CUDA events on the device's own timeline: nothing waits for the
device inside the call). ``instrumentation`` counts the marks and hooks that fired in each.

Written to ``profile.json``'s ``calls`` (docs/trace-format.md); the verdict and the ledger as
answers are ``tuidebug.trace.queries.whole_call``'s. The user's tensors, the random state and
the module's buffers are as they were after the call. What the call writes in place (its
arguments' copies, the module's buffers: a position it advances into a cache) is put back
before each run, unclocked (``call_state.Rewound``): each run starts where the user's call
left off, as the graphs' own profiles start where it began (``accuracy.restorer``); a call that
raises when run again is not timed, and its entry says why (``not_measured``). The tensors put
back are those the call's own graphs write and those of the optimizers it reaches, copied
only within a memory budget (``copy_budget``); the plain Python values and gradients of what
the call reaches (``reach``: one bounded walk) are put back too (``side_state``); on a job of
several ranks, whether the call is timed is every rank's decision, and so is whether every
timed call went through (``agreement``).
"""

from __future__ import annotations

import time
import weakref
from typing import Any

import torch

from tuidebug.compiler import accuracy, compat, fair_timing
from tuidebug.compiler.capture import profile
from tuidebug.compiler.capture.call_parts import Clocked, ledger, parts
from tuidebug.compiler.capture.call_state import (
    Rewound, buffers, leaf, program_tensors, raised_again, restore, rewound, state_holders,
    written_state)
from tuidebug.compiler.capture.collectives import Collectives
from tuidebug.compiler.capture.agreement import Agreement, Contained, communicates, world_size
from tuidebug.compiler.capture.counted_ranks import CountedRanks
from tuidebug.compiler.capture.copy_budget import over_budget
from tuidebug.compiler.capture.reach import reach
from tuidebug.compiler.capture.side_state import (
    SideState, optimizer_tensors, parameters, space_tensors)
from tuidebug.compiler.capture.call_step import RunRaised, Step
from tuidebug.compiler.capture.compiled_calls import CompiledCall, CompiledCalls
from tuidebug.compiler.capture.quiet import quiet_thread
from tuidebug.machine import load1
from tuidebug.compiler.capture.state import CallMarks, Concern
from tuidebug.trace.queries.verdict import ratio_interval, spread

LEDGER_CALLS = 40      # clocked calls after the timed ones (fewer past LEDGER_CAP_S)
LEDGER_CAP_S = 4.0


class WholeCall(Concern):
    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.busy = False
        self.measured: "weakref.WeakSet[Any]" = weakref.WeakSet()  # compiled callables
        self.machine: fair_timing.Machine | None = None
        self._threads: Any = None
        self.counted = CountedRanks()  # whether every rank of a job counts its collectives

    @property
    def prof(self) -> profile.Profile:
        return self.session.concern(profile.Profile)

    def install_at_start(self, p: compat.Patcher) -> None:
        if not self.prof.enabled:
            return
        compat.count_default_groups(p)  # the keys of the ranks' words (``counted_ranks``)
        # Inductor's C++ kernels keep the thread count of their compile (``#pragma omp parallel
        # num_threads(N)``): the threads are chosen before anything compiles, and before the
        # script runs (a count the script sets itself wins)
        self.machine = fair_timing.free_threads()
        self._threads = fair_timing.threads(self.machine.threads)
        self._threads.__enter__()
        self.prof.data["machine"] = self.machine.as_json()
        self.session.concern(CompiledCalls).listen("the whole call", self._called)

    def uninstall(self) -> None:
        if self._threads is not None:
            self._threads.__exit__(None, None, None)
            self._threads = None

    def _called(self, call: CompiledCall) -> bool:
        """A user's call of a compiled callable returned: measured once, at the first call
        that returns with a graph compiled; this rank's word (``CountedRanks``) said first, the
        others wait for it. True once it is measured (no further call needed)."""
        why = self.counted.mine(call.collectives, self.session.uncounted, lambda: communicates(
            call.collectives, False, _module_of(call.eager)), bool(self.session.graphs))
        if self.busy or call.compiled in self.measured or not self.session.graphs:
            return call.compiled in self.measured
        self.measured.add(call.compiled)
        owner = _module_of(call.eager)
        name = type(owner).__name__ if owner is not None else getattr(
            call.eager, "__qualname__", str(call.eager))
        if why:  # a job of several ranks whose collectives are not counted: never re-run
            return self._written({"callable": name, "not_measured": why})
        if holders := state_holders(call.args, call.kwargs):  # re-running the call would change the program's own state: not timed
            return self._written({"callable": name, "not_measured": (
                f"{', '.join(holders)} hold{'s' if len(holders) == 1 else ''} tensors the "
                "call may change in place or replace (a KV cache advances or grows at "
                "each call): timing the call would re-run it hundreds of times on them, "
                "and the rest of the program would see the result; the graphs' own times "
                "are measured on copies")})
        # the program's other tensors this call's graphs write (a global cache, an optimizer's
        # state): the graphs it ran, not every graph of the session
        tls = self.session.tls
        ran = [g for g in list(self.session.graphs.values())
               if tls.last_called.get(g.graph_id, 0) > call.since]
        # whether every rank makes the timed calls and agrees on them: known before anything
        # of this rank's alone (the walk, the copies) can fail or stop short
        together = communicates(call.collectives, any(self.session.concern(
            Collectives).issues_collectives(g.graph_id) for g in ran), owner)
        short = self.counted.why_not() if together else None  # a rank that times no call
        if short:  # (it counts no collective) would leave the others waiting in the agreement
            return self._written({"callable": name, "not_measured": short})
        agree = Agreement(together, compat.call_device(
            [*call.args, *call.kwargs.values(), *(owner.parameters() if owner is not None
                                                  else ())]))
        side: SideState | None = None
        saved: list[tuple[torch.Tensor, torch.Tensor]] = []
        state: list[tuple[str, torch.Tensor, torch.Tensor]] = []
        self.busy = True
        rng = accuracy._rng_state()
        try:
            entry = self._prepared(call, name, owner, ran, agree)
            if entry is None:
                return True
            side, saved, state = entry
            self.session.progress(f"timing the whole call of {name}: compiled and eager, "
                                  "interleaved")
            with quiet_thread():
                measured = self._measure(name, call.compiled, call.eager, call.args,
                                         call.kwargs, owner, saved, state, side, agree)
        except Exception as e:  # noqa: BLE001 - tuidebug's own failure: every rank told
            said = f"timing the call failed: {type(e).__name__}: {str(e)[:300]}"
            if agree.short is None:
                agree.settle(said)
            measured = {"callable": name, "not_measured": said}
            if self.session.writer is not None:
                self.session.writer.warn(f"capture could not record the whole call: {said}")
        finally:
            restore(saved + [(t, copy) for _, t, copy in state])
            if side is not None:
                side.learn()  # all the re-runs changed of what the call reaches, put back
                side.restore()
                self._unrestorable(side)  # in every path: timed, not, or raised
            accuracy._set_rng_state(rng)
            self.busy = False
        return self._written(measured)

    def _written(self, entry: dict[str, Any]) -> bool:
        """The call's entry in the profile (written now). True: measured once."""
        self.prof.data.setdefault("calls", []).append(entry)
        self.session.guarded("the profile", self.prof.write)
        return True

    def _prepared(self, call: CompiledCall, name: str, owner: torch.nn.Module | None,
                  ran: list[Any], agree: Agreement) -> Any:
        """What the call reaches, the copies its re-runs need, and the ranks' first agreement
        (to time it or not); None where it is not timed (its entry written)."""
        reached = reach(call.eager, owner, call.args, call.kwargs)
        params = parameters(reached.modules, reached.optimizers)
        # and what the optimizers it reaches write, in the graphs or outside them (an eager
        # opt.step() after a graph break: put back, not stepped once more by each re-run)
        named = program_tensors([*[w for g in ran for w in g.wrote], *[
            (n, weakref.ref(t)) for n, t in optimizer_tensors(reached.optimizers, params)]],
            call.args, call.kwargs, owner)
        mine = [*[t for _, t in named], *(owner.buffers() if owner is not None else ()),
                *call.args, *call.kwargs.values(), *[p.grad for _, p in params]]
        # the device the call runs on, found once: its own tensors' (its parameters' too), not
        # the current CUDA device (cuda:0 in a rank that never called set_device)
        # (every one of them, where it runs on several: a model over two GPUs is waited for
        # on each, its marks taken on the first)
        own = [*mine, *[p for _, p in params]]
        agree.device = compat.call_device(own)
        agree.devices = compat.call_devices(own) or [agree.device]
        tracked = {id(t) for _, t in named}
        copied = space_tensors(reached.spaces, tracked | {id(p) for _, p in params})
        short = agree(  # every rank decides alike: the copies made, or none
            reached.cut or over_budget([*mine, *[t for _, t in copied]], agree.device),
            "what the call reaches was more than the walk looks at, or it had not the memory "
            "for copies of what the call writes")
        if short:
            self._written({"callable": name, "not_measured": f"{short}; the graphs' own times "
                           "are measured on copies"})
            return None
        saved = buffers(owner)
        state = written_state(named)
        side = SideState(reached.spaces, params, tracked, reached.containers, reached.tensors,
                         [*(t for _, t in named), *(owner.buffers() if owner is not None else ())])
        return side, saved, state

    def _measure(self, name: str, compiled: Any, eager: Any, args: Any, kwargs: Any,
                 owner: torch.nn.Module | None, saved: list[tuple[torch.Tensor, torch.Tensor]],
                 state: list[tuple[str, torch.Tensor, torch.Tensor]],
                 side: SideState, agree: Agreement) -> dict[str, Any]:
        """The whole call measured (``saved``: the module's buffers as the call left them;
        ``state``: the program's other tensors its graphs write, ``written_state``; ``side``:
        the attributes and gradients it reaches); where the call raises when run again, or
        writes what cannot be put back, the entry says so and why (``not_measured``), on every
        rank alike where it communicates (``agree``)."""
        grad_on = torch.is_grad_enabled()
        copies: dict[int, Any] = {}  # one tensor passed twice stays one tensor
        leaves = [leaf(a, copies) for a in args]
        kw = {k: leaf(v, copies) for k, v in (kwargs or {}).items()}
        wrt = [x for x in [*leaves, *kw.values()] if isinstance(x, torch.Tensor)
               and x.requires_grad]
        if owner is not None:
            wrt += [p for p in owner.parameters() if p.requires_grad]
        put = rewound(args, kwargs, copies, owner, saved, state, side)
        # the timed calls: torch's own __call__ of a compiled module, not the capture's watch
        direct = self.session.concern(CompiledCalls).unwatched(compiled)
        c_step = Step(lambda: direct(*leaves, **kw), wrt, grad_on)
        why: str | None = None
        training = False
        try:
            training = c_step.training()
            put.learn()  # what that call wrote: put back before each call from now on
            why = side.why()
        except RunRaised as e:
            why = raised_again(e.error, put)
        why = agree(why, "its re-run raised, or wrote what cannot be put back")
        if why:
            return {"callable": name, "not_measured": why}
        try:
            return self._timed(name, compiled, eager, leaves, kw, wrt, grad_on, c_step,
                               training, put, agree)
        except RunRaised as e:
            return {"callable": name, "not_measured": raised_again(e.error, put)}

    def _unrestorable(self, side: SideState) -> None:
        """The trace's warning, after the last re-run whatever its end (timed, not measured,
        raised): the parameters a re-run wrote outside the compiled graphs that are not an
        optimizer's the call reaches, of which no copy was kept."""
        if side.unrestorable and self.session.writer is not None:
            self.session.writer.warn(
                f"timing the whole call re-ran it, and the re-run wrote parameters or tensors "
                f"it reaches ({side.listed()}) outside its compiled graphs (a graph break, "
                "torch.compiler.disable'd code) that are no optimizer's the call reaches: no "
                "copy of them was kept, and the program goes on with them as the re-run left "
                "them")
        if side.subclassed and self.session.writer is not None:
            self.session.writer.warn(
                "timing the whole call re-ran it once, and the re-run changed the items of "
                f"containers it reaches that are subclasses of dict, list or set "
                f"({', '.join(side.subclassed[:8])}): their items are not put back (that would "
                "run their own code), and the program goes on with them as the re-run left them")

    def _timed(self, name: str, compiled: Any, eager: Any, leaves: list[Any],
               kw: dict[str, Any], wrt: list[torch.Tensor], grad_on: bool, c_step: Step,
               training: bool, rewound: Rewound, agree: Agreement) -> dict[str, Any]:
        put_back = rewound.restore if rewound.writes() else None
        # the same call as the learning one: whether it trains is known (a forward of its own
        # to ask, at its first run, was a second forward with no put-back between: a position
        # one slot from its cache's end ran past it)
        e_step = Step(lambda: eager(*leaves, **kw), wrt, grad_on, c_step.grads, training)
        # the clocked calls: as the user's, through the watch (counted in instrumentation);
        # the same call as the timed one: no forward of its own to ask whether it trains
        c_clocked = Step(lambda: compiled(*leaves, **kw), wrt, grad_on, c_step.grads, training)
        machine = fair_timing.free_threads() if self.machine is None else self.machine
        device, devices, together = agree.device, agree.devices, agree.together
        load_before = load1()
        # the timed calls run under the same instrumentation on both sides: none. No clock
        # mark around a compiled graph, no hook on its backward's autograd node (the eager
        # calls have neither: timing the compiled calls with them biased the verdict toward
        # "slower"). The ledger's marks are taken in further calls, after the timed ones.
        marks = CallMarks(compat.CallClock(device))
        clocked: list[Clocked] = []
        tls = self.session.tls  # this thread's calls: another's meanwhile are traced as ever
        counted: list[dict[str, int]] = []  # per clocked call: what its instrumentation did

        def run_clocked() -> None:
            w, h, m = tls.wrapped_calls, tls.watched_calls, marks.counts()
            clocked.append(self._clocked_call(c_clocked, marks, devices))
            now = marks.counts()
            counted.append({**{k: now[k] - m[k] for k in now},
                            "wrapped_graph_calls": tls.wrapped_calls - w,
                            "watched_module_calls": tls.watched_calls - h})
        rounds = max(self.prof.runs, fair_timing.MIN_ROUNDS)
        ranks = world_size()
        before = marks.counts()
        wrapped, hooked = tls.wrapped_calls, tls.watched_calls
        # where the ranks time the call together, a call raising on this rank alone is kept
        # and the rounds made to their end: the ranks agree after them (a rank leaving early
        # left the others waiting forever in the calls' collectives)
        keep = Contained(together and ranks > 1)
        with self.session.bare():  # no hook or wrapper of the capture's in the timed calls
            if ranks > 1:  # every rank must make the same calls (their collectives pair up):
                tc, te = fair_timing.interleaved(  # a fixed number of rounds, not adaptive
                    keep(c_step.run), keep(e_step.run), device=devices, min_rounds=rounds,
                    max_rounds=rounds, cap_s=float("inf"), before=put_back)
            else:
                tc, te = fair_timing.interleaved(c_step.run, e_step.run, device=devices,
                                                 min_rounds=rounds, before=put_back)
        why = agree(keep.why(rewound), "a timed call of it raised")
        if why:
            return {"callable": name, "not_measured": why}
        wrapped, hooked = tls.wrapped_calls - wrapped, tls.watched_calls - hooked
        timed = marks.counts()
        load_after = load1()
        r = ratio_interval(te, tc)
        comp = spread(tc)
        entry: dict[str, Any] = {
            "callable": name, "training": training, "rounds": len(tc),
            "device": "cuda" if device.type == "cuda" else "cpu",
            "threads": torch.get_num_threads(),
            "machine": {**machine.as_json(), "load1_during": [round(load_before, 2),
                                                              round(load_after, 2)],
                        "oversubscribed": machine.oversubscribed or max(
                            load_before, load_after) - 1.0 > machine.cores},
            "compiled": comp.as_json(), "eager": spread(te).as_json(),
            "ratio": r.value, "ratio_low": r.low, "ratio_high": r.high,
            "times": {"compiled_s": [round(t, 9) for t in tc],
                      "eager_s": [round(t, 9) for t in te]}}
        if rewound.writes():
            entry["restored"] = rewound.names()
        # further clocked calls, alternating with eager ones as the timed calls did
        # (each primed by the same call unclocked: through the watch, with no mark)
        fair_timing.interleaved(keep(run_clocked), keep(e_step.run), device=devices,
                                min_rounds=LEDGER_CALLS,
                                max_rounds=LEDGER_CALLS, warmup=1, cap_s=float(
                                    "inf") if ranks > 1 else LEDGER_CAP_S,
                                prime=(keep(c_clocked.run), keep(e_step.run)), before=put_back)
        why = agree(keep.why(rewound), "a clocked call of it raised")
        if why:
            return {"callable": name, "not_measured": why}
        clocked, counted = clocked[1:], counted[1:]  # the warm-up's call is not a ledger's
        entry["instrumentation"] = {  # what tuidebug's own marks did in each kind of call
            "timed": {**{k: timed[k] - before[k] for k in before},
                      "wrapped_graph_calls": wrapped, "watched_module_calls": hooked},
            # the clocked calls the ledger reads, only: not their unclocked primes, which go
            # through the same watch and wrapper but carry no mark
            "clocked": {k: sum(c[k] for c in counted) for k in
                        [*timed, "wrapped_graph_calls", "watched_module_calls"]}}
        cg = self._cudagraph_ids()
        runs = [(c.wall, parts(c, cg, training)) for c in clocked]
        entry["ledger"] = ledger(runs, comp.median_s, list(self.session.graphs.values()))
        if runs:
            entry["ledger_calls"] = {"n": len(runs),
                                     "wall": spread([w for w, _ in runs]).as_json()}
        return entry

    def _clocked_call(self, step: Step, marks: CallMarks, devices: compat.Devices
                      ) -> "Clocked":
        """One call of ``step`` with each compiled graph's start and end marked, and its wall
        time on the host's clock (as the timing measures a call: from a synchronized device to
        a synchronized device: each of ``devices``, those the call runs on)."""
        s = self.session
        marks.reset(backward=step.training())
        s.call_clock = marks
        try:
            compat.synchronize(devices)
            h0 = time.perf_counter()
            marks.clock.mark()
            fwd_end, end = step.run_split(marks.clock)
            # every mark reached (on a GPU: events read after this)
            compat.synchronize(devices)
            wall = time.perf_counter() - h0
        finally:
            s.call_clock = None
        return Clocked(wall, marks.clock.seconds(), list(marks.graphs), fwd_end, end,
                        list(marks.backward or ()))

    def _cudagraph_ids(self) -> set[str]:
        """The graphs replayed as CUDA graphs (on, and not skipped by Inductor)."""
        cuda = compat.device_kind() == "cuda"
        return {g.graph_id for g in list(self.session.graphs.values())
                if g.replays_cuda_graphs(cuda)}


def _module_of(model: Any) -> torch.nn.Module | None:
    """The module a compiled callable is: ``model`` itself, or, for ``model.compile()`` (which
    compiles ``model._call_impl`` in place), the module that method is bound to."""
    if isinstance(model, torch.nn.Module):
        return model
    owner = getattr(model, "__self__", None)
    return owner if isinstance(owner, torch.nn.Module) else None
