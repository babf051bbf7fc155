"""The trace's files, read safely: problems are recorded by file instead of raised.

Every path is confined to the trace root, only regular files are read, each within its size cap
(``safefile``), and each JSON file is checked against its documented shape (``shapes``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuidebug.trace.format import safefile, shapes

MAX_TEXT_BYTES = 4 * 1024 * 1024  # larger files are shown truncated, with a notice


@dataclass
class Problem:
    file: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.message}"


class TraceFiles:
    """Safe readers that record problems instead of raising: every path is confined to the
    trace root, only regular files are read, each within its size cap (``safefile``), and each
    JSON file is checked against its documented shape (``shapes``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.problems: list[Problem] = []
        self._seen: set[tuple[str, str]] = set()
        self._real_root: Path | None = None

    def confine(self, path: Path) -> Path:
        """``path`` resolved inside the trace, else ``safefile.Refused``."""
        if self._real_root is None:
            self._real_root = self.root.resolve()
        return safefile.confine(self.root, path, self._real_root)

    def rel(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)

    def problem(self, path: Path, message: str) -> None:
        p = Problem(self.rel(path), message)
        if (p.file, p.message) not in self._seen:
            self._seen.add((p.file, p.message))
            self.problems.append(p)

    def exists(self, path: Path) -> bool:
        """``path`` is a regular file inside the trace (a path leading out is reported)."""
        try:
            real = self.confine(path)
        except safefile.Refused as e:
            if os.path.lexists(path) or ".." in path.parts:
                self.problem(path, str(e))
            return False
        return real.exists()

    def _confined(self, path: Path) -> Path | None:
        """``path`` resolved inside the trace, or None (reported) / None (missing, silent)."""
        if not os.path.lexists(path) and ".." not in path.parts:
            return None
        try:
            real = self.confine(path)
        except safefile.Refused as e:
            self.problem(path, str(e))
            return None
        return real if os.path.lexists(real) else None

    def json(self, path: Path, default: Any = None, *, required: bool = False,
             kind: str | None = None) -> Any:
        real = self._confined(path)
        if real is None:
            if required and not os.path.lexists(path):
                self.problem(path, "missing")
            return default
        try:
            data, _ = safefile.read_bytes(real, safefile.MAX_JSON_BYTES)
            value = safefile.loads(data)
        except safefile.Refused as e:
            self.problem(path, str(e))
            return default
        except (UnicodeDecodeError, ValueError) as e:
            self.problem(path, f"corrupt JSON ({e.__class__.__name__}: {e})")
            return default
        except OSError as e:
            self.problem(path, f"unreadable ({e.strerror or e})")
            return default
        if kind is not None:
            value = shapes.check(kind, value, lambda m: self.problem(path, m))
            return default if value is None else value
        return value

    def digest(self, path: Path) -> str | None:
        """A digest of the file's bytes (None: missing, refused, unreadable, over the JSON
        cap): two files with one digest hold the same text, so what is read from one is what
        the other holds."""
        real = self._confined(path)
        if real is None:
            return None
        try:
            data, _ = safefile.read_bytes(real, safefile.MAX_JSON_BYTES)
        except (safefile.Refused, OSError):
            return None
        import hashlib  # its OpenSSL binding loads in milliseconds: only when files are compared

        return hashlib.sha1(data).hexdigest()

    def jsonl(self, path: Path, kind: str | None = None) -> list[Any]:
        real = self._confined(path)
        if real is None:
            return []
        numbered: list[tuple[int, bytes]] = []
        try:
            for lineno, raw in safefile.lines(real):
                if raw is None:
                    self.problem(path, f"line {lineno} is over {safefile.MAX_LINE_BYTES:,} "
                                       "bytes; skipped")
                elif raw.strip():
                    numbered.append((lineno, raw))
        except safefile.Refused as e:
            self.problem(path, str(e))
        except OSError as e:
            self.problem(path, f"unreadable ({e.strerror or e})")
        out: list[Any] = []
        values = safefile.loads_lines([raw for _, raw in numbered])
        for (lineno, _), value in zip(numbered, values):
            if isinstance(value, ValueError):
                self.problem(path, f"line {lineno} is corrupt or truncated; skipped")
                continue
            if kind is not None:
                value = shapes.check(
                    kind, value, lambda m, n=lineno: self.problem(path, f"line {n}: {m}"))
                if value is None:
                    continue
            out.append(value)
        return out

    def text(self, path: Path, limit: int = MAX_TEXT_BYTES) -> str | None:
        real = self._confined(path)
        if real is None:
            return None
        try:
            data, size = safefile.read_bytes(real, limit, truncate=True)
        except safefile.Refused as e:
            self.problem(path, str(e))
            return None
        except OSError as e:
            self.problem(path, f"unreadable ({e.strerror or e})")
            return None
        if b"\x00" in data[:8192]:
            self.problem(path, "binary content; not shown")
            return f"<binary file, {size} bytes; not shown>"
        text = data.decode("utf-8", errors="replace")
        if size > limit:
            self.problem(path, f"{size} bytes; only the first {limit} are shown")
            text += f"\n… truncated: {size - limit} more bytes not shown\n"
        return text
