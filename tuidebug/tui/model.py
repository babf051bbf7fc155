"""What the screens show, computed from a trace: pure logic, no Textual, no torch.

Everything here runs in worker threads (it may parse large JSON files) and returns plain data
that a screen turns into lines. Keeping it free of widgets makes it testable on its own.
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from tuidebug.trace.format import schema
from tuidebug.trace.format.graph import Graph, node_line
from tuidebug.trace.format.reader import GraphRecord, StageInfo, Trace
from tuidebug.trace.queries.dynamic import guard_counts
from tuidebug.trace.queries.graph_breaks import dynamo_message
from tuidebug.trace.queries.failed_guard import reasons_of
from tuidebug.trace.queries.stages import merge_removed, previous_snapshot, snapshot_at
from tuidebug.trace.queries.summary import compile_place
from tuidebug.viewers.summary_text import compile_cache

# -- timings ---------------------------------------------------------------------------------------


def total_compile_s(g: GraphRecord) -> float | None:
    durations = g.meta.phase_durations()
    return sum(d for _, d in durations) if durations else None


# -- pass stepper ---------------------------------------------------------------------------------

ADDED, CHANGED, REMOVED, SAME = "added", "changed", "removed", "same"
FIRST_SNAPSHOT = "the first snapshot of this graph"  # a StageView's note: nothing is marked


@dataclass
class GraphLine:
    node: str
    text: str
    mark: str = SAME  # added | changed | removed | same


@dataclass
class StageView:
    """The graph as it stands after one stage, with that stage's changes marked."""

    stage: StageInfo
    shown: StageInfo | None  # the snapshot whose graph is shown (this stage or an earlier one)
    graph: Graph | None
    lines: list[GraphLine]
    changes: dict[str, list[str]]
    note: str = ""
    prev: Graph | None = None  # the previous snapshot (where removed nodes come from)

    _width: int | None = field(default=None, init=False, repr=False, compare=False)

    def text_width(self) -> int:
        """The longest line's text (computed once, where the view is built: a step that
        finds the view built measures nothing)."""
        if self._width is None:
            self._width = max(map(len, (ln.text for ln in self.lines)), default=0)
        return self._width

    def index_of(self, node: str) -> int | None:
        for i, line in enumerate(self.lines):
            if line.node == node and line.mark != REMOVED:
                return i
        for i, line in enumerate(self.lines):
            if line.node == node:
                return i
        return None


class _SnapshotCache:
    """Per graph record: the node lines of each snapshot, and the view of each stage,
    computed once."""

    def __init__(self) -> None:
        self.lines: dict[str | int, list[GraphLine]] = {}  # by snapshot file
        self.views: dict[int, StageView] = {}  # by stage index
        self.lock = threading.Lock()


_CACHE: "weakref.WeakKeyDictionary[GraphRecord, _SnapshotCache]" = weakref.WeakKeyDictionary()
_CACHE_LOCK = threading.Lock()


def _cache(g: GraphRecord) -> _SnapshotCache:
    with _CACHE_LOCK:
        c = _CACHE.get(g)
        if c is None:
            c = _CACHE[g] = _SnapshotCache()
        return c


def snapshot_lines(g: GraphRecord, info: StageInfo, graph: Graph) -> list[GraphLine]:
    """``node_line`` of every node of a snapshot (cached: stepping over passes that changed
    nothing re-uses them)."""
    c = _cache(g)
    key = info.file or info.index
    lines = c.lines.get(key)
    if lines is not None:
        return lines
    with c.lock:  # made once, whether the read-ahead or the stage asked for first
        lines = c.lines.get(key)
        if lines is None:
            lines = c.lines[key] = [GraphLine(n.name, node_line(n)) for n in graph.nodes]
    return lines


def lines_ready(g: GraphRecord, info: StageInfo) -> bool:
    """Whether the snapshot ``info`` is parsed and its node lines made (``snapshot_lines``)."""
    return g.is_cached(info) and (info.file or info.index) in _cache(g).lines


def neighbours(g: GraphRecord, position: int) -> list[StageInfo]:
    """The stages next to ``position`` (where ``n`` and ``p`` go) whose view is not built yet."""
    stages, views = g.stages, _cache(g).views
    return [stages[i] for i in (position + 1, position - 1)
            if 0 <= i < len(stages) and stages[i].index not in views]


def ahead(g: GraphRecord, position: int) -> list[StageInfo]:
    """The snapshots to read ahead of ``position`` in ``g.stages``: the nearest other snapshot
    after it, then before it, where not read yet (several stages may share one)."""
    stages = g.stages
    here = snapshot_at(g, stages[position]) if 0 <= position < len(stages) else None
    shown = here.file if here is not None else None

    def other(s: StageInfo) -> bool:  # a snapshot of its own
        return bool(s.file) and s.file != shown
    after = next((s for s in stages[position + 1:] if other(s)), None)
    before = next((s for s in reversed(stages[:max(0, position)]) if other(s)), None)
    return [s for s in (after, before) if s is not None and not lines_ready(g, s)]


def read_ahead(g: GraphRecord, position: int, cancelled: Callable[[], bool]) -> None:
    """Read the snapshots ``ahead`` of ``position`` and their node lines, then build the views
    of its ``neighbours``, so that the next ``n`` or ``p`` finds them ready (a view marking a
    large change, with the removed nodes merged in, took 40 ms and more on the UI thread);
    stops when ``cancelled()``."""
    for s in ahead(g, position):
        if cancelled():
            return
        graph = g.stage_graph(s)
        if graph is not None and not cancelled():
            snapshot_lines(g, s, graph)
    for s in neighbours(g, position):  # and the views of the stages n and p go to
        if cancelled():
            return
        stage_view(g, s)


def stage_view_ready(g: GraphRecord, stage: StageInfo) -> bool:
    """Whether ``stage_view(g, stage)`` reads nothing — its snapshot (and, where the stage
    removed nodes, the one before) parsed, their lines made: then it is quick enough to run
    where the key was pressed, and the stage is shown in the same frame."""
    if stage.index in _cache(g).views:
        return True
    shown = snapshot_at(g, stage)
    if shown is None:
        return True
    if not lines_ready(g, shown):
        return False
    if not stage.file:
        return True
    prev = previous_snapshot(g, stage)
    return prev is None or g.is_cached(prev) or not g.stage_changes(stage)["removed"]


def stage_view(g: GraphRecord, stage: StageInfo) -> StageView:
    """The view of ``stage`` (built once per stage: stepping back finds it, and the read-ahead
    builds the next ones)."""
    views = _cache(g).views
    view = views.get(stage.index)
    if view is None:
        view = _build_stage_view(g, stage)
        view.text_width()
        view = views.setdefault(stage.index, view)
    return view


def _build_stage_view(g: GraphRecord, stage: StageInfo) -> StageView:
    shown = snapshot_at(g, stage)
    graph = g.stage_graph(shown) if shown else None
    no_changes: dict[str, list[str]] = {"added": [], "removed": [], "changed": []}
    if graph is None:
        note = ("no graph snapshot at or before this stage" if shown is None
                else f"the snapshot {shown.file} could not be read (see the overview's problems)")
        return StageView(stage, shown, None, [], no_changes, note)
    assert shown is not None
    base = snapshot_lines(g, shown, graph)
    if not stage.file:
        as_of = f"showing the graph as of [{shown.index}] {shown.name}"
        if stage.kind == "pass" and stage.changed is None:  # imported: only its time is known
            why = schema.NOT_IN_LOG if g.trace.not_in_log("per-pass snapshots") else "not recorded"
            note = f"changed? {why}; {as_of}"
        elif stage.kind == "pass":
            note = f"this pass changed nothing; {as_of}"
        else:
            note = f"no snapshot at this stage; {as_of}"
        return StageView(stage, shown, graph, base, no_changes, note)
    changes = g.stage_changes(stage)
    added, changed = set(changes["added"]), set(changes["changed"])
    removed = set(changes["removed"])
    prev_info = previous_snapshot(g, stage)
    prev = g.stage_graph(prev_info) if prev_info and removed else None
    note = ""
    if prev_info is None and len(added) >= len(graph):
        added = set()  # the first snapshot "adds" every node: nothing to highlight
        note = FIRST_SNAPSHOT
    if not (added or changed or removed):
        return StageView(stage, shown, graph, base, changes, note, prev)
    by_name = {ln.node: ln for ln in base}
    lines: list[GraphLine] = []
    if removed and prev is not None:
        order = merge_removed([ln.node for ln in base], [n.name for n in prev.nodes], removed)
    else:
        order = [(ln.node, False) for ln in base]
    for name, is_removed in order:
        if is_removed:
            node = prev.get(name) if prev is not None else None
            lines.append(GraphLine(name, node_line(node) if node else name, REMOVED))
            continue
        ln = by_name[name]
        mark = ADDED if name in added else CHANGED if name in changed else SAME
        lines.append(ln if mark == SAME else GraphLine(name, ln.text, mark))
    if removed and prev is None:
        note = (note + "; " if note else "") + f"{len(removed)} removed (previous graph unreadable)"
    return StageView(stage, shown, graph, lines, changes, note, prev)


# -- IR and fusion ---------------------------------------------------------------------------------


def ir_nodes(ir: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not isinstance(ir, dict):
        return []
    return [n for n in ir.get("nodes") or [] if isinstance(n, dict)]


def ir_node_line(n: dict[str, Any], group: str | None = None) -> str:
    """``op3  Scheduler [reduction]  ⇒ op0_op1_op2_op3  buf2 → buf3  (add, rsqrt)``"""
    flags = [f for f, key in (("reduction", "is_reduction"), ("extern", "is_extern"),
                              ("template", "is_template")) if n.get(key)]
    members = n.get("members") or []
    kind = str(n.get("type") or "?").replace("SchedulerNode", "")
    head = f"{n.get('name', '?')}  {kind or 'Scheduler'}"
    if len(members) > 1:
        head += f" ×{len(members)}"
    if flags:
        head += f" [{', '.join(flags)}]"
    if group and group != n.get("name"):
        head += f"  ⇒ {group}"
    origins = ", ".join(str(o) for o in (n.get("origins") or [])[:8])
    more = len(n.get("origins") or []) - 8
    if more > 0:
        origins += f", +{more}"
    writes = ",".join(str(w) for w in n.get("writes") or [])
    reads = ",".join(str(r) for r in n.get("reads") or [])
    return f"{head}  {reads or '∅'} → {writes or '∅'}  ({origins})"


def group_of(post: list[dict[str, Any]]) -> dict[str, str]:
    """pre-fusion node name → the post-fusion node it ended up in."""
    out: dict[str, str] = {}
    for n in post:
        for m in n.get("members") or [n.get("name")]:
            out[str(m)] = str(n.get("name"))
    return out


def fusion_line(d: dict[str, Any]) -> str:
    if d.get("action") == "fused":
        return f"fused     {d.get('node1')} + {d.get('node2')} → {d.get('result', '?')}"
    return f"rejected  {d.get('node1')} × {d.get('node2')}: {d.get('reason', '?')}"


def fusion_reasons(decisions: list[dict[str, Any]]) -> list[tuple[str, int]]:
    c = Counter(str(d.get("reason", "?")) for d in decisions if d.get("action") != "fused")
    return c.most_common()


# -- autotuning ------------------------------------------------------------------------------------


def autotune_rows(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The choices of one tuned op, fastest first, errors last."""
    choices = [c for c in entry.get("choices") or [] if isinstance(c, dict)]

    def key(c: dict[str, Any]) -> tuple[int, float]:
        t = c.get("time_ms")
        ok = isinstance(t, (int, float)) and not c.get("error")
        return (0 if ok else 1, float(t) if ok else 0.0)
    return sorted(choices, key=key)


def winner_name(entry: dict[str, Any]) -> str | None:
    w = entry.get("winner")
    if isinstance(w, dict):
        return str(w.get("name"))
    return str(w) if w is not None else None


# -- Dynamo compiles ---------------------------------------------------------------------------

def guards_text(counts: dict[str, Any], *, brief: bool = False) -> str:
    """``dynamic.guard_counts`` in a few words: ``841 (12 on sizes)`` (``brief``: ``841``), or
    – (a frame Dynamo gave up on has none)."""
    if counts.get("count") is None:
        return "–"
    return str(counts["count"]) + (f" ({counts['shape']} on sizes)"
                                   if counts.get("shape") and not brief else "")


def compile_failure(metrics: dict[str, Any]) -> str | None:
    """Why Dynamo's compile of a frame failed (``fail_type: fail_reason``'s cause and
    explanation on one line: the recompile limit, a constraint violation, an error), or None."""
    kind, reason = metrics.get("fail_type"), str(metrics.get("fail_reason") or "").strip()
    if not kind and not reason:
        return None
    first = dynamo_message(reason) if reason else ""
    return f"{kind}: {first}" if kind and first else str(kind or first)


def compile_detail(cid: str, compiles: dict[str, dict[str, Any]],
                   shapes: dict[str, Any] | None = None) -> str:
    """Everything recorded about Dynamo compile ``cid`` of ``compiles``, as text: where, graphs,
    graph breaks, recompile reasons, cache events, counters and the guards Dynamo installed."""
    c = compiles[cid]
    m = c.get("metrics") or c.get("summary") or {}
    place = compile_place(compiles, cid)
    out = [f"compile {cid}: {place['function'] or '?'} at {place['file'] or '?'}:"
           f"{place['line'] or '?'}",
           f"graphs: {', '.join(c.get('graphs') or []) or 'none'}",
           f"guards: {guards_text(guard_counts(c, shapes or {}))}   "
           f"cache: {compile_cache(c)}"]
    failed = compile_failure(m)
    out += [f"failed: {failed}"] if failed else []
    out.append("")

    def section(title: str, items: list[Any]) -> None:
        if items:
            out.append(f"── {title}")
            for r in items:
                text = str(r.get("reason") or r.get("msg") or r) if isinstance(r, dict) else str(r)
                out.extend("  " + ln for ln in text.strip().splitlines())
            out.append("")
    section("graph breaks", list(c.get("dynamo_graph_break_reason") or []))
    section("recompiled because", reasons_of(c))
    section("cache events", [" ".join(f"{k}={v}" for k, v in e.items() if k in (
        "cache", "result", "graph", "key", "time_saved_ms", "line")) for e in c.get("cache") or []
        if isinstance(e, dict)])
    counters = c.get("counters") or {}
    section("counters", [f"{k}: {v}" for k, v in counters.items() if v])
    guards = str(c.get("guards") or "").strip("\n")
    out.append("── guards")
    out.extend(guards.splitlines() if guards else ["  not recorded"])
    return "\n".join(out)
