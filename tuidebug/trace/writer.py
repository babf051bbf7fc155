"""Writes a trace directory incrementally; every file atomically (see docs/trace-format.md)."""

from __future__ import annotations

import os
import platform
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tuidebug import __version__
from tuidebug.trace import atomic, schema


class TraceWriter:
    """Owns one trace directory. Thread-safe: compiles can happen on several threads."""

    def __init__(self, root: str | os.PathLike[str], *, command: list[str] | None = None,
                 versions: dict[str, Any] | None = None) -> None:
        self.root = Path(root)
        self._lock = threading.RLock()
        self.write_error: str | None = None  # set when the disk refused a write
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
            self._safely(self.root / schema.MANIFEST, atomic.write_json,
                         self.root / schema.MANIFEST, self.manifest)

    def update(self, **fields: Any) -> None:
        with self._lock:
            self.manifest.update(fields)
            self.flush()

    def set_phase(self, phase: str, graph_id: str | None = None) -> None:
        with self._lock:
            if self.manifest["phase"] == phase and self.manifest["current_graph"] == graph_id:
                return
            self.manifest["phase"] = phase
            self.manifest["current_graph"] = graph_id
            self.flush()

    def warn(self, message: str) -> None:
        with self._lock:
            if message not in self.manifest["warnings"]:
                self.manifest["warnings"].append(message)
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

    def finish(self, status: str, error: dict[str, Any] | None = None, *,
               finished_at: float | None = None) -> None:
        """Final status; ``finished_at`` defaults to now (an import passes the log's end)."""
        with self._lock:
            self.manifest["status"] = status
            self.manifest["finished_at"] = time.time() if finished_at is None else finished_at
            if error is not None:
                self.manifest["error"] = error
            self.flush()

    # -- files ----------------------------------------------------------------------------------
    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)

    def graph_path(self, graph_id: str, *parts: str) -> Path:
        return self.root.joinpath(schema.GRAPHS_DIR, graph_id, *parts)

    def write_json(self, path: Path, data: Any, *, compact: bool = False) -> None:
        self._safely(path, lambda: atomic.write_json(path, data, compact=compact))

    def write_text(self, path: Path, text: str) -> None:
        self._safely(path, atomic.write_text, path, text)

    def append(self, path: Path, record: Any) -> None:
        with self._lock:
            self._safely(path, atomic.append_jsonl, path, record)
