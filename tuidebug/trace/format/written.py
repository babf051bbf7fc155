"""What a ``TraceWriter`` wrote in this process, kept for a reader of the same trace.

``tuidebug import`` prints the summary of the trace it has just written: read back from disk,
every JSON document was read, decompressed and confined again, and every code file and
snapshot peeked at for damage — a fifth of the summary's time on a large import. A reader
given the ``Written`` of its trace's writer takes each JSON document the writer wrote from
memory (its bytes as stored, a compressed one inflated: then parsed and checked against its
shape as a file would be, so the reader sees exactly what a reader of the files sees) and knows
each other file it wrote whole (its size, and whether its head holds a NUL byte: what the
reader's integrity check peeks at). A file written since by anything else, or appended to,
is read from disk. Keys: paths relative to the trace root, as ``/``-joined text.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from tuidebug.trace.format.safefile import MAX_JSON_BYTES

PEEK_BYTES = 8192  # the head the reader's integrity check looks at for a NUL byte
TAIL_BYTES = 64  # the end it looks at for a JSON object cut short


@dataclass(frozen=True)
class WrittenFile:
    """A file the writer wrote whole: its size in bytes (as stored uncompressed), whether its
    first ``PEEK_BYTES`` hold a NUL byte, and its last ``TAIL_BYTES``."""
    size: int
    binary: bool
    tail: bytes


@dataclass(frozen=True)
class Document:
    """A JSON document as the writer stored it: its bytes, compressed where ``packed`` (a
    ``NAME.gz`` of format 2: kept as stored, a fraction of the text, inflated when read)."""
    data: bytes
    packed: bool


class Written:
    """The JSON documents and files one writer wrote (the last write of each path)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._json: dict[str, Document] = {}
        self._files: dict[str, WrittenFile] = {}

    def keep(self, rel: str, data: bytes, *, is_json: bool, packed: bytes | None = None
             ) -> None:
        """``rel`` now holds ``data`` (its content, uncompressed), written whole (as
        ``packed``, its compressed bytes, where stored so); ``is_json``: a JSON document a
        reader may take from here. A document over the reader's cap (``MAX_JSON_BYTES``) is
        not kept (only its ``WrittenFile``): a reader refuses it from its file as ever, and
        its bytes would stay in memory for the process's life for nothing."""
        with self._lock:
            self._files[rel] = WrittenFile(len(data), b"\x00" in data[:PEEK_BYTES],
                                           data[-TAIL_BYTES:])
            if is_json and len(data) <= MAX_JSON_BYTES:
                self._json[rel] = Document(data, False) if packed is None else \
                    Document(packed, True)
            else:
                self._json.pop(rel, None)

    def forget(self, rel: str) -> None:
        """``rel`` changed in a way not kept (appended to, or a write that failed)."""
        with self._lock:
            self._json.pop(rel, None)
            self._files.pop(rel, None)

    def document(self, rel: str) -> Document | None:
        """The JSON document the writer wrote at ``rel``; None when it wrote none there."""
        return self._json.get(rel)

    def file(self, rel: str) -> WrittenFile | None:
        """The file the writer wrote whole at ``rel``; None when it wrote none there."""
        return self._files.get(rel)
