"""One compiled graph of a trace, read lazily and defensively: its meta, snapshots (JSON, or
printed FX text parsed when first read), their changes, IR, fusion decisions, kernels, code,
provenance, collectives, autotuning, error, launches and timings (``Trace.graphs`` makes them).

As everywhere in the reader, only JSON and text are read, through the trace's confined files
(``tracefiles``); a missing or corrupt file becomes a problem of the trace, by name.
"""

from __future__ import annotations

import collections
import os
import threading
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuidebug.trace.format import compressed, layout, safefile, schema, shapes
from tuidebug.trace.format.error_record import ErrorRecord
from tuidebug.trace.format.graph import COMPUTE_OPS, Graph, plain_nodes
from tuidebug.trace.format.graph_meta import NO_CHANGES, GraphMeta, StageInfo, node_changes
from tuidebug.trace.format.kernel_entry import KernelEntry
from tuidebug.trace.format.manifest import GraphEntry
from tuidebug.trace.format.tracefiles import MAX_TEXT_BYTES, TraceFiles
from tuidebug.trace.format.written import PEEK_BYTES

if TYPE_CHECKING:
    from tuidebug.trace.format.reader import Trace


_UNREAD = object()  # a file missing, refused or corrupt (reported): not JSON's null


class GraphRecord:
    """One compiled graph (a Dynamo frame compile × inference/forward/backward)."""

    def __init__(self, trace: "Trace", entry: GraphEntry) -> None:
        self.trace = trace
        self.id = entry.id
        self.kind = entry.kind
        self.compile_id = entry.compile_id
        self.status = entry.status
        self.dir = trace.root / schema.GRAPHS_DIR / self.id
        self._graph_cache: dict[str, Graph | None] = {}  # by snapshot file
        self._changes_cache: dict[str, dict[str, list[str]]] = {}  # by snapshot file
        self._fingerprints: dict[str, dict[str, Any]] = {}  # snapshot file -> its nodes' prints
        self._read_lock = threading.Lock()  # a snapshot read ahead and asked for meanwhile

    @property
    def _f(self) -> TraceFiles:
        return self.trace._files

    @cached_property
    def meta(self) -> GraphMeta:
        """``meta.json``: stages, phase times, fusion counts, CUDA graphs, cache use."""
        return GraphMeta.from_json(
            self._f.json(self.dir / schema.META, {}, required=True, kind="meta"))

    @property
    def stages(self) -> list[StageInfo]:
        return self.meta.stages

    def snapshots(self) -> list[StageInfo]:
        return [s for s in self.stages if s.file]

    def stage_graph(self, stage: StageInfo | int) -> Graph | None:
        """The graph of a stage's snapshot (parsed once per file: stages that share a file,
        a snapshot stored once, share the graph)."""
        info = stage if isinstance(stage, StageInfo) else self.stages[stage]
        if not info.file:
            return None
        if info.file in self._graph_cache:
            return self._graph_cache[info.file]
        with self._read_lock:  # parsed once, even when two threads ask at the same time
            if info.file not in self._graph_cache:
                self._graph_cache[info.file] = self._read_graph(info.file)
        return self._graph_cache[info.file]

    def _read_graph(self, file: str) -> Graph | None:
        if not layout.is_fx_text(file):
            return self._read_json_graph(file)
        graph = None
        path = self.dir / file
        first = self._first_with_file(file)
        data = self._snapshot_data(first.name if first else Path(file).stem, file)
        if data is not None:
            try:
                data["changes"] = self._text_changes(file, data["nodes"])
                self._changes_cache[file] = node_changes(data)
                graph = Graph.from_json(data)
            except (ValueError, TypeError, AttributeError) as e:
                self._f.problem(path, f"not a graph snapshot ({e})")
        return graph

    def _read_json_graph(self, file: str) -> Graph | None:
        """A JSON snapshot's graph, checked against the snapshot's shape as every file is
        (``shapes.check``; its problems reported): where every node is plain
        (``graph.plain_nodes``: the nodes then hold nothing the check would change), only the
        rest of the file is checked, and the nodes are made as they are checked."""
        path = self.dir / file
        data = self._f.json(path, _UNREAD, required=True)  # checked here, not as it is read
        if data is _UNREAD:
            return None
        report = lambda m: self._f.problem(path, m)  # noqa: E731
        nodes = plain_nodes(data.get("nodes")) if isinstance(data, dict) else None
        if nodes is None:
            data = shapes.check("snapshot", data, report)
        else:
            data = shapes.check("snapshot", {**data, "nodes": None}, report)
        if not isinstance(data, dict):
            return None
        try:
            self._changes_cache[file] = node_changes(data)
            return Graph(nodes, str(data.get("graph", "")), str(data.get("stage", ""))) \
                if nodes is not None else Graph.from_json(data)
        except (ValueError, TypeError, AttributeError) as e:
            self._f.problem(path, f"not a graph snapshot ({e})")
            return None

    def is_cached(self, stage: StageInfo) -> bool:
        """Whether the stage's snapshot was read already (reading it again costs nothing)."""
        return not stage.file or stage.file in self._graph_cache

    def _first_with_file(self, file: str) -> StageInfo | None:
        return next((s for s in self.stages if s.file == file), None)

    def _snapshot_data(self, stage: str, file: str) -> dict[str, Any] | None:
        """A snapshot file as the snapshot JSON shape: read, or, for a graph kept as the text a
        log printed (``….txt``), parsed from it (its problems reported)."""
        path = self.dir / file
        if not layout.is_fx_text(file):
            data = self._f.json(path, None, required=True, kind="snapshot")
            return data if isinstance(data, dict) else None
        text = self._f.text(path, safefile.MAX_JSON_BYTES)
        if text is None:
            if self._f.missing(path):
                self._f.problem(path, "missing")
            return None
        from tuidebug.trace.format import fxtext  # only for a trace imported from a log

        parsed = fxtext.parse_graph(text)
        for p in parsed.problems:
            self._f.problem(path, p)
        return parsed.to_json(self.id, stage)

    def _text_changes(self, file: str, nodes: list[dict[str, Any]]) -> dict[str, list[str]]:
        """What the snapshot ``file`` changed against the one before it (the import stores a
        printed graph without comparing it: compared here, when it is read)."""
        prev = None
        for s in self.stages:
            if s.file == file:
                break
            if s.file:
                prev = s
        fp = self._fingerprints[file] = layout.fingerprint_nodes(nodes)
        if prev is None or prev.file is None:
            return {"added": list(fp), "removed": [], "changed": []}
        old = self._fingerprints.get(prev.file)
        if old is None:
            before = self._snapshot_data(prev.name, prev.file)
            nodes_before = before.get("nodes") if before is not None else None
            if not isinstance(nodes_before, list):
                return {"added": list(fp), "removed": [], "changed": []}
            old = self._fingerprints[prev.file] = layout.fingerprint_nodes(
                n for n in nodes_before if isinstance(n, dict) and "name" in n)
        return layout.diff_fingerprints(old, fp)

    def stage_changes(self, stage: StageInfo) -> dict[str, list[str]]:
        """Node names a pass added/removed/changed: the stage entry's own (a snapshot stored
        once for several stages), else those in the snapshot file — which are the changes of
        the first stage that names that file; a later stage naming it without changes of its
        own (an imported log's unchanged graph) changed nothing."""
        if not stage.file:
            return NO_CHANGES
        if stage.changes is not None:
            return stage.changes
        first = self._first_with_file(stage.file)
        if first is not None and first.index != stage.index:
            return NO_CHANGES
        if stage.file not in self._changes_cache and layout.is_fx_text(stage.file):
            self.stage_graph(stage)  # compared when it is parsed
        if stage.file not in self._changes_cache:
            self._changes_cache[stage.file] = node_changes(
                self._f.json(self.dir / stage.file, {}, kind="snapshot") or {})
        return self._changes_cache[stage.file]

    def same_file(self, other: "GraphRecord", rel: str) -> bool:
        """Whether this graph's file ``rel`` (relative to its directory) and ``other``'s hold
        the same bytes (False when either is missing or refused): a comparison then reads it
        once."""
        mine, theirs = self.dir / rel, other.dir / rel
        size = self._f.stored_size(mine)
        if size is None or size != other._f.stored_size(theirs):
            return False  # not the same bytes: neither is read to tell
        a = self.digest(rel)
        return a is not None and a == other.digest(rel)

    def digest(self, rel: str) -> str | None:
        """A digest of the bytes of this graph's file ``rel`` (``TraceFiles.digest``: worked
        out once per file)."""
        return self._f.digest(self.dir / rel)

    def find_stage(self, name: str) -> StageInfo | None:
        index = int(name) if name.isdigit() else None
        for s in self.stages:
            if s.name == name or s.index == index or (s.file and (
                    Path(s.file).stem == name
                    or Path(layout.stage_file(s.index, s.name)).stem == name)):
                return s
        return None

    def final_graph(self) -> Graph | None:
        snaps = self.snapshots()
        return self.stage_graph(snaps[-1]) if snaps else None

    def final_op_counts(self) -> collections.Counter[str]:
        """How many compute nodes (``graph.COMPUTE_OPS``) of each target the last snapshot
        holds. Counted from the snapshot's nodes without building its graph (``diff`` compares
        two traces' counts and shows neither graph: building four graphs was a third of its
        time on a 24-layer model); from the graph where it is read already, or where the file
        is not a well-formed JSON snapshot (read as ``final_graph``, its problems reported)."""
        snaps = self.snapshots()
        if not snaps:
            return collections.Counter()
        file = snaps[-1].file
        if file and file not in self._graph_cache and not layout.is_fx_text(file):
            data = self._f.json(self.dir / file, None)  # confined, capped, nesting bounded
            nodes = data.get("nodes") if isinstance(data, dict) else None
            if isinstance(nodes, list):
                counts: collections.Counter[str] = collections.Counter()
                for n in nodes:
                    op = n.get("op") if isinstance(n, dict) else None
                    target = n.get("target", "") if isinstance(n, dict) else None
                    if not isinstance(op, str) or not isinstance(target, str):
                        break  # not the snapshot shape: the graph's reading says what is wrong
                    if op in COMPUTE_OPS:
                        counts[target] += 1
                else:
                    return counts
        graph = self.final_graph()
        return collections.Counter(n.target for n in graph.compute_nodes()) if graph else \
            collections.Counter()

    @cached_property
    def ir_pre(self) -> dict[str, Any] | None:
        return self._f.json(self.dir / f"{schema.IR_PRE}.json", kind="ir")

    @cached_property
    def ir_post(self) -> dict[str, Any] | None:
        return self._f.json(self.dir / f"{schema.IR_POST}.json", kind="ir")

    def ir_text(self, which: str) -> str | None:
        name = schema.IR_PRE if which == "pre" else schema.IR_POST
        return self._f.text(self.dir / f"{name}.txt")

    @cached_property
    def fusion(self) -> list[dict[str, Any]]:
        return self._f.jsonl(self.dir / schema.FUSION, "fusion")

    @cached_property
    def kernels(self) -> list[KernelEntry]:
        """``code/kernels.json``: the generated kernels and the extern calls, in its order."""
        data = self._f.json(self.dir / schema.KERNELS_INDEX, None, kind="kernels")
        if data is None:
            return []
        return [KernelEntry.from_json(k) for k in data.get("kernels", []) if isinstance(k, dict)]

    def kernel(self, name: str) -> KernelEntry | None:
        return next((k for k in self.kernels if k.name == name), None)

    def code(self, relpath: str) -> str | None:
        return self._f.text(self.dir / str(relpath))

    def wrapper_code(self) -> str | None:
        return self._f.text(self.dir / schema.WRAPPER)

    @cached_property
    def provenance(self) -> dict[str, Any]:
        path = self.dir / schema.PROVENANCE
        data = self._f.json(path, {}, kind="provenance") or {}
        return _clean_provenance(data, lambda m: self._f.problem(path, m))

    @cached_property
    def collectives(self) -> dict[str, Any]:
        """``collectives.json``: the collectives this graph issues, in program order (empty
        when it issues none, or the trace predates them)."""
        return self._f.json(self.dir / schema.COLLECTIVES, {}, kind="collectives") or {}

    @cached_property
    def autotune(self) -> list[dict[str, Any]]:
        # a trace written before capture skipped them may hold the config autotuning of a
        # max-autotune choice (a "Placeholder.…" kernel being benchmarked): not a tuned op
        return [r for r in self._f.jsonl(self.dir / schema.AUTOTUNE, "autotune")
                if not (isinstance(r, dict) and r.get("kind") == "triton_heuristics"
                        and str(r.get("op", "")).startswith("Placeholder."))]

    @cached_property
    def error(self) -> ErrorRecord | None:
        """``error.json``: how this graph failed; None when it did not."""
        return ErrorRecord.from_json(self._f.json(self.dir / schema.ERROR, kind="error"))

    @cached_property
    def launches(self) -> dict[str, dict[str, Any]]:
        """Triton launch metadata by kernel name (block sizes, warps, stages, registers…)."""
        return {str(r.get("kernel")): r for r in self._f.jsonl(self.dir / schema.LAUNCHES, "launches")
                if isinstance(r, dict)}

    @cached_property
    def _timings_file(self) -> Any:
        """``code/timings.json`` as read (None when absent): read once for what comes of it."""
        return self._f.json(self.dir / schema.TIMINGS, None, kind="timings")

    @cached_property
    def timings(self) -> dict[str, dict[str, Any]]:
        """Compile and run time per kernel name (``code/timings.json``); empty when not measured."""
        data = self._timings_file
        kernels = data.get("kernels") if isinstance(data, dict) else None
        return {str(k): v for k, v in kernels.items() if isinstance(v, dict)} \
            if isinstance(kernels, dict) else {}

    @cached_property
    def timed_runs(self) -> int | None:
        """How many times the graph's kernels were run to time them (``code/timings.json``'s
        ``run.runs``); None when not recorded."""
        data = self._timings_file
        run = data.get("run") if isinstance(data, dict) else None
        runs = run.get("runs") if isinstance(run, dict) else None
        return runs if isinstance(runs, int) and not isinstance(runs, bool) else None

    def check_files(self) -> None:
        """Cheap integrity check of the files this graph references (stat and a peek; no
        parsing): missing snapshots, missing, binary or huge code files become problems."""
        if not os.path.lexists(self.dir):
            return  # reported once, as meta.json missing
        for file in dict.fromkeys(st.file for st in self.snapshots() if st.file):
            path = self.dir / file
            if not self._f.exists(path) and self._f.missing(path):
                self._f.problem(path, "missing")
                continue
            if layout.is_fx_text(file):
                continue  # a printed graph: what is wrong with it is told when it is read
            kept = self._f.written(path)  # written whole by this process: its end is known
            if kept is not None:
                if not kept.tail.rstrip().endswith(b"}"):
                    self._f.problem(path, "cut short (not a complete JSON object); not read")
                continue
            # a snapshot's node count comes from the stage list (not parsed here): its last
            # bytes tell a file cut short (a JSON object ends with "}"); one stored compressed
            # (NAME.gz, format 2) is peeked at too: its head and its last bytes of content,
            # read from its end (compressed.tail; an older trace's is decompressed to its end)
            try:
                if os.path.lexists(path):
                    tail: bytes | None = safefile.read_tail(self._f.confine(path), 64)[0]
                else:
                    packed = path.with_name(compressed.packed_name(path.name))
                    tail = compressed.tail(self._f.confine(packed), safefile.MAX_JSON_BYTES)
            except ValueError as e:  # a compressed stream cut short, or damaged
                if "cut short" not in str(e):
                    self._f.problem(path, f"corrupt ({e}); not read")
                    continue
                tail = b""
            except (safefile.Refused, OSError):
                continue  # reported when the snapshot itself is read
            if tail is not None and not tail.rstrip().endswith(b"}"):
                self._f.problem(path, "cut short (not a complete JSON object); not read")
        for rel in [k.file for k in self.kernels if k.file] + [schema.WRAPPER]:
            path = self.dir / rel
            kept = self._f.written(path)
            if kept is not None:  # written whole by this process: its head and size known
                binary, size = kept.binary, kept.size
            else:
                try:
                    real = self._f.confine(path)
                except safefile.Refused as e:
                    self._f.problem(path, str(e))
                    continue
                if not os.path.lexists(real):
                    if rel != schema.WRAPPER or self.kernels:
                        self._f.problem(path, "missing")
                    continue
                try:
                    head, size = safefile.read_bytes(real, PEEK_BYTES, truncate=True)
                except safefile.Refused as e:
                    self._f.problem(path, str(e))
                    continue
                except OSError as e:
                    self._f.problem(path, f"unreadable ({e.strerror or e})")
                    continue
                binary = b"\x00" in head
            if binary:
                self._f.problem(path, "binary content; not shown")
            elif size > MAX_TEXT_BYTES:
                self._f.problem(path, f"{size} bytes; only the first {MAX_TEXT_BYTES} are shown")


def _names(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _clean_provenance(data: dict[str, Any], report: Any) -> dict[str, Any]:
    """``provenance.json`` with the types its readers rely on: ``kernels`` maps a name to an
    object whose node lists hold names (strings) and whose ``source`` holds objects;
    ``fx_to_kernels`` and ``pre_to_post`` map a name to a list of names. What is not so is
    dropped and reported once."""
    bad: list[str] = []
    kernels: dict[str, Any] = {}
    for name, k in (data.get("kernels") or {}).items():
        if not isinstance(k, dict):
            bad.append(f"kernels.{name}")
            continue
        k = dict(k)
        for key in ("ir_nodes", "fx_nodes", "pre_grad_nodes", "aten"):
            if key in k and k[key] is not None and _names(k[key]) != k[key]:
                bad.append(f"kernels.{name}.{key}")
                k[key] = _names(k[key])
        if "source" in k and not (isinstance(k["source"], list)
                                  and all(isinstance(x, dict) for x in k["source"])):
            bad.append(f"kernels.{name}.source")
            k["source"] = [x for x in k["source"] if isinstance(x, dict)] \
                if isinstance(k["source"], list) else []
        kernels[str(name)] = k
    out = {**data, "kernels": kernels}
    for key in ("fx_to_kernels", "pre_to_post"):
        m = data.get(key) or {}
        clean = {str(n): _names(v) for n, v in m.items()}
        if any(clean[str(n)] != v for n, v in m.items()):
            bad.append(key)
        out[key] = clean
    if bad:
        report(f"{', '.join(bad[:5])}: not names of the expected types; ignored")
    return out
