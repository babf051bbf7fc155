"""Reads a trace directory lazily and defensively.

Nothing is parsed before it is asked for; a missing or corrupt file is reported by name in
``Trace.problems`` and the rest of the trace still opens. Only JSON and text are ever read:
a trace may come from someone else, so nothing in it is unpickled or executed. ``Trace`` is
the trace (manifest, graphs, trace-level files); each graph is a ``GraphRecord``
(``graph_record.py``), importable from here too, as the reader's face.
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator

from tuidebug.errors import TraceError
from tuidebug.trace.format import layout, schema, shapes, user_lines
from tuidebug.trace.format.error_record import ErrorRecord
from tuidebug.trace.format.graph_meta import GraphMeta, StageInfo
from tuidebug.trace.format.graph_record import GraphRecord
from tuidebug.trace.format.manifest import GraphEntry, Manifest, is_safe_name, live_status
from tuidebug.trace.format.tracefiles import Problem, TraceFiles
from tuidebug.trace.format.written import Written

__all__ = ["GraphMeta", "GraphRecord", "Problem", "StageInfo", "Trace", "TraceError"]


class Trace:
    """A trace directory opened for reading."""

    def __init__(self, path: str | os.PathLike[str], *, written: Written | None = None) -> None:
        """``written``: what this trace's writer wrote in this process (``format/written.py``):
        those JSON documents are read from memory, not from the files (``tuidebug import``'s
        summary of the trace it has just written)."""
        self.root = Path(path)
        if not self.root.exists():
            raise TraceError(f"no such trace: {self.root}")
        if not self.root.is_dir():
            raise TraceError(f"not a trace directory: {self.root}")
        self._files = TraceFiles(self.root, written)
        manifest_path = self.root / schema.MANIFEST
        if not manifest_path.exists():
            if not (self.root / schema.GRAPHS_DIR).is_dir():
                raise TraceError(f"{self.root} is not a tuidebug trace (no {schema.MANIFEST})")
            self._files.problem(manifest_path, "missing; graphs found by scanning the directory")
        self.manifest = Manifest.from_json(
            self._files.json(manifest_path, {}, kind="manifest") or {})
        version = self.manifest.format_version
        if version is not None and version > schema.FORMAT_VERSION:
            self._files.problem(
                manifest_path,
                f"format version {version} is newer than this tuidebug understands "
                f"({schema.FORMAT_VERSION}); showing what can be read — upgrade tuidebug")
        self._graphs: list[GraphRecord] | None = None

    @property
    def problems(self) -> list[Problem]:
        return self._files.problems

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def raw_status(self) -> str:
        return self.manifest.status or "unknown"

    @property
    def status(self) -> str:
        """ok | failed | crashed | stopped (a rank ended by ``--timeout``) | running (a live
        capture) | unknown."""
        return live_status(self.manifest)

    @property
    def phase(self) -> str | None:
        return self.manifest.phase

    @property
    def error(self) -> ErrorRecord | None:
        """The failure the trace ended with (the manifest's ``error``); None when none."""
        return self.manifest.error

    @property
    def graphs(self) -> list[GraphRecord]:
        if self._graphs is None:
            entries = self.manifest.graphs
            if entries is None:
                entries = self._scan_graphs()
            self._graphs = []
            for e in entries:
                if not is_safe_name(e.id):
                    self._files.problem(self.root / schema.MANIFEST,
                                        f"graph id {e.id!r} is not a plain folder name; skipped")
                    continue
                self._graphs.append(GraphRecord(self, e))
        return self._graphs

    def _scan_graphs(self) -> list[GraphEntry]:
        gdir = self.root / schema.GRAPHS_DIR
        out = []
        for d in sorted(gdir.iterdir()) if gdir.is_dir() else []:
            meta = GraphMeta.from_json(self._files.json(d / schema.META, {}, kind="meta"))
            out.append(GraphEntry(d.name, meta.kind or "?", meta.compile_id or "?"))
        return out

    def graph(self, graph_id: str) -> GraphRecord:
        for g in self.graphs:
            if g.id == graph_id:
                return g
        valid = ", ".join(g.id for g in self.graphs) or "none"
        raise KeyError(f"no graph {graph_id!r} in this trace; valid graphs: {valid}")

    def __iter__(self) -> Iterator[GraphRecord]:
        return iter(self.graphs)

    @property
    def imported_from(self) -> dict[str, Any] | None:
        """For a trace imported from a TORCH_TRACE log or a torch_compile_debug folder: its
        source (``kind``, ``path``, ``rank``, ``ranks``, ``missing`` …); None for a capture."""
        return self.manifest.imported_from

    def not_in_log(self, what: str) -> str | None:
        """``"<what …>: not in this log; trace with tuidebug to get it"`` when this trace was
        imported from a source that lacks ``what`` (e.g. "fusion decisions"), else None."""
        for m in (self.imported_from or {}).get("missing") or []:
            if str(m).startswith(what):
                return f"{m}: {schema.NOT_IN_LOG}"
        return None

    @cached_property
    def config(self) -> dict[str, Any]:
        return self._files.json(self.root / schema.CONFIG, {}, kind="config") or {}

    @cached_property
    def advice(self) -> dict[str, Any]:
        """``advice.json`` (``tuidebug advise --try``): ``suggestions``, ``tried``; {} if none."""
        return self._files.json(self.root / schema.ADVICE, {}, kind="advice") or {}

    @cached_property
    def numerics_classified(self) -> dict[str, Any]:
        """``numerics.json`` (``tuidebug numerics``): ``compiles``, each compile's first
        diverging kernel classified by re-runs; {} if none."""
        return self._files.json(self.root / schema.NUMERICS, {}, kind="numerics") or {}

    @cached_property
    def runtime(self) -> dict[str, Any]:
        return self._files.json(self.root / schema.RUNTIME, {}, kind="runtime") or {}

    @cached_property
    def vllm(self) -> dict[str, Any]:
        """``vllm.json`` of a trace imported from a vLLM log (config, piecewise compiles,
        dumps), checked against its shape; {} for any other trace."""
        return self._files.json(self.root / schema.VLLM, {}, kind="vllm") or {}

    @cached_property
    def profile(self) -> dict[str, Any]:
        """``profile.json`` (``tuidebug trace --profile``): ``compiles`` per compile id, each
        checked against its shape; {} when the trace was not profiled."""
        path = self.root / schema.PROFILE
        data = self._files.json(path, {}, kind="profile") or {}
        compiles: dict[str, Any] = {}
        for cid, c in (data.get("compiles") or {}).items():
            checked = shapes.check("profile_compile", c,
                                   lambda m, cid=cid: self._files.problem(path, f"{cid}: {m}"))
            if checked is not None:
                compiles[str(cid)] = checked
        return {**data, "compiles": compiles} if data else {}

    @cached_property
    def compiles(self) -> dict[str, dict[str, Any]]:
        """Per Dynamo compile id: metrics, guards, graph breaks, recompile reasons."""
        return {c["id"]: self._compile(c) for c in self.manifest.compiles if "id" in c}

    def compiles_failed(self) -> dict[str, dict[str, Any]]:
        """Every compile as ``compiles`` gives it, but only those whose manifest summary has
        a ``fail_type`` read from their file (their failure's reason is there); the others are
        their manifest summaries (function, file, line): what the script's failed compile is
        found from (``summary.failed_compile``), without reading every compile's file."""
        return {c["id"]: self._compile(c) if (c.get("summary") or {}).get("fail_type") else c
                for c in self.manifest.compiles if "id" in c}

    def _compile(self, c: dict[str, Any]) -> dict[str, Any]:
        detail = self._files.json(
            self.root / schema.COMPILES_DIR / f"{layout.safe_id(str(c['id']))}.json", {},
            kind="compile") or {}
        return {**c, **detail}

    def compile_shapes(self, compile_id: str) -> dict[str, Any]:
        """``compiles/<id>.shapes.json`` of a compile: ``symbols``, ``guards``,
        ``specializations``, ``recompile`` (validated; {} when the trace has none)."""
        cache = self.__dict__.setdefault("_shapes_cache", {})
        if compile_id not in cache:
            path = (self.root / schema.COMPILES_DIR
                    / f"{layout.safe_id(compile_id)}{schema.SHAPES_SUFFIX}")
            data = self._files.json(path, {}, kind="compile_shapes")
            cache[compile_id] = user_lines.clean(data or {})
        return cache[compile_id]

    def compile_shapes_brief(self, compile_id: str) -> dict[str, Any]:
        """What ``compile_shapes`` holds but the guards, with ``guard_counts`` (``kept``,
        ``shape``): ``compiles/<id>.shapes-brief.json``, or (a trace made before it) made from
        ``compile_shapes``. The guards are most of that file (thousands on a deep model, each
        with its source context): info and the overview need only their counts."""
        cache = self.__dict__.setdefault("_shapes_brief_cache", {})
        if compile_id not in cache:
            path = (self.root / schema.COMPILES_DIR
                    / f"{layout.safe_id(compile_id)}{schema.SHAPES_BRIEF_SUFFIX}")
            if self._files.exists(path):
                data = self._files.json(path, {}, kind="compile_shapes_brief") or {}
                counts = data.get("guard_counts") or {}
                if not ("kept" in counts and "shape" in counts):  # cut by the check: unknown
                    data.pop("guard_counts", None)
                cache[compile_id] = user_lines.clean(data)
            elif compile_id in self.__dict__.get("_shapes_cache", {}):
                cache[compile_id] = layout.shapes_brief(self.compile_shapes(compile_id))
            else:  # the guards counted, not read one by one (their user lines left unread)
                full = (self.root / schema.COMPILES_DIR
                        / f"{layout.safe_id(compile_id)}{schema.SHAPES_SUFFIX}")
                data = self._files.json(full, {}, kind="compile_shapes") or {}
                cache[compile_id] = user_lines.clean(layout.shapes_brief(data))
        return cache[compile_id]

    def compile_cache_lookups(self, compile_id: str) -> list[dict[str, Any]]:
        """``compiles/<id>.cache.json`` of a compile: its graph-cache lookups in order, each
        with ``compile_id`` (validated; [] when the trace has none)."""
        path = (self.root / schema.COMPILES_DIR
                / f"{layout.safe_id(compile_id)}{schema.CACHE_SUFFIX}")
        data = self._files.json(path, {}, kind="compile_cache") or {}
        return [{**lk, "compile_id": compile_id} for lk in data.get("lookups") or []]

    def cache_lookups(self) -> list[dict[str, Any]]:
        """Every graph-cache lookup of the trace, compile by compile."""
        return [lk for cid in self.compiles for lk in self.compile_cache_lookups(cid)]
