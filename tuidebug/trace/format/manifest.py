"""``manifest.json`` as one typed record: what a trace is, how far it got, what made it.

:class:`Manifest` is what every reader of a manifest gets (``Trace.manifest``,
:func:`read_manifest` for a folder that may not be a trace yet): fields named and typed, so a
reader need not read the writer to learn the keys. The file is read only through the trace's safe
reader (confined, capped, checked against its documented shape in ``shapes.py``); a key this
version does not name is kept in ``extra`` and written back by :meth:`Manifest.to_json`.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuidebug.errors import TraceError
from tuidebug.trace.format import schema
from tuidebug.trace.format.error_record import ErrorRecord
from tuidebug.trace.format.fields import as_dict, opt, opt_dict, opt_str


@dataclass
class GraphEntry:
    """One compiled graph as the manifest lists it (``graphs/<id>/`` holds the rest)."""

    id: str
    kind: str = "?"
    compile_id: str = "?"
    status: str = "?"

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "GraphEntry":
        return cls(str(d.get("id")), str(d.get("kind") or "?"), str(d.get("compile_id") or "?"),
                   str(d.get("status") or "?"))

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ScriptError:
    """How the traced script itself raised (not a compile failure: that is ``Manifest.error``):
    the exception's ``type`` and ``message``, its ``traceback`` text, and whether it raised
    ``after_compiling`` a graph (the trace is then complete). The manifest's ``script_error``;
    ``run_script`` writes it through :meth:`to_json`, every reader gets it through
    :meth:`from_json`."""

    type: str | None = None
    message: str | None = None
    traceback: str | None = None
    after_compiling: bool | None = None

    @classmethod
    def from_json(cls, value: Any) -> "ScriptError | None":
        """The script's error in ``value`` (a field of the wrong type reads as absent); None
        when there is none (not an object, or an empty one)."""
        if not isinstance(value, dict) or not value:
            return None
        return cls(opt_str(value.get("type")), opt_str(value.get("message")),
                   opt_str(value.get("traceback")), opt(value.get("after_compiling"), bool))

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def sane_tol(value: Any) -> float | None:
    """A positive, sane accuracy tolerance (a trace is untrusted), else None."""
    n = opt(value, int, float)
    return float(n) if n is not None and 0 < n < 1e6 else None


def sane_runs(value: Any) -> int | None:
    """A sane count of profiled runs (``trace --profile N``), else None."""
    n = opt(value, int)
    return n if n is not None and 0 < n <= 10_000 else None


@dataclass
class Manifest:
    """``manifest.json`` (docs/trace-format.md). ``graphs`` is None when the file lists none
    (the reader then finds them by scanning ``graphs/``)."""

    format: str | None = None
    format_version: int | None = None
    tool_version: str | None = None
    status: str | None = None
    phase: str | None = None
    current_graph: str | None = None
    host: str | None = None
    pid: int | None = None
    command: list[str] | None = None
    cwd: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    versions: dict[str, Any] = field(default_factory=dict)
    error: ErrorRecord | None = None  # the failure the trace ended with
    graphs: list[GraphEntry] | None = None
    compiles: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    not_available: list[str] = field(default_factory=list)  # what this torch lacks for capture
    config_overrides: dict[str, Any] = field(default_factory=dict)
    tuidebug_config: dict[str, Any] = field(default_factory=dict)
    imported_from: dict[str, Any] | None = None  # a TORCH_TRACE log or debug folder's import
    made_by: dict[str, Any] = field(default_factory=dict)  # host, user, path it was written to
    script_error: ScriptError | None = None  # the traced script raised
    script_exit_code: int | None = None
    check_accuracy: bool = True
    accuracy_tol: float | None = None  # `trace --accuracy-tol` (positive, sane), else None
    profile_runs: int | None = None  # `trace --profile N` (1..10000), else None
    skipped_frames: list[dict[str, Any]] = field(default_factory=list)
    recompile: dict[str, Any] | None = None  # a recompile's origin: {"from", "sets", …}
    stopped: dict[str, Any] | None = None  # a rank ended by `trace --timeout`: {"why", "at"}
    applied: dict[str, Any] | None = None  # `advise --try`: the suggestion this run applied
    accuracy_mismatch: list[str] = field(default_factory=list)  # compile ids
    # a rank of a job whose collectives went to no progress log: why (its error)
    collectives_not_logged: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # every key not named above

    @classmethod
    def from_json(cls, data: Any) -> "Manifest":
        """The manifest in ``data`` (parsed JSON, shape-checked or not: a field of the wrong
        type reads as absent)."""
        d = as_dict(data)
        graphs = d.get("graphs")
        command = d.get("command")
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        return cls(
            format=opt(d.get("format"), str), format_version=opt(d.get("format_version"), int),
            tool_version=opt(d.get("tool_version"), str), status=opt(d.get("status"), str),
            phase=opt(d.get("phase"), str), current_graph=opt(d.get("current_graph"), str),
            host=opt(d.get("host"), str), pid=opt(d.get("pid"), int),
            command=(list(command) if isinstance(command, list)
                     and all(isinstance(c, str) for c in command) else None),
            cwd=opt(d.get("cwd"), str), started_at=opt(d.get("started_at"), int, float),
            finished_at=opt(d.get("finished_at"), int, float),
            versions=as_dict(d.get("versions")),
            error=ErrorRecord.from_json(d.get("error")),
            graphs=([GraphEntry.from_json(g) for g in graphs
                     if isinstance(g, dict) and isinstance(g.get("id"), str)]
                    if isinstance(graphs, list) else None),
            compiles=[c for c in d.get("compiles") or [] if isinstance(c, dict)]
            if isinstance(d.get("compiles"), list) else [],
            warnings=[str(w) for w in d.get("warnings") or []]
            if isinstance(d.get("warnings"), list) else [],
            not_available=[str(w) for w in d.get("not_available") or []]
            if isinstance(d.get("not_available"), list) else [],
            config_overrides=as_dict(d.get("config_overrides")),
            tuidebug_config=as_dict(d.get("tuidebug_config")),
            imported_from=opt_dict(d.get("imported_from")), made_by=as_dict(d.get("made_by")),
            script_error=ScriptError.from_json(d.get("script_error")),
            script_exit_code=opt(d.get("script_exit_code"), int),
            check_accuracy=bool(d.get("check_accuracy", True)),
            accuracy_tol=sane_tol(d.get("accuracy_tol")),
            profile_runs=sane_runs(d.get("profile_runs")),
            skipped_frames=[f for f in d.get("skipped_frames") or [] if isinstance(f, dict)]
            if isinstance(d.get("skipped_frames"), list) else [],
            recompile=opt_dict(d.get("recompile")), stopped=opt_dict(d.get("stopped")),
            applied=opt_dict(d.get("applied")),
            accuracy_mismatch=[str(c) for c in d.get("accuracy_mismatch") or []]
            if isinstance(d.get("accuracy_mismatch"), list) else [],
            collectives_not_logged=opt(d.get("collectives_not_logged"), str),
            extra={k: v for k, v in d.items() if k not in names},
        )

    def to_json(self) -> dict[str, Any]:
        """The manifest as ``manifest.json`` holds it (``extra`` keys included)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
               if f.name != "extra"}
        out["graphs"] = [g.to_json() for g in self.graphs] if self.graphs is not None else None
        out["error"] = self.error.to_json() if self.error is not None else None
        out["script_error"] = (self.script_error.to_json() if self.script_error is not None
                               else None)
        return {**self.extra, **out}


def is_safe_name(name: Any) -> bool:
    """A graph id names a folder directly under graphs/: no separators, no ``..``."""
    return (isinstance(name, str) and 0 < len(name) <= 255 and name not in (".", "..")
            and "/" not in name and "\\" not in name and "\x00" not in name)


def live_status(m: Manifest) -> str:
    """The status of the trace whose manifest is ``m``, now: ok | failed | crashed | stopped (a
    rank ended by ``--timeout``) | running (a live capture) | unknown. A ``running`` trace
    whose writer is gone crashed (or was stopped)."""
    s = m.status or "unknown"
    if s == schema.STATUS_RUNNING and not _writer_alive(m):
        return schema.STATUS_STOPPED if m.stopped is not None else schema.STATUS_CRASHED
    return s


def _writer_alive(m: Manifest) -> bool:
    import socket  # only for a trace still being written: not at every start-up

    if m.pid is None or m.host != socket.gethostname():
        return False
    try:
        os.kill(m.pid, 0)
    except (ProcessLookupError, PermissionError, OSError):
        return False
    # The pid exists; make sure it is not a recycled one from before the trace started.
    try:
        started = os.stat(f"/proc/{m.pid}").st_ctime
        return started <= float(m.started_at or 0) + 1
    except OSError:
        return True


def is_trace_dir(path: Path) -> bool:
    """A tuidebug trace folder (or its manifest.json): a manifest naming the format (a damaged
    one: a ``graphs/`` folder beside it), or no manifest but ``graphs/`` and no ``tlparse/`` (a
    trace whose writer was killed before it wrote one)."""
    from tuidebug.trace.format import safefile

    if path.is_file() and path.name == schema.MANIFEST:
        path = path.parent
    if not path.is_dir():
        return False
    manifest = path / schema.MANIFEST
    if manifest.is_file():
        try:
            head, _ = safefile.read_bytes(manifest, 4096, truncate=True, no_link=True)
            if schema.FORMAT_NAME.encode() in head:
                return True
            data = safefile.read_json(manifest, no_link=True)
            return isinstance(data, dict) and data.get("format") == schema.FORMAT_NAME
        except (OSError, ValueError, safefile.Refused):
            return (path / schema.GRAPHS_DIR).is_dir()
    return (path / schema.GRAPHS_DIR).is_dir() and not (path / "tlparse").is_dir()


def read_manifest(root: str | Path) -> Manifest:
    """The manifest of trace folder ``root``, read safely (``TraceError`` saying why not:
    no such folder, no manifest, unreadable, not an object)."""
    from tuidebug.trace.format.tracefiles import TraceFiles

    root = Path(root)
    if not root.is_dir():
        raise TraceError(f"no such trace: {root}")
    files = TraceFiles(root)
    path = root / schema.MANIFEST
    data = files.json(path, None, required=True, kind="manifest")
    if not isinstance(data, dict):
        why = "; ".join(str(p) for p in files.problems) or f"{schema.MANIFEST}: not an object"
        if not path.exists():
            why = f"not a tuidebug trace (no {schema.MANIFEST})"
        raise TraceError(f"{root}: {why}")
    return Manifest.from_json(data)


def find_manifest(root: str | Path) -> Manifest | None:
    """:func:`read_manifest`, or None where there is none to read (not yet written, damaged)."""
    try:
        return read_manifest(root)
    except TraceError:
        return None
