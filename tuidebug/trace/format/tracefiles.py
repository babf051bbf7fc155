"""The trace's files, read safely: problems are recorded by file instead of raised.

Every path is confined to the trace root, only regular files are read, each within its size cap
(``safefile``), and each JSON file is checked against its documented shape (``shapes``). A file
``NAME`` is read from ``NAME.gz`` where only that exists (``compressed``: the large files of a
format-2 trace), its decompressed size capped as the plain file's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuidebug.trace.format import compressed, safefile, shapes
from tuidebug.trace.format.written import Document, Written, WrittenFile

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

    def __init__(self, root: Path, written: Written | None = None) -> None:
        """``written``: what this trace's writer wrote in this process (``written.py``), read
        from memory instead of the files."""
        self.root = root
        self._written = written
        self.problems: list[Problem] = []
        self._seen: set[tuple[str, str]] = set()
        self._real_root: Path | None = None
        self._digests: dict[Path, str] = {}  # by path: what digest() worked out
        self._found: dict[Path, tuple[Path, bool, int]] = {}  # by path: _stored()

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

    def written(self, path: Path) -> WrittenFile | None:
        """The file this trace's writer wrote whole at ``path`` in this process, if it did."""
        if self._written is None:
            return None
        try:
            return self._written.file(path.relative_to(self.root).as_posix())
        except ValueError:
            return None

    def _written_json(self, path: Path) -> Document | None:
        if self._written is None:
            return None
        try:
            kept = self._written.document(path.relative_to(self.root).as_posix())
        except ValueError:
            return None
        return kept  # none over the cap: read from its file, which refuses it as ever

    def exists(self, path: Path) -> bool:
        """``path`` is a regular file inside the trace (a path leading out is reported)."""
        if self.written(path) is not None:
            return True
        try:
            real = self.confine(path)
        except safefile.Refused as e:
            if os.path.lexists(path) or ".." in path.parts:
                self.problem(path, str(e))
            return False
        return real.exists() or self._located(path) is not None

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

    def _located(self, path: Path) -> tuple[Path, bool] | None:
        """(the file holding ``path``, resolved inside the trace; whether it holds it
        compressed): ``path`` itself, else ``path.gz``; None when neither (a refusal of either
        reported)."""
        real = self._confined(path)
        if real is not None:
            return real, False
        if os.path.lexists(path):
            return None  # refused (reported), or a link to nothing
        real = self._confined(path.with_name(compressed.packed_name(path.name)))
        return (real, True) if real is not None else None

    def missing(self, path: Path) -> bool:
        """Neither ``path`` nor ``path.gz`` is there (not even as a link)."""
        return not os.path.lexists(path) and not os.path.lexists(
            path.with_name(compressed.packed_name(path.name)))

    @staticmethod
    def _read(found: tuple[Path, bool], cap: int, *, truncate: bool = False
              ) -> tuple[bytes, int | None]:
        """(what the file holds, at most ``cap`` bytes with ``truncate``; its size, None when
        a compressed file was cut at ``cap``)."""
        real, packed = found
        if not packed:
            return safefile.read_bytes(real, cap, truncate=truncate)
        data, cut = compressed.inflate_file(real, cap, truncate=truncate)
        return data, None if cut else len(data)

    def json(self, path: Path, default: Any = None, *, required: bool = False,
             kind: str | None = None) -> Any:
        kept = self._written_json(path)
        found = self._located(path) if kept is None else None
        if kept is None and found is None:
            if required and self.missing(path):
                self.problem(path, "missing")
            return default
        try:
            if kept is not None:  # as its file would be read: within the cap, inflated
                data = compressed.inflate(kept.data, safefile.MAX_JSON_BYTES)[0] \
                    if kept.packed else kept.data
            else:
                assert found is not None
                data, _ = self._read(found, safefile.MAX_JSON_BYTES)
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

    def _stored(self, path: Path) -> tuple[Path, bool, int] | None:
        """(the file holding ``path``, resolved inside the trace; whether compressed; its
        size), found once per path (a file not there is looked for again)."""
        if path in self._found:
            return self._found[path]
        found = self._located(path)
        if found is None:
            return None
        try:
            size = os.stat(found[0]).st_size
        except OSError:
            return None
        got = self._found[path] = (found[0], found[1], size)
        return got

    def stored_size(self, path: Path) -> tuple[bool, int] | None:
        """(whether the file holding ``path`` is compressed, its size); None where there is
        none: two files of different sizes never hold the same bytes."""
        got = self._stored(path)
        return None if got is None else (got[1], got[2])

    def digest(self, path: Path) -> str | None:
        """A digest of the file's bytes (None: missing, refused, unreadable, over the JSON
        cap): two files with one digest hold the same text, so what is read from one is what
        the other holds. A compressed file's digest is of its stored bytes (the same text packs
        to the same bytes), never equal to a plain file's. Worked out once per file, as the
        reader reads each file once (an open trace compared with one trace after another)."""
        if path in self._digests:
            return self._digests[path]
        got = self._stored(path)
        if got is None:
            return None
        try:
            data, _ = safefile.read_bytes(got[0], safefile.MAX_JSON_BYTES)
        except (safefile.Refused, OSError):
            return None
        import hashlib  # its OpenSSL binding loads in milliseconds: only when files are compared

        digest = self._digests[path] = ("gz:" if got[1] else "") + hashlib.sha1(data).hexdigest()
        return digest

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
        found = self._located(path)
        if found is None:
            return None
        try:
            data, size = self._read(found, limit, truncate=True)
        except safefile.Refused as e:
            self.problem(path, str(e))
            return None
        except OSError as e:
            self.problem(path, f"unreadable ({e.strerror or e})")
            return None
        except ValueError as e:  # a compressed file damaged
            self.problem(path, f"corrupt ({e})")
            return None
        if b"\x00" in data[:8192]:
            self.problem(path, "binary content; not shown")
            return f"<binary file, {size if size is not None else len(data)} bytes; not shown>"
        text = data.decode("utf-8", errors="replace")
        if size is None or size > limit:
            more = "more bytes" if size is None else f"{size - limit} more bytes"
            self.problem(path, f"over {limit} bytes; only the first {limit} are shown"
                         if size is None else f"{size} bytes; only the first {limit} are shown")
            text += f"\n… truncated: {more} not shown\n"
        return text
