"""One file to attach to a bug report: a trace as a ``.tar.gz`` with a manifest of hashes.

``pack(trace, out)`` writes every file of the trace under one top-level folder, plus
``PACK_MANIFEST`` (each file's sha256 and size) that ``tuidebug.trace.archive.unpack`` checks. With
``redact=True`` the generated code (wrapper, kernels, repro scripts) and the user's source lines
(the ``code`` of every source frame, the code lines of tracebacks) are left out; file names,
line numbers and everything else stay, so the trace still opens and navigates; a JSON file the
trace stores compressed (``NAME.json.gz``) is redacted and packed as ``NAME.json``.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import tarfile
import time
from pathlib import Path
from typing import Any, Iterator

from tuidebug.version import __version__
from tuidebug.errors import PackError
from tuidebug.trace.format import compressed, schema
from tuidebug.trace.format import safefile

PACK_MANIFEST = "tuidebug-pack.json"
PACK_FORMAT = "tuidebug-pack"
MAX_BYTES = safefile.MAX_FILE_BYTES  # what an archive may hold (unpack refuses more)
_CHUNK = 1 << 20
# files a redacted pack keeps under code/: the indexes and timings, not the generated code
_CODE_METADATA = {".json", ".jsonl"}
# a traceback line that names a frame, or one that is not indented (the exception itself)
_FRAME_LINE = re.compile(r'^\s*File "')
# a frame of a traceback stored as JSON inside a string (`File \"f.py\", line 3, in g\n    code`)
_NOT_NL = r"(?:[^\\]|\\(?!n))"
_ESCAPED_FRAME = re.compile(rf'(File \\"{_NOT_NL}*?\\", line \d+, in {_NOT_NL}*?)'
                            rf'(?:\\n {{2,}}{_NOT_NL}*)+')
# Dynamo's guard text ends a guard with `  # <source line>  # <file>:<line> in <fn>`
_GUARD_SOURCE = re.compile(r"  # [^\n]*?  # ([^\n]*?:\d+ in [^\n]*)")


def _trace_files(root: Path) -> Iterator[Path]:
    """Every regular file of the trace, in a stable order; links and special files are skipped
    (a trace never contains them; packing one would let a link point out of the archive)."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not os.path.islink(os.path.join(dirpath, d)))
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if p.is_file() and not p.is_symlink():
                yield p


def _dropped_by_redaction(rel: Path) -> bool:
    parts = rel.parts
    if "repro" in parts[:-1]:
        return True
    return "code" in parts[:-1] and rel.suffix not in _CODE_METADATA


def redact_traceback(text: str) -> str:
    """A traceback without its code lines: the ``File "…", line N, in fn`` lines and the
    exception's own lines stay, the indented source (and ``^^^`` markers) under them go."""
    kept = [ln for ln in text.splitlines() if _FRAME_LINE.match(ln) or not ln[:1].isspace()]
    return "\n".join(kept) + ("\n" if text.endswith("\n") else "")


def redact_json(value: Any) -> Any:
    """``value`` with every source frame's ``code`` set to None, tracebacks redacted and the
    source lines cut from guard text (each guard keeps its ``file:line in fn``)."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "code" and isinstance(v, str) and "line" in value:
                out[k] = None
            elif k == "guards" and isinstance(v, str):
                out[k] = _GUARD_SOURCE.sub(r"  # \1", v)
            else:
                out[k] = redact_json(v)
        return out
    if isinstance(value, list):
        return [redact_json(v) for v in value]
    if isinstance(value, str) and 'File ' in value:
        if "\n" in value:
            value = redact_traceback(value)
        return _ESCAPED_FRAME.sub(r"\1", value)
    return value


def _redacted_bytes(path: Path, data: bytes) -> bytes | None:
    """``data`` redacted; None when it cannot be (nested too deep to walk: left out)."""
    try:
        if path.suffix == ".json":
            try:
                doc = safefile.loads(data)
            except ValueError:
                return data  # not ours to fix: packed as it is
            return (json.dumps(redact_json(doc), indent=1, ensure_ascii=False) + "\n").encode()
        if path.suffix == ".jsonl":
            lines = []
            for line in data.decode("utf-8", "replace").splitlines():
                try:
                    lines.append(json.dumps(redact_json(safefile.loads(line)),
                                            ensure_ascii=False))
                except ValueError:
                    continue  # a torn last line: readers skip it too
            return ("\n".join(lines) + "\n").encode() if lines else b""
    except RecursionError:  # JSON nested near the reader's limit: too deep to redact
        return None
    return data


class _Hashing:
    """A file read through once for ``tarfile.addfile``: its sha256 taken on the way, and no
    more than the size ``stat`` gave (a file growing while packed is cut there)."""

    def __init__(self, f: Any, size: int) -> None:
        self.f, self.left, self.sha = f, size, hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        data = self.f.read(n)
        self.left -= len(data)
        self.sha.update(data)
        return data


def _info(name: str, size: int, mtime: float) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = 0o644
    info.mtime = int(mtime)
    info.type = tarfile.REGTYPE
    info.uname = info.gname = ""
    return info


def _add(tar: tarfile.TarFile, name: str, data: bytes, mtime: float) -> None:
    tar.addfile(_info(name, len(data), mtime), io.BytesIO(data))


def _add_file(tar: tarfile.TarFile, name: str, path: Path) -> tuple[str, int]:
    """Stream ``path`` into the archive (never held whole); (sha256, size)."""
    with safefile.open_regular(path, no_link=True) as f:
        st = os.fstat(f.fileno())
        src = _Hashing(f, st.st_size)
        tar.addfile(_info(name, st.st_size, st.st_mtime), src)
    return src.sha.hexdigest(), st.st_size


def pack(trace: str | os.PathLike[str], out: str | os.PathLike[str], *,
         redact: bool = False) -> dict[str, Any]:
    """Write ``trace`` to the gzip'd tar ``out`` (written whole, then renamed into place).
    Returns the pack manifest."""
    root = Path(trace)
    if not (root / schema.MANIFEST).is_file():
        raise PackError(f"{root} is not a tuidebug trace (no {schema.MANIFEST})")
    out = Path(out)
    top = root.resolve().name or "trace"
    now = time.time()
    files: dict[str, dict[str, Any]] = {}
    dropped = 0
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as raw, \
                gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=int(now)) as gz, \
                tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            total = 0
            for p in _trace_files(root):
                rel = p.relative_to(root)
                if redact and _dropped_by_redaction(rel):
                    dropped += 1
                    continue
                name = rel.as_posix()
                total += p.stat().st_size
                if total > MAX_BYTES:
                    raise PackError(f"{name}: the trace holds more than {MAX_BYTES:,} bytes "
                                    "(an archive may unpack to no more); not packed")
                logical = Path(compressed.logical_name(name))
                if redact and logical.suffix in _CODE_METADATA:
                    try:
                        data, _ = safefile.read_bytes(p, safefile.MAX_JSONL_BYTES, no_link=True)
                        if logical != rel:  # stored compressed: redacted, packed plain
                            data, _ = compressed.inflate(data, safefile.MAX_JSON_BYTES)
                    except safefile.Refused as e:
                        raise PackError(f"{name}: {e}") from None
                    except ValueError as e:
                        raise PackError(f"{name}: {e}; not packed") from None
                    redacted = _redacted_bytes(logical, data)
                    if redacted is None:
                        dropped += 1
                        continue
                    name = logical.as_posix()
                    # packed plain: its own size counts, not the stored .gz's (unpack checks
                    # what it unpacks to)
                    total += len(redacted) - p.stat().st_size
                    if total > MAX_BYTES:
                        raise PackError(f"{name}: the redacted trace holds more than "
                                        f"{MAX_BYTES:,} bytes (an archive may unpack to no "
                                        "more); not packed")
                    files[name] = {"sha256": hashlib.sha256(redacted).hexdigest(),
                                   "size": len(redacted)}
                    _add(tar, f"{top}/{name}", redacted, p.stat().st_mtime)
                    continue
                try:
                    sha, size = _add_file(tar, f"{top}/{name}", p)
                except safefile.Refused as e:
                    raise PackError(f"{name}: {e}") from None
                files[name] = {"sha256": sha, "size": size}
            manifest = {"format": PACK_FORMAT, "version": 1, "tool_version": __version__,
                        "created_at": now, "trace": top, "redacted": redact,
                        "dropped_files": dropped, "files": files}
            _add(tar, f"{top}/{PACK_MANIFEST}",
                 (json.dumps(manifest, indent=1) + "\n").encode(), now)
        os.replace(tmp, out)
    except (OSError, PackError) as e:
        try:
            tmp.unlink()
        except OSError:
            pass
        if isinstance(e, PackError):
            raise
        raise PackError(f"cannot write {out}: {e.strerror or e}") from e
    return manifest
