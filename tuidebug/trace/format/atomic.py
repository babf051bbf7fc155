"""Atomic file writes: a reader never sees half a file, whatever happens to the writer."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def _file_mode() -> int:
    """The mode ``open()`` gives a new file: 0o666 less the umask (``mkstemp`` makes 0o600)."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


_FILE_MODE = _file_mode()


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory and a rename."""
    write_bytes(path, text.encode("utf-8", "surrogateescape"))


def write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename."""
    import tempfile  # with shutil, random, bz2 and lzma: not for a command that only reads

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), _FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def compact_json(data: Any) -> str:
    """``data`` as the compact JSON text of big generated files (no spaces, non-ASCII kept)."""
    return json.dumps(data, separators=(",", ":"), default=_fallback, ensure_ascii=False)


def json_text(data: Any, *, compact: bool = False) -> str:
    """The text ``write_json`` writes: JSON, indented for people; ``compact`` for big
    generated files (several times faster)."""
    if compact:
        return compact_json(data) + "\n"
    return json.dumps(data, indent=1, default=_fallback, ensure_ascii=False) + "\n"


def write_json(path: Path, data: Any, *, compact: bool = False) -> None:
    """JSON, indented for people; ``compact`` for big generated files (several times faster)."""
    write_text(path, json_text(data, compact=compact))


def append_jsonl(path: Path, record: Any) -> None:
    """Append one JSON line. A crash can at worst truncate the last line; readers skip it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, default=_fallback, ensure_ascii=False)
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def _fallback(obj: Any) -> Any:
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    return repr(obj)
