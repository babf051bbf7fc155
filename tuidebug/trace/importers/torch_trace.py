"""Import a TORCH_TRACE structured log into a tuidebug trace directory. Pure text; no torch.

The driver: ``tracelog.scan`` indexes the log's records (headers, payload byte ranges,
checksums); ``segments.segment`` assigns Inductor-compile records to their compile; then each
record goes, in order, to its parser (``parsers``: pure, record -> facts), and the facts are
applied here to the graphs and compiles of the import (``graphs``, ``timings``) and written:
the same layout a live capture writes, ``graphs/<compile id>-<kind>/`` with a snapshot per
graph the log printed (Dynamo, pre-grad, AOT joint / forward / backward / inference, post-grad),
the passes Inductor timed (``pass.*`` chromium events, without snapshots), the output code
split into kernels, provenance when the log has it, and ``compiles/<id>.json`` with metrics,
guards, graph breaks, recompile reasons, cache hits and misses, dynamic-shape events and every
other artifact. Every file goes through the trace's writer (``tuidebug.trace.format.writer``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import IO, Any, Callable

from tuidebug.trace.queries import cache_keys
from tuidebug.trace.queries.summary import cache_counts
from tuidebug.trace.format import layout, schema
from tuidebug.trace.format import safefile
from tuidebug.trace.format import fxtext
from tuidebug.trace.importers import collectives_text, records as r, segments, tracelog
from tuidebug.trace.importers import vllm
from tuidebug.trace.importers.sources import log_rank
from tuidebug.trace.importers.graphs import (GraphBook, ImportedCompile, ImportedGraph,
                                             attempts_by_frame)
from tuidebug.trace.importers.parsers import GLOBAL_RECORDS, READ_WHOLE, REGISTRY
from tuidebug.trace.importers.shapes_log import shapes_from_log
from tuidebug.trace.importers.timings import Timings
from tuidebug.trace.format.error_record import ErrorRecord
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.format.written import Written

__all__ = ["ImportedGraph", "TorchTraceImporter", "MISSING_ALWAYS", "MISSING_PROVENANCE"]

# What a TORCH_TRACE log never holds (shown as "not in this log; trace with tuidebug to get it")
MISSING_ALWAYS = [
    "per-pass snapshots",
    "fusion decisions",
    "autotune choices",
    "Inductor IR (ir_pre_fusion / ir_post_fusion)",
    "eager-vs-compiled accuracy check",
    "kernel run times",
]
MISSING_PROVENANCE = "kernel provenance (the log has it with TORCH_COMPILE_DEBUG=1 or " \
                     "torch._inductor.config.trace.provenance_tracking_level=1)"
_MAX_DYNAMIC_EVENTS = 2000


class TorchTraceImporter:
    """One log -> one trace directory. ``run()`` returns the writer's manifest."""

    finish_early = True  # write each compile once its last record is read (see _finish_compile)

    def __init__(self, log: str | os.PathLike[str] | None, out_dir: str | os.PathLike[str], *,
                 source: str | os.PathLike[str] | None = None, kind: str = "torch_trace",
                 ranks: list[int] | None = None,
                 on_progress: Callable[[str], None] | None = None,
                 cache_key: str | None = None, parse_graphs: bool = False,
                 written: Written | None = None) -> None:
        self.log = Path(log) if log is not None else None
        self.written = written  # what the writer writes, kept for a reader in this process
        # parse every printed graph now (JSON snapshots); by default an intact one is kept as
        # text and parsed when it is opened
        self.parse_graphs = parse_graphs
        self.cache_key = cache_key  # stamped into imported_from (the import cache's key)
        self.out = Path(out_dir)
        src = source if source is not None else log
        assert src is not None, "a log or a source is needed"
        self.source = Path(src)
        self.kind = kind
        self.ranks = ranks or []
        self.on_progress = on_progress
        self.warnings: list[str] = []
        self.errors: list[ErrorRecord] = []
        self.versions: dict[str, Any] = {}
        self.config_written = False
        self.has_provenance = False
        self.has_collectives = False
        self.cache_hits = 0
        self.cache_lookups: dict[str, list[dict[str, Any]]] = {}  # compiles/<id>.cache.json
        self.vllm = vllm.VllmBook()  # vLLM's own records (vllm.json)
        self.stack_cache: dict[str, Any] = {}
        self.scan: tracelog.LogScan | None = None
        self.writer: TraceWriter | None = None
        self.book = GraphBook(lambda gid: self._writer().graph(gid))
        self.timings = Timings(self.book)
        self._times: list[float] = []
        self._attempts: dict[str, int] = {}

    @property
    def graphs(self) -> dict[str, ImportedGraph]:
        return self.book.graphs

    @property
    def compiles(self) -> dict[str, ImportedCompile]:
        return self.book.compiles

    @property
    def log_name(self) -> str:
        return (self.log or self.source).name

    def _writer(self) -> TraceWriter:
        assert self.writer is not None
        return self.writer

    # -- driver ---------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        if self.log is not None:
            self._progress(f"reading {self.log}")
            self.scan = tracelog.scan(self.log, check_when_read=READ_WHOLE)
        else:
            self.scan = tracelog.LogScan(self.source)
        self.warnings += self.scan.warnings
        self.book.segs = segments.segment(self.scan.records)
        last = self._last_records()
        self.writer = TraceWriter(self.out, command=[], versions={}, written=self.written)
        self.writer.manifest.update(pid=None, host=None, cwd=None)
        if self.log is not None:
            last_flush = 0.0
            with safefile.open_regular(self.log) as f:
                for n, rec in enumerate(self.scan.records):
                    checksum = rec.payload_md5  # checked as the payload is read
                    try:
                        self._record(f, rec)
                    except Exception as e:  # one odd record never loses the rest of the log
                        self.warn(f"{self.log_name}: line {rec.lineno}: {rec.name} could not be "
                                  f"imported ({type(e).__name__}: {e})")
                    if checksum and not tracelog.check_payload(f, rec):
                        self.warn(tracelog.checksum_warning(self.log_name, rec))
                    if n in last:
                        self._finish_compile(last[n])
                    if n % 2000 == 0 and time.perf_counter() - last_flush > 2:
                        self._progress(f"{n}/{len(self.scan.records)} records")
                        last_flush = time.perf_counter()
        self.before_finish()
        self._finish(time.perf_counter() - t0)
        if self.writer.write_error is not None:
            raise OSError(f"cannot write the import: {self.writer.write_error}")
        return self.writer.manifest

    def before_finish(self) -> None:
        """Hook for importers that add files the log does not have (debug folders)."""

    def _progress(self, msg: str) -> None:
        if self.on_progress:
            try:
                self.on_progress(msg)
            except Exception:
                pass

    def warn(self, msg: str) -> None:
        if msg not in self.warnings and len(self.warnings) < 500:
            self.warnings.append(msg)

    def _record(self, f: IO[bytes], rec: tracelog.Record) -> None:
        assert self.scan is not None
        cid = layout.compile_id_from_meta(rec.meta)
        env = r.Envelope(rec, cid, self.scan.strings, self.log_name, f)
        if cid is None:
            if rec.name in GLOBAL_RECORDS:
                for fact in REGISTRY.parse(env):
                    self._apply(fact, env)
            return
        if rec.name != "chromium_event":
            lines = self.book.compile(cid).detail.setdefault("log_lines",
                                                             [rec.lineno, rec.lineno])
            lines[1] = rec.lineno
        for fact in REGISTRY.parse(env):
            self._apply(fact, env)

    # -- facts -> graphs, compiles and files -----------------------------------------------------
    def _apply(self, fact: r.Fact, env: r.Envelope) -> None:
        cid = env.compile_id
        book = self.book
        if isinstance(fact, r.Warn):
            self.warn(fact.message)
        elif isinstance(fact, r.Version):
            if not (fact.first_wins and fact.key in self.versions):
                self.versions[fact.key] = fact.value
        elif isinstance(fact, vllm.Fact):
            self.vllm.apply(fact, cid, self._writer())
        elif cid is None:
            return
        elif isinstance(fact, r.Chromium):
            self.timings.event(fact, cid, env.record.index)
        elif isinstance(fact, r.Snapshot):
            self._snapshot(fact, cid)
        elif isinstance(fact, r.SetDetail):
            book.compile(cid).detail[fact.key] = fact.value
        elif isinstance(fact, r.AppendDetail):
            book.compile(cid).detail.setdefault(fact.key, []).append(fact.value)
        elif isinstance(fact, r.CountEvent):
            other = book.compile(cid).detail.setdefault("other_events", {})
            other[fact.event] = other.get(fact.event, 0) + 1
        elif isinstance(fact, r.DynamicShape):
            c = book.compile(cid)
            events = c.detail.setdefault("dynamic_shapes", [])
            if len(events) >= _MAX_DYNAMIC_EVENTS:
                c.dynamic_dropped += 1
            else:
                events.append(fact.entry)
        elif isinstance(fact, r.Artifact):
            self._artifact(fact, cid)
        elif isinstance(fact, r.Metrics):
            book.compile(cid).detail["backward_metrics" if fact.backward else "metrics"] = \
                fact.metrics
        elif isinstance(fact, r.Config):
            if not self.config_written:
                self._writer().write_config(fact.data)
                self.config_written = True
        elif isinstance(fact, r.Times):
            self._times += fact.values
        elif isinstance(fact, r.Failure):
            self._failure(fact, cid)
        else:
            self._graph_fact(fact, cid, env)

    def _graph_fact(self, fact: r.Fact, cid: str, env: r.Envelope) -> None:
        g = self.book.target(fact.target, cid, env.record.index)
        if isinstance(fact, r.Touch):
            assert g is not None
            self.book.touch(g, env.lineno)
        elif isinstance(fact, r.Runnable):
            assert g is not None
            g.out.write_runnable(fact.text)
        elif isinstance(fact, r.OutputCode):
            assert g is not None
            self._output_code(g, fact, env.lineno)
        elif isinstance(fact, r.Provenance):
            assert g is not None
            self.has_provenance = True
            if fact.mappings is not None:
                g.pre_to_post = fact.mappings.get("preToPost") or {}
                for h, info in layout.provenance_handles(fact.mappings, None).items():
                    g.handle(h)["fx_nodes"] = info["fx_nodes"]
                g.extra_meta["provenance_mappings"] = {
                    k: v for k, v in fact.mappings.items()
                    if k in ("postToPre", "postToCppCode", "version")}
            if fact.stack_traces is not None:
                for h, info in layout.provenance_handles(None, fact.stack_traces).items():
                    g.handle(h)["stack_traces"] = info["stack_traces"]
        elif isinstance(fact, r.CacheEvent):
            if fact.result == "hit":
                self.cache_hits += 1
            if g is not None:
                g.cache[fact.cache] = fact.result
            entry: dict[str, Any] = {"cache": fact.cache, "result": fact.result,
                                     "graph": g.id if g is not None else None,
                                     "line": fact.line}
            data = dict(fact.data or {})
            components = cache_keys.parse_components(data.pop("components", None) or [])
            entry.update(data)
            self.book.compile(cid).detail.setdefault("cache", []).append(entry)
            self.cache_lookups.setdefault(cid, []).append({
                "cache": fact.cache, "result": fact.result, "graph": entry["graph"],
                "key": data.get("key") if isinstance(data.get("key"), str) else None,
                "bypass_reason": data.get("cache_bypass_reason"),
                "graph_kind": cache_keys.graph_kind(components), "components": components})

    def _snapshot(self, fact: r.Snapshot, cid: str) -> None:
        env = fact.env
        g = self.book.target(fact.target, cid, env.record.index)
        assert g is not None
        stage = fact.stage or f"aot_{g.kind}"
        if fact.if_missing and g.has_stage(stage):
            return
        self.book.touch(g, env.lineno)
        md5 = str(env.meta.get("has_payload") or "")
        added = len(g.stages)
        # an intact printed graph (its checksum matched) is kept as text, parsed when opened
        as_text = bool(md5) and env.payload_ok and not fact.subsystem and not self.parse_graphs
        if md5 and md5 == g.last_md5 and g.last_file and env.payload_ok:
            g.add_stage(g.unchanged_stage(stage))
        elif not (as_text and self._text_snapshot(g, stage, env.payload(), md5)):
            if not env.payload_ok:
                self.warn(f"{self.log_name}: line {env.lineno}: graph {g.id} stage {stage} comes "
                          "from a damaged payload; it may be incomplete")
            self.snapshot_text(g, stage, env.payload(), md5=md5, where=self.log_name,
                               line=env.lineno, what=env.name)
        if fact.subsystem and len(g.stages) > added:  # a pass's graph (vLLM's post-grad passes)
            g.stages[-1].update(kind="pass", subsystem=fact.subsystem)

    def _text_snapshot(self, g: ImportedGraph, stage: str, text: str, md5: str) -> bool:
        """Keep an intact printed graph as text, with its node count and node sources read from
        its statements' shapes (``fxtext.index_graph``); False when it must be parsed now."""
        index = fxtext.index_graph(text)
        if index is None or not index.nodes:
            return False
        n, entry = g.text_snapshot(stage, index, md5=md5)
        g.out.write_stage_text(n, stage, text)
        g.add_stage(entry)
        return True

    def snapshot_text(self, g: ImportedGraph, stage: str, text: str, *, md5: str = "",
                      where: str = "", line: int = 0, what: str = "graph") -> bool:
        """Parse a printed FX graph and add it as a stage of ``g``. ``line`` is the line of the
        source file just above the text (payload lines are counted from it)."""
        parsed = fxtext.parse_graph(text)
        if parsed.bad_lines:
            at = ", ".join(str(line + x) for x in parsed.bad_lines[:5])
            more = f" and {len(parsed.bad_lines) - 5} more" if len(parsed.bad_lines) > 5 else ""
            self.warn(f"{where}: line {at}{more}: a statement of {what} ({g.id}, stage {stage}) "
                      "is truncated or corrupt; skipped, the rest of the graph was kept")
        for p in parsed.problems:
            if not parsed.bad_lines or "truncated or corrupt" not in p:
                self.warn(f"{where}: line {line}: {what} ({g.id}, stage {stage}): {p}")
        if not parsed.nodes:
            return False
        index, data, entry = g.snapshot(stage, parsed, md5=md5, line=line)
        g.out.write_stage(index, stage, data)
        g.add_stage(entry)
        return True

    def write_code(self, g: ImportedGraph, code: str) -> None:
        """Inductor's output code as ``code/`` (wrapper + one file per kernel)."""
        g.kernel_index = g.out.write_output_code(code)
        g.has_code = True

    def _output_code(self, g: ImportedGraph, fact: r.OutputCode, lineno: int) -> None:
        if not fact.code.strip():
            self.warn(f"{self.log_name}: line {lineno}: output code of {g.id} is empty")
            return
        if fact.damaged:
            self.warn(f"{self.log_name}: line {lineno}: output code of {g.id} comes from a "
                      "damaged payload; it may be incomplete")
        self.write_code(g, fact.code)
        if fact.filename:
            g.output_code_file = fact.filename
        g.set_phase("kernel_compile", None)

    def _artifact(self, fact: r.Artifact, cid: str) -> None:
        c = self.book.compile(cid)
        entry = fact.entry
        arts = c.detail.setdefault("artifacts", [])
        if fact.text is not None:
            safe = layout.safe_id(fact.name)[:80]
            rel = f"{schema.COMPILES_DIR}/{layout.safe_id(cid)}/{safe}"
            n = 1
            while rel + ".txt" in c.artifact_files:
                n += 1
                rel = f"{schema.COMPILES_DIR}/{layout.safe_id(cid)}/{safe}-{n}"
            rel += ".txt"
            c.artifact_files.add(rel)
            self._writer().write_text(self._writer().path(rel), fact.text)
            entry["file"] = rel
        arts.append(entry)

    def _failure(self, fact: r.Failure, cid: str) -> None:
        c = self.book.compile(cid)
        gid = c.last_graph
        if fact.backward:
            gid = next((g for g in c.graphs if self.graphs[g].kind == "backward"), gid)
        phase = c.last_phase or "dynamo"
        g = self.graphs.get(gid) if gid else None
        if g is not None and g.has_code and phase not in ("kernel_compile", "runtime"):
            phase = "kernel_compile"
        e = fact.error
        tb = c.detail.get("dynamo_error") or fact.stack
        err = ErrorRecord(phase=phase, type=e["type"], message=_clip(e["message"], 20000),
                          traceback=_clip(str(tb), 60000), graph=gid, compile_id=cid,
                          extra={"wrapper_type": e["wrapper_type"], "log_line": e["log_line"],
                                 "user_frame": e["user_frame"]})
        c.detail["error"] = err.to_json()
        if e["wrapper_type"] == "SkipFrame":
            return  # Dynamo chose to run the frame eagerly: not a failure of the compile
        self.errors.append(err)
        if g is not None:
            g.status = "failed"
            g.out.write_error(err)

    # -- finish: meta.json, provenance, compiles/, the manifest ----------------------------------
    def _rank(self) -> int | None:
        """From the records; else from the file's name (…_rank_1_…)."""
        assert self.scan is not None
        rank = self.scan.rank
        if rank is None and self.log is not None:
            rank = log_rank(self.log)
        return rank

    def _last_records(self) -> dict[int, str]:
        """record index -> the compile id whose last record it is (its files are written and its
        state freed once it is read); the attempts of each compile (for restarts)."""
        assert self.scan is not None
        last: dict[str, int] = {}
        for i, rec in enumerate(self.scan.records):
            cid = layout.compile_id_from_meta(rec.meta)
            if cid is not None:
                last[cid] = i
        self._attempts = attempts_by_frame(last)
        return {i: cid for cid, i in last.items()} if self.finish_early else {}

    def _finish_graph(self, g: ImportedGraph) -> None:
        """Write a graph's collectives, provenance and meta.json; free what only they need."""
        g.flush_pending()
        coll = collectives_text.from_graph_dir(g.dir, g.id, self._rank(), g.stages,
                                               g.kernel_index, g.handles)
        if coll is not None:
            self.has_collectives = True
            g.out.trace.write_json(g.out.path(schema.COLLECTIVES), coll)
        if g.kernel_index:
            g.out.write_provenance(layout.provenance_json(
                g.kernel_index, g.handles, g.fx_source, g.pre_to_post, self.stack_cache))
        g.kernels = len(g.kernel_index)
        g.kernel_index, g.handles, g.fx_source, g.pre_to_post = [], {}, {}, {}
        self._write_meta(g)

    def _write_meta(self, g: ImportedGraph) -> None:
        g.missing = self.missing()
        extra = dict(g.extra_meta)
        extra.update({"imported": True, "cache": g.cache, "aot_id": g.aot_id,
                      "log_lines": g.log_lines, "output_code_file": g.output_code_file,
                      "missing": g.missing})
        g.out.write_meta(kind=g.kind, compile_id=g.compile_id, status=g.status,
                         stages=g.stages, phase_starts=g.phase_times, kernels=g.kernels,
                         fusion={"fused": g.fused or 0, "rejected": 0, "recorded": False},
                         **extra)

    def _finish_compile(self, cid: str) -> None:
        """Write a Dynamo compile (its graphs, compiles/<id>.json, its cache lookups and
        shapes) once its last record is read, and free its state: memory stays that of the
        compiles in flight, not of the whole log."""
        c = self.compiles.get(cid)
        if c is None or c.finished:
            return
        c.finished = True
        self.book.mark_restart(cid, self._attempts)
        for gid in c.graphs:
            self._finish_graph(self.graphs[gid])
        w = self._writer()
        if c.dynamic_dropped:
            c.detail["dynamic_shapes_dropped"] = c.dynamic_dropped
        c.detail["graphs"] = c.graphs
        if not c.graphs and set(c.detail) <= {"id", "graphs", "log_lines"}:
            return  # a compile id with only timing events
        w.write_compile(cid, c.detail)
        if self.cache_lookups.get(cid):
            w.write_compile_cache(cid, self.cache_lookups.pop(cid))
        shapes = shapes_from_log(c.detail)
        if shapes is not None:
            w.write_compile_shapes(cid, shapes)
        metrics = c.detail.get("metrics") or {}
        c.summary = {"id": cid, "graphs": c.graphs, "summary": {
            **{k: metrics.get(k) for k in ("co_name", "co_filename", "co_firstlineno",
                                           "entire_frame_compile_time_s",
                                           "inductor_compile_time_s", "fail_type")},
            "cache": cache_counts(c.detail)}}
        c.detail = {}

    # -- finish: meta.json, provenance, compiles/, the manifest ----------------------------------
    def _finish(self, elapsed: float) -> None:
        w = self._writer()
        assert self.scan is not None
        self.vllm.finish(w)
        if not self.finish_early:  # debug folders: compiles made up after the log was read
            self._attempts = attempts_by_frame(self.compiles)
        for cid in list(self.compiles):
            self._finish_compile(cid)
        missing = self.missing()
        for g in self.graphs.values():
            if g.missing != missing:  # learnt from a later compile
                self._write_meta(g)
        rank = self._rank()
        compiles = [c.summary for c in self.compiles.values() if c.summary is not None]
        m = w.manifest
        m["graphs"] = [{"id": g.id, "kind": g.kind, "compile_id": g.compile_id,
                        "status": g.status} for g in self.graphs.values()]
        m["compiles"] = compiles
        m["versions"] = {k: v for k, v in {**m["versions"], **self.versions}.items()
                         if k != "python" or v}
        if "python" not in self.versions:
            m["versions"].pop("python", None)
        if self._times:  # the compiles' own times, not the import's
            m["started_at"] = min(self._times)
        m["phase"] = self.errors[0].phase if self.errors else (
            "kernel_compile" if any(g.has_code for g in self.graphs.values()) else None)
        m["current_graph"] = self.errors[0].graph if self.errors else None
        m["warnings"] = list(self.warnings)
        m["imported_from"] = {
            "kind": self.kind, "path": str(self.source.resolve()),
            "log": str(self.log.resolve()) if self.log is not None else None,
            "rank": rank, "ranks": self.ranks, "missing": self.missing(),
            "lines": self.scan.lines, "records": len(self.scan.records),
            "bad_lines": self.scan.bad_lines, "import_seconds": round(elapsed, 3),
            "source_pid": next((rec.pid for rec in self.scan.records if rec.pid), None),
            **self.extra_imported_from(),
        }
        if self.cache_key is not None:
            m["imported_from"]["key"] = self.cache_key
        end = max(self._times) if self._times else None
        if self.errors:
            w.finish(schema.STATUS_FAILED, self.errors[0], finished_at=end)
        else:
            w.finish(schema.STATUS_OK, finished_at=end)

    def extra_imported_from(self) -> dict[str, Any]:
        return {}

    def missing(self) -> list[str]:
        out = list(MISSING_ALWAYS)
        if not self.has_provenance:
            out.append(MISSING_PROVENANCE)
        if self.has_collectives:
            out.append(collectives_text.MISSING)
        if self.cache_hits:
            out.append("graphs of compiles served from a cache (a cache hit logs only what it "
                       "loaded)")
        return out


def _clip(text: str, limit: int) -> str:
    """Keep the start (what failed) and the end (where) of a long message."""
    if len(text) <= limit:
        return text
    head = limit // 3
    tail = limit - head
    return f"{text[:head]}\n… {len(text) - limit} characters omitted …\n{text[-tail:]}"
