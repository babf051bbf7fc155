"""``graphs/<id>/meta.json`` as one typed record: a compiled graph's stages, phase times,
fusion counts, CUDA graphs and cache use.

:class:`GraphMeta` is what every reader of a graph's meta gets (``GraphRecord.meta``): read
through the trace's safe reader (confined, capped, checked against its shape in ``shapes.py``)
and made into fields once here, so that a reader need not read the writer to learn the keys. A
key this version does not name is kept in ``extra``. The writer's side is
``layout.graph_meta``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

from tuidebug.trace.format import safefile
from tuidebug.trace.format.fields import opt_int, opt_str


def _seconds(value: Any) -> dict[str, float]:
    """A ``{phase: seconds}`` object with its numbers kept (anything else left out)."""
    items = value.items() if isinstance(value, dict) else []
    return {str(k): t for k, v in items if (t := safefile.number(v)) is not None}


class StageCounts(TypedDict):
    added: int
    removed: int
    changed: int


class StageChanges(TypedDict):
    """Node names a stage ``added``, ``removed`` and ``changed``."""

    added: list[str]
    removed: list[str]
    changed: list[str]


class StageEntry(TypedDict, total=False):
    """One entry of ``meta.json``'s stage list as the writers build it (capture, the
    importers): a dict, because each writer gives only the keys it knows (a pass that changed
    nothing has no ``file``, ``nodes`` or ``counts``) and the file keeps exactly those. The
    reader makes each a :class:`StageInfo`."""

    index: int
    name: str
    kind: str  # "stage" or "pass"
    subsystem: str | None
    duration_s: float | None
    changed: bool | None
    file: str | None
    nodes: int | None
    counts: StageCounts
    note: str
    changes: StageChanges  # a snapshot stored once for several stages: this stage's own


@dataclass
class StageInfo:
    """One entry of a graph's stage list: a snapshot (``stage``) or an Inductor pass."""

    index: int
    name: str
    kind: str  # "stage" or "pass"
    subsystem: str | None
    duration_s: float | None
    changed: bool | None  # None: not known (an imported log times passes, never snapshots)
    added: int
    removed: int
    modified: int
    file: str | None
    nodes: int | None
    note: str | None = None
    # the stage's own changes when its entry holds them: a snapshot stored once and named by
    # several stages (docs/trace-format.md) keeps the first one's changes in its file
    changes: dict[str, list[str]] | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "StageInfo":
        counts = d.get("counts") or {}
        return cls(
            index=int(d.get("index", 0)), name=str(d.get("name", "?")),
            kind=str(d.get("kind", "stage")), subsystem=d.get("subsystem"),
            duration_s=d.get("duration_s"),
            changed=None if "changed" in d and d["changed"] is None else bool(d.get("changed")),
            added=int(counts.get("added", 0)), removed=int(counts.get("removed", 0)),
            modified=int(counts.get("changed", 0)), file=d.get("file"), nodes=d.get("nodes"),
            note=str(d["note"]) if d.get("note") else None,
            changes=node_changes(d) if isinstance(d.get("changes"), dict) else None,
        )


def node_changes(data: Any) -> dict[str, list[str]]:
    """The ``changes`` of a snapshot file or a stage entry: node names ``added``,
    ``removed``, ``changed`` (a wrongly typed list reads as empty)."""
    ch = (data.get("changes") if isinstance(data, dict) else None) or {}
    if not isinstance(ch, dict):
        ch = {}
    return {k: [str(x) for x in v] if isinstance(v := ch.get(k), list) else []
            for k in ("added", "removed", "changed")}


NO_CHANGES: dict[str, list[str]] = {"added": [], "removed": [], "changed": []}


@dataclass(frozen=True)
class FusionCounts:
    """How many fusions a graph made and turned down. ``recorded``: False for an import that
    knows only the count of fused nodes (no decisions); None counts: not recorded at all."""

    fused: int | None = None
    rejected: int | None = None
    recorded: bool = True

    @classmethod
    def from_json(cls, value: Any) -> "FusionCounts":
        d = value if isinstance(value, dict) else {}
        return cls(opt_int(d.get("fused")), opt_int(d.get("rejected")),
                   d.get("recorded", True) is not False)


@dataclass(frozen=True)
class CudaGraphs:
    """Whether this graph's compile asked for CUDA graphs, and each reason Inductor gave to
    skip them."""

    enabled: bool = False
    skipped: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, value: Any) -> "CudaGraphs | None":
        if not isinstance(value, dict):
            return None
        skipped = value.get("skipped")
        return cls(bool(value.get("enabled")),
                   tuple(str(r) for r in skipped) if isinstance(skipped, list) else ())


@dataclass
class GraphMeta:
    """``meta.json`` of one graph (docs/trace-format.md). ``phase_times_s``: seconds spent in
    each phase; ``phase_starts_s``: when each began (None in traces older than it, whose
    ``phase_times_s`` held the start offsets). ``cache``: an imported log's cache result per
    cache (``{"fx_graph": "hit"}``), None for a capture."""

    id: str | None = None
    kind: str | None = None
    compile_id: str | None = None
    status: str | None = None
    stages: list[StageInfo] = field(default_factory=list)
    phase_times_s: dict[str, float] = field(default_factory=dict)
    phase_starts_s: dict[str, float] | None = None
    kernels: int | None = None
    fusion: FusionCounts = field(default_factory=FusionCounts)
    cudagraphs: CudaGraphs | None = None
    cache: dict[str, Any] | None = None
    ddp_bucket: dict[str, Any] | None = None  # DDPOptimizer: which gradient bucket this is
    extra: dict[str, Any] = field(default_factory=dict)  # every key not named above

    _NAMED = ("id", "kind", "compile_id", "status", "stages", "phase_times_s", "phase_starts_s",
              "kernels", "fusion", "cudagraphs", "cache", "ddp_bucket")

    @classmethod
    def from_json(cls, data: Any) -> "GraphMeta":
        """The meta in ``data`` (parsed JSON, shape-checked: a field of the wrong type reads as
        absent)."""
        d = data if isinstance(data, dict) else {}
        stages = d.get("stages")
        starts = d.get("phase_starts_s")
        cache, bucket = d.get("cache"), d.get("ddp_bucket")
        return cls(
            id=opt_str(d.get("id")), kind=opt_str(d.get("kind")),
            compile_id=opt_str(d.get("compile_id")), status=opt_str(d.get("status")),
            stages=[StageInfo.from_json(s) for s in stages if isinstance(s, dict)]
            if isinstance(stages, list) else [],
            phase_times_s=_seconds(d.get("phase_times_s")),
            phase_starts_s=_seconds(starts) if isinstance(starts, dict) else None,
            kernels=opt_int(d.get("kernels")), fusion=FusionCounts.from_json(d.get("fusion")),
            cudagraphs=CudaGraphs.from_json(d.get("cudagraphs")),
            cache=cache if isinstance(cache, dict) else None,
            ddp_bucket=bucket if isinstance(bucket, dict) else None,
            extra={k: v for k, v in d.items() if k not in cls._NAMED},
        )

    def phase_durations(self) -> list[tuple[str, float]]:
        """(phase, seconds spent in it), in the order the phases ran."""
        starts = self.phase_starts_s or {}
        times = self.phase_times_s
        order = sorted(times, key=lambda k: starts.get(k, 0.0)) if starts else list(times)
        return [(k, max(0.0, times[k])) for k in order]
