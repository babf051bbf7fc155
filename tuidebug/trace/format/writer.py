"""Writes a trace directory incrementally; every file atomically (see docs/trace-format.md).

The one write path of the format: ``TraceWriter`` owns the directory, the manifest and the
trace-level files (``config.json``, ``runtime.json``, ``compiles/<id>.json``); ``GraphWriter``
(``TraceWriter.graph(id)``) the files of one graph and their names. The live capture and every
importer write through them; they hand plain data (dicts, lists, strings), never torch objects.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from tuidebug.version import __version__
from tuidebug.trace.format import atomic, compressed, layout, schema
from tuidebug.trace.format.error_record import ErrorRecord
from tuidebug.trace.format.graph_meta import StageEntry
from tuidebug.trace.format.kernel_entry import KernelEntry
from tuidebug.trace.format.written import Written


def _user() -> str | None:
    try:
        import getpass

        return getpass.getuser()
    except (ImportError, KeyError, OSError):
        return None


class TraceWriter:
    """Owns one trace directory. Thread-safe: compiles can happen on several threads."""

    def __init__(self, root: str | os.PathLike[str], *, command: list[str] | None = None,
                 versions: dict[str, Any] | None = None, written: Written | None = None
                 ) -> None:
        """``written``: where to keep what is written, for a reader of this trace in this
        process (``Trace(..., written=)``: ``tuidebug import``'s summary)."""
        self.root = Path(root)
        self.written = written
        self._lock = threading.RLock()
        self.write_error: str | None = None  # set when the disk refused a write
        # told each new (phase, graph id), after the manifest records it (a recompile job
        # reports phases to its worker through this)
        self.on_phase: Callable[[str, str | None], None] | None = None
        self.root.mkdir(parents=True, exist_ok=True)
        if not os.access(self.root, os.W_OK):
            raise PermissionError(f"output directory {self.root} is not writable")
        self.manifest: dict[str, Any] = {
            "format": schema.FORMAT_NAME,
            "format_version": schema.FORMAT_VERSION,
            "tool_version": __version__,
            "versions": {"python": platform.python_version(), **(versions or {})},
            "platform": platform.platform(),
            "host": socket.gethostname(),
            # where the trace was made: a recompile/bisect/minify of it says when it is not here
            "made_by": {"host": socket.gethostname(), "user": _user(),
                        "path": str(self.root.resolve())},
            "pid": os.getpid(),
            "command": command if command is not None else list(sys.argv),
            "cwd": os.getcwd(),
            "started_at": time.time(),
            "finished_at": None,
            "status": schema.STATUS_RUNNING,
            "phase": None,
            "current_graph": None,
            "error": None,
            "graphs": [],
            "compiles": [],
            "config_overrides": {},
            "warnings": [],
        }
        self.flush()

    # -- manifest -------------------------------------------------------------------------------
    def _safely(self, what: Path, fn: Any, *args: Any) -> None:
        """Write through ``fn``; a full or read-only disk must not break the user's compile.

        The first failure is reported once on stderr and remembered in ``write_error``; later
        writes are skipped. Earlier files stay intact (every write is atomic).
        """
        if self.write_error is not None:
            return
        try:
            fn(*args)
        except OSError as e:
            self.write_error = f"{what}: {e.strerror or e}"
            print(f"[tuidebug] warning: cannot write the trace ({self.write_error}); "
                  "capture stops here, the compile goes on", file=sys.stderr, flush=True)

    def flush(self) -> None:
        with self._lock:
            self.write_json(self.root / schema.MANIFEST, self.manifest)

    def update(self, **fields: Any) -> None:
        with self._lock:
            self.manifest.update(fields)
            self.flush()

    def set_phase(self, phase: str, graph_id: str | None = None) -> None:
        """Record the compile phase reached (and its graph); ``on_phase`` hears each change."""
        with self._lock:
            if self.manifest["phase"] == phase and self.manifest["current_graph"] == graph_id:
                return
            self.manifest["phase"] = phase
            self.manifest["current_graph"] = graph_id
            self.flush()
        if self.on_phase is not None:
            self.on_phase(phase, graph_id)

    def warn(self, message: str) -> None:
        with self._lock:
            if message not in self.manifest["warnings"]:
                self.manifest["warnings"].append(message)
                self.flush()

    def not_available(self, message: str) -> None:
        """What this torch lacks for a part of the capture (``compat.NotAvailable``), kept once
        in the manifest's ``not_available``: a fact about the torch, not a warning to the
        user."""
        with self._lock:
            missing = self.manifest.setdefault("not_available", [])
            if message not in missing:
                missing.append(message)
                self.flush()

    def add_compile(self, compile_id: str, info: dict[str, Any]) -> None:
        with self._lock:
            for c in self.manifest["compiles"]:
                if c["id"] == compile_id:
                    c.update(info)
                    break
            else:
                self.manifest["compiles"].append({"id": compile_id, **info})
            self.flush()

    def add_graph(self, graph_id: str, *, kind: str, compile_id: str) -> None:
        with self._lock:
            if any(g["id"] == graph_id for g in self.manifest["graphs"]):
                return
            self.manifest["graphs"].append(
                {"id": graph_id, "kind": kind, "compile_id": compile_id, "status": "running"})
            self.flush()

    def set_graph_status(self, graph_id: str, status: str) -> None:
        with self._lock:
            for g in self.manifest["graphs"]:
                if g["id"] == graph_id:
                    g["status"] = status
            self.flush()

    def finish(self, status: str, error: ErrorRecord | None = None, *,
               finished_at: float | None = None) -> None:
        """Final status; ``finished_at`` defaults to now (an import passes the log's end)."""
        with self._lock:
            self.manifest["status"] = status
            self.manifest["finished_at"] = time.time() if finished_at is None else finished_at
            if error is not None:
                self.manifest["error"] = error.to_json()
            self.flush()

    # -- files ----------------------------------------------------------------------------------
    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)

    def graph_path(self, graph_id: str, *parts: str) -> Path:
        return self.root.joinpath(schema.GRAPHS_DIR, graph_id, *parts)

    def write_json(self, path: Path, data: Any, *, compact: bool = False,
                   packed: bool = False) -> None:
        """``packed``: stored compressed as ``<path>.gz`` (``compressed``): what the reader
        reads as ``path``."""
        if self._stopped(path):
            return
        self._write(path, atomic.json_text(data, compact=compact or packed), packed=packed,
                    is_json=True)

    def write_text(self, path: Path, text: str, *, packed: bool = False) -> None:
        self._write(path, text, packed=packed, is_json=False)

    def _stopped(self, path: Path) -> bool:
        """Capture stopped at a failed write (``write_error``): ``path`` is not written, so
        nothing of it is built (its JSON text, its compression: in the user's process, for
        nothing) nor kept; what was kept of it before is forgotten (read from disk)."""
        if self.write_error is None:
            return False
        rel = self._rel(path) if self.written is not None else None
        if self.written is not None and rel is not None:
            self.written.forget(rel)
        return True

    def _write(self, path: Path, text: str, *, packed: bool, is_json: bool) -> None:
        if self._stopped(path):
            return
        data = text.encode("utf-8", "surrogateescape")
        stored = compressed.pack(data) if packed else None
        if stored is not None:
            self._safely(path, _write_packed, path, stored)
        else:
            self._safely(path, atomic.write_bytes, path, data)
        if self.written is not None:
            rel = self._rel(path)
            if rel is None:
                return
            if self.write_error is None:
                self.written.keep(rel, data, is_json=is_json, packed=stored)
            else:
                self.written.forget(rel)

    def _rel(self, path: Path) -> str | None:
        """``path`` relative to the trace root, as ``Written`` keys it."""
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return None

    def append(self, path: Path, record: Any) -> None:
        with self._lock:
            self._safely(path, atomic.append_jsonl, path, record)
            rel = self._rel(path) if self.written is not None else None
            if self.written is not None and rel is not None:
                self.written.forget(rel)

    # -- trace-level files ----------------------------------------------------------------------
    def graph(self, graph_id: str) -> "GraphWriter":
        """The writer of ``graphs/<graph_id>/`` (cheap: make one whenever needed)."""
        return GraphWriter(self, graph_id)

    def write_config(self, config: dict[str, Any]) -> None:
        """``config.json``: ``values``, ``changed`` (value and default), ``set_by_tuidebug``."""
        self.write_json(self.path(schema.CONFIG), config)

    def write_runtime(self, runtime: dict[str, Any]) -> None:
        """``runtime.json``: the eager comparisons (``checks`` per compile id)."""
        self.write_json(self.path(schema.RUNTIME), runtime)

    def write_profile(self, profile: dict[str, Any]) -> None:
        """``profile.json``: what ``--profile`` measured (``compiles`` per compile id)."""
        self.write_json(self.path(schema.PROFILE), profile)

    def write_compile(self, compile_id: str, detail: dict[str, Any]) -> None:
        """``compiles/<safe id>.json``: ``{"id": compile_id, **detail}``."""
        self.write_json(self.path(schema.COMPILES_DIR, f"{layout.safe_id(compile_id)}.json"),
                        {"id": compile_id, **detail}, packed=True)

    def write_compile_shapes(self, compile_id: str, shapes: dict[str, Any]) -> None:
        """``compiles/<safe id>.shapes.json``: the compile's symbols, guards, specializations
        and the inputs a recompile's failed guards name (docs/trace-format.md)."""
        name = f"{layout.safe_id(compile_id)}{schema.SHAPES_SUFFIX}"
        self.write_json(self.path(schema.COMPILES_DIR, name), {"id": compile_id, **shapes},
                        packed=True)
        # and beside it what info and the overview read: all but the guards (thousands, each
        # with its source context: most of the file), with their counts
        name = f"{layout.safe_id(compile_id)}{schema.SHAPES_BRIEF_SUFFIX}"
        self.write_json(self.path(schema.COMPILES_DIR, name),
                        {"id": compile_id, **layout.shapes_brief(shapes)})

    def write_compile_cache(self, compile_id: str, lookups: list[dict[str, Any]]) -> None:
        """``compiles/<safe id>.cache.json``: the compile's graph-cache lookups, each with its
        key's components (docs/trace-format.md)."""
        name = f"{layout.safe_id(compile_id)}{schema.CACHE_SUFFIX}"
        self.write_json(self.path(schema.COMPILES_DIR, name),
                        {"id": compile_id, "lookups": lookups}, compact=True)


def _write_packed(path: Path, stored: bytes) -> None:
    """``stored`` (compressed: ``compressed.pack``) as ``<path>.gz``; a ``path`` left from an
    earlier write goes (the reader would read it first)."""
    atomic.write_bytes(path.with_name(compressed.packed_name(path.name)), stored)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def write_advice(root: str | os.PathLike[str], advice: dict[str, Any]) -> None:
    """``advice.json`` of a finished trace (``tuidebug advise --try``: the suggestions and
    what trying each measured), written atomically; the only file written into a trace after
    its capture ended."""
    path = Path(root) / schema.ADVICE
    if not (Path(root) / schema.MANIFEST).is_file():
        raise FileNotFoundError(f"{root} is not a trace (no {schema.MANIFEST})")
    atomic.write_json(path, advice)


def write_numerics(root: str | os.PathLike[str], numerics: dict[str, Any]) -> None:
    """``numerics.json`` of a finished trace (``tuidebug numerics``: each compile's first
    diverging kernel classified by re-runs of the script), written atomically, like
    ``advice.json`` after the capture ended."""
    if not (Path(root) / schema.MANIFEST).is_file():
        raise FileNotFoundError(f"{root} is not a trace (no {schema.MANIFEST})")
    atomic.write_json(Path(root) / schema.NUMERICS, numerics)


class GraphWriter:
    """The files of one graph directory (``graphs/<id>/``), named as docs/trace-format.md says.

    Every write goes through its ``TraceWriter`` (atomic; a full disk warns once and stops the
    writing, never the compile). It holds no graph state: the caller keeps the stage list,
    fusion decisions and kernel index, and hands them over whole.
    """

    def __init__(self, trace: TraceWriter, graph_id: str) -> None:
        self.trace = trace
        self.graph_id = graph_id
        self.dir = trace.graph_path(graph_id)

    def path(self, *parts: str) -> Path:
        return self.dir.joinpath(*parts)

    def write_stage(self, index: int, name: str, data: dict[str, Any],
                    seen: dict[str, str] | None = None) -> str:
        """A graph snapshot as stage ``index``: ``stages/NNN-<name>.json`` (compact JSON);
        returns that file name, relative to the graph directory (for the stage entry).

        ``seen`` (the caller's, one per graph: a digest of each snapshot's nodes → its file):
        when this snapshot's nodes are exactly those of one written before, nothing is written
        and that earlier file is returned — the stage entry then names it (a reference), and
        its own ``changes`` belong in the entry, not in the shared file."""
        fname = layout.stage_file(index, name)
        # the nodes (most of a snapshot) are serialised once: hashed for ``seen``, and written
        nodes = atomic.compact_json(data.get("nodes"))
        if seen is not None:
            digest = hashlib.sha1(nodes.encode("utf-8", "surrogatepass")).hexdigest()
            if digest in seen:
                return seen[digest]
            seen[digest] = fname
        rest = atomic.compact_json({k: v for k, v in data.items() if k != "nodes"})
        text = rest if "nodes" not in data else (
            rest[:-1] + ("," if rest != "{}" else "") + '"nodes":' + nodes + "}")
        self.trace.write_text(self.dir / fname, text + "\n", packed=True)
        return fname

    def write_stage_text(self, index: int, name: str, text: str) -> str:
        """A graph snapshot kept as the FX graph a log printed: ``stages/NNN-<name>.txt``,
        parsed when it is first read (``reader``); returns its name, as ``write_stage``."""
        fname = layout.stage_file(index, name, fx_text=True)
        self.trace.write_text(self.dir / fname, text, packed=True)
        return fname

    def write_meta(self, *, kind: str, compile_id: str, status: str,
                   stages: list[StageEntry], phase_starts: dict[str, float],
                   end: float | None = None, kernels: int, fusion: dict[str, Any],
                   **extra: Any) -> None:
        """``meta.json`` (see ``layout.graph_meta``); ``end``: seconds from the graph's start
        to its end, which closes the last phase (None: the last phase lasts 0 s)."""
        self.trace.write_json(self.dir / schema.META, layout.graph_meta(
            self.graph_id, kind, compile_id, status, stages, phase_starts, kernels, fusion,
            end=end, **extra))

    def write_ir(self, which: str, nodes: list[dict[str, Any]], text: str) -> None:
        """The scheduler's nodes before (``which="pre"``) or after (``"post"``) fusion:
        ``ir_*_fusion.json`` and the printed ``ir_*_fusion.txt``."""
        base = schema.IR_PRE if which == "pre" else schema.IR_POST
        self.trace.write_json(self.dir / f"{base}.json", {"graph": self.graph_id, "nodes": nodes},
                              packed=True)
        self.trace.write_text(self.dir / f"{base}.txt", text, packed=True)

    def write_fusion(self, records: list[dict[str, Any]]) -> None:
        """``fusion.jsonl``, every decision so far (rewritten whole: it stays atomic)."""
        lines = "".join(json.dumps(r, default=repr) + "\n" for r in records)
        self.trace.write_text(self.dir / schema.FUSION, lines)

    def write_output_code(self, code: str) -> list[KernelEntry]:
        """Inductor's output code as ``code/wrapper.py``, one file per kernel and
        ``code/kernels.json``; returns the kernel index."""
        return layout.write_output_code(
            self.dir, code, write_text=self.trace.write_text,
            write_json=lambda path, data: self.trace.write_json(path, data, compact=True))

    def write_provenance(self, provenance: dict[str, Any]) -> None:
        """``provenance.json`` (built by ``layout.provenance_json``)."""
        self.trace.write_json(self.dir / schema.PROVENANCE, provenance, packed=True)

    def append_autotune(self, record: dict[str, Any]) -> None:
        """One autotuned op (or Triton kernel) with its choices, to ``autotune.jsonl``."""
        self.trace.append(self.dir / schema.AUTOTUNE, record)

    def append_launch(self, record: dict[str, Any]) -> None:
        """A Triton kernel's first launch, to ``code/launches.jsonl``."""
        self.trace.append(self.dir / schema.LAUNCHES, record)

    def write_timings(self, kernels: dict[str, Any], run: dict[str, Any] | None) -> None:
        """``code/timings.json``: compile and run time per kernel, and how it was run."""
        self.trace.write_json(self.dir / schema.TIMINGS, {"kernels": kernels, "run": run or None})

    def write_error(self, error: ErrorRecord) -> None:
        """``error.json``: the failure of this graph (phase, type, message, traceback…)."""
        self.trace.write_json(self.dir / schema.ERROR, error.to_json())

    def write_runnable(self, code: str) -> None:
        """Torch's standalone script of the graph: ``repro/fx_graph_runnable.py``."""
        self.trace.write_text(self.dir / schema.REPRO_DIR / "fx_graph_runnable.py", code)
