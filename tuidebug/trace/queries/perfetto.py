"""A trace as Chrome trace-event JSON (``tuidebug perfetto``), for Perfetto or chrome://tracing.

Process 1 holds the compile: per graph one track of its compile phases (meta.json's phase starts
and durations) and one of the passes that ran, each laid from the start of its phase in the
order they ran, with its own duration. Graphs follow one another (a trace keeps each graph's
times from its own start). A profiled trace (``trace --profile``) adds, per compile, process 2:
one median call of the compiled graph — its kernel calls in the order the wrapper makes them
(provenance handles number them), each as long as its median, inside the call's median wall
time — and process 3: one call of the eager graph, its FX nodes in graph order; a compile
whose backward was profiled has its backward call after the forward on each (the eager
backward's FX nodes in reverse graph order: the nodes whose ops created the backward
functions). Process 4 holds the user's whole call (``queries/whole_call``): one compiled call's
ledger, its parts in call order (Dynamo, each graph, each eager island named by its graph
break, the backward, the rest), beside the median eager call; the verdict is in each call's
args. Pure data: no torch; every string from the trace goes into JSON as data.
"""

from __future__ import annotations

from typing import Any

from tuidebug.trace.format.reader import GraphRecord, Trace
from tuidebug.trace.format import safefile
from tuidebug.trace.queries.whole_call import call_verdicts

COMPILE_PID, COMPILED_PID, EAGER_PID, WHOLE_PID = 1, 2, 3, 4
_PASS_PHASE = {"pre_grad_passes": "pre_grad", "joint_graph_passes": "joint_graph",
               "post_grad_passes": "post_grad"}


def _num(v: Any) -> float | None:
    """A time from the trace: finite and not negative, else None (an infinite start or
    duration became ``"ts": null``, an event Perfetto drops)."""
    return safefile.number(v, minimum=0)


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def _meta(pid: int, tid: int | None, what: str, name: str) -> dict[str, Any]:
    e: dict[str, Any] = {"name": what, "ph": "M", "pid": pid, "args": {"name": name}}
    if tid is not None:
        e["tid"] = tid
    return e


def _span(name: str, pid: int, tid: int, start_s: float, dur_s: float, cat: str,
          **args: Any) -> dict[str, Any]:
    return {"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid, "ts": _us(start_s),
            "dur": _us(dur_s), "args": {k: v for k, v in args.items() if v is not None}}


def _graph_events(g: GraphRecord, tid: int, offset: float) -> tuple[list[dict[str, Any]], float]:
    """The phase and pass spans of graph ``g`` starting at ``offset`` s; and where it ends."""
    meta = g.meta
    starts = {k: _num(v) for k, v in (meta.phase_starts_s or {}).items()}
    times = {k: _num(v) for k, v in meta.phase_times_s.items()}
    events = [_meta(COMPILE_PID, tid, "thread_name", f"{g.id} phases"),
              _meta(COMPILE_PID, tid + 1, "thread_name", f"{g.id} passes")]
    end = offset
    timed = sorted((start, phase) for phase, start in starts.items()
                   if start is not None and times.get(phase) is not None)
    for i, (start, phase) in enumerate(timed):
        dur = times[phase] or 0.0
        if i + 1 < len(timed):  # durations are rounded to the µs: never past the next start
            dur = min(dur, timed[i + 1][0] - start)
        events.append(_span(phase, COMPILE_PID, tid, offset + start, dur, "phase", graph=g.id))
        end = max(end, offset + start + dur)
    cursor = offset
    for s in g.stages:
        dur = _num(s.duration_s)
        if s.kind != "pass" or dur is None:
            continue
        phase_start = starts.get(_PASS_PHASE.get(str(s.subsystem), ""), None)
        if phase_start is not None:
            cursor = max(cursor, offset + phase_start)
        events.append(_span(s.name, COMPILE_PID, tid + 1, cursor, dur, "pass", graph=g.id,
                            subsystem=s.subsystem, changed=s.changed))
        cursor += dur
        end = max(end, cursor)
    return events, end


def _call_order(trace: Trace, k: dict[str, Any]) -> int:
    """Where a kernel call comes in the wrapper: the number of its provenance handle
    (``cpp_fused_gelu_0:2``; Inductor numbers them in call order)."""
    handles = [str(k.get("call") or "")]
    if not handles[0][-1:].isdigit():
        try:
            entry = trace.graph(k["graph"]).kernel(k["kernel"])
            handles = list(entry.handles) if entry else []
        except KeyError:
            handles = []
    tail = handles[0].rsplit(":", 1)[-1] if handles else ""
    return safefile.to_int(tail, 1 << 30)


def _compiled_call(trace: Trace, name: str, kernels: list[dict[str, Any]], wall: Any, tid: int,
                   start: float, **args: Any) -> tuple[list[dict[str, Any]], float]:
    """One compiled call from ``start``: its kernel calls in wrapper order; and where it ends."""
    cursor, inner = start, []
    for k in sorted(kernels, key=lambda k: _call_order(trace, k)):
        t = _num(k.get("time_s")) or 0.0
        inner.append(_span(str(k.get("call") or k["kernel"]), COMPILED_PID, tid, cursor, t,
                           str(k.get("kind") or "kernel"), graph=k["graph"], kernel=k["kernel"],
                           calls=k.get("calls")))
        cursor += t
    dur = max(_num(wall) or 0.0, cursor - start)
    return [_span(name, COMPILED_PID, tid, start, dur, "call", **args), *inner], start + dur


def _eager_call(name: str, nodes: list[dict[str, Any]], order: dict[str, int], wall: Any,
                tid: int, start: float, backward: bool = False) -> tuple[list[dict[str, Any]],
                                                                         float]:
    """One eager call from ``start``: its FX nodes in graph order (a backward's in reverse)."""
    cursor, inner = start, []
    for n in sorted(nodes, key=lambda n: order.get(n["node"], len(order)), reverse=backward):
        t = _num(n.get("time_s")) or 0.0
        inner.append(_span(n["node"], EAGER_PID, tid, cursor, t, "fx_node",
                           phase="bwd" if backward else None))
        cursor += t
    dur = max(_num(wall) or 0.0, cursor - start)
    return [_span(name, EAGER_PID, tid, start, dur, "call"), *inner], start + dur


def _profile_events(trace: Trace, start: float) -> list[dict[str, Any]]:
    events = [_meta(COMPILED_PID, None, "process_name", "compiled graph (a median call)"),
              _meta(EAGER_PID, None, "process_name", "eager graph (a call, node by node)")]
    compiles = trace.profile.get("compiles") or {}
    for tid, cid in enumerate(sorted(compiles), start=1):
        c = compiles[cid]
        events += [_meta(COMPILED_PID, tid, "thread_name", f"compile {cid}"),
                   _meta(EAGER_PID, tid, "thread_name", f"compile {cid}")]
        spans, end = _compiled_call(trace, f"compiled call {cid}", c.get("kernels") or [],
                                    (c.get("compiled") or {}).get("wall_s"), tid, start,
                                    runs=c.get("runs"), device=c.get("device"))
        events += spans
        order = _node_order(trace, str(c.get("eager_graph") or ""))
        eager, eager_end = _eager_call(f"eager call {cid}", c.get("eager_nodes") or [], order,
                                       (c.get("eager") or {}).get("wall_s"), tid, start)
        events += eager
        b = c.get("backward")
        if b:  # the backward follows its forward
            events += _compiled_call(trace, f"compiled backward {cid}", b.get("kernels") or [],
                                     (b.get("compiled") or {}).get("wall_s"), tid, end)[0]
            events += _eager_call(f"eager backward {cid}", b.get("eager_nodes") or [], order,
                                  (b.get("eager") or {}).get("wall_s"), tid, eager_end,
                                  backward=True)[0]
    return events


def _node_order(trace: Trace, graph_id: str) -> dict[str, int]:
    try:
        g = trace.graph(graph_id)
    except KeyError:
        return {}
    stage = g.find_stage("dynamo") or (g.snapshots()[0] if g.snapshots() else None)
    graph = g.stage_graph(stage) if stage is not None else None
    return {n.name: i for i, n in enumerate(graph)} if graph is not None else {}


def _whole_call_events(trace: Trace) -> list[dict[str, Any]]:
    """Per measured callable, a track: its compiled call as the ledger's parts, then (a track
    below) its median eager call."""
    events: list[dict[str, Any]] = []
    for i, v in enumerate(call_verdicts(trace)):
        if not events:
            events.append(_meta(WHOLE_PID, None, "process_name", "whole call (compiled vs eager)"))
        tid = 2 * i + 1
        events += [_meta(WHOLE_PID, tid, "thread_name", f"{v.callable}: compiled, its ledger"),
                   _meta(WHOLE_PID, tid + 1, "thread_name", f"{v.callable}: eager")]
        events.append(_span(f"compiled call of {v.callable}", WHOLE_PID, tid, 0.0,
                            v.compiled.median_s, "call", verdict=v.text, ratio=v.ratio,
                            ratio_low=v.ratio_low, ratio_high=v.ratio_high,
                            p10_s=v.compiled.p10_s, p90_s=v.compiled.p90_s))
        cursor = 0.0
        for p in v.ledger:
            dur = max(p.seconds, 0.0)
            name = p.part + (f" {p.graph}" if p.graph else "") + (
                f" ({p.reason})" if p.reason else "")
            events.append(_span(name, WHOLE_PID, tid, cursor, dur, p.part, graph=p.graph,
                                reason=p.reason, file=p.file, line=p.line,
                                phase=p.phase if p.phase != "fwd" else None))
            cursor += dur
        events.append(_span(f"eager call of {v.callable}", WHOLE_PID, tid + 1, 0.0,
                            v.eager.median_s, "call", p10_s=v.eager.p10_s, p90_s=v.eager.p90_s))
    return events


def chrome_trace(trace: Trace) -> dict[str, Any]:
    """The trace-event JSON object (``{"traceEvents": [...], "displayTimeUnit": "ms"}``)."""
    events: list[dict[str, Any]] = [_meta(COMPILE_PID, None, "process_name", "compile")]
    offset = 0.0
    for i, g in enumerate(trace.graphs):
        graph_events, offset = _graph_events(g, 2 * i + 1, offset)
        events += graph_events
    if trace.profile:
        events += _profile_events(trace, 0.0)
        events += _whole_call_events(trace)
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"trace": trace.name, "status": trace.status}}
