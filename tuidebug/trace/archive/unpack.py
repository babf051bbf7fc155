"""Open a packed trace (``.tar.gz``) safely: an archive is untrusted data.

``unpack(archive)`` extracts into a cache folder named by the archive's sha256 (reused when the
same archive is opened again) and returns the trace directory. Only regular files and folders
are taken, each by its own ``write``: no absolute name, no ``..``, no link, device or FIFO, no
name outside the archive's one top-level folder; the number of members and the bytes written
are capped (``MAX_BYTES``, ``MAX_MEMBERS``, overridable by environment), so that a gzip bomb
stops with a message. When the archive carries a pack manifest (``tuidebug pack``), every file
must be listed there with the same sha256 and size, and every listed file present.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import time
from pathlib import Path
from typing import Any

from tuidebug.errors import UnpackError
from tuidebug.trace.format import schema
from tuidebug.trace.archive.pack import PACK_FORMAT, PACK_MANIFEST

CACHE_DIR_ENV = "TUIDEBUG_ARCHIVE_CACHE"
MAX_BYTES_ENV = "TUIDEBUG_UNPACK_MAX_BYTES"
MAX_BYTES = 4 << 30  # 4 GiB uncompressed
MAX_MEMBERS = 200_000
_CHUNK = 1 << 20
_DONE = ".tuidebug-unpacked"  # written last: a folder without it is an unfinished unpack


def is_archive(path: str | os.PathLike[str]) -> bool:
    """A file that starts as gzip does (``tuidebug pack`` writes ``.tar.gz``)."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            return p.is_file() and f.read(2) == b"\x1f\x8b"
    except OSError:
        return False


def cache_root() -> Path:
    from tuidebug.trace.importers.cache import user_cache_dir

    return user_cache_dir("archives", CACHE_DIR_ENV)


def _max_bytes() -> int:
    try:
        return int(os.environ.get(MAX_BYTES_ENV, MAX_BYTES))
    except ValueError:
        return MAX_BYTES


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def safe_member_path(name: str) -> tuple[str, ...]:
    """The parts of a member's name, or UnpackError when the name could leave the folder."""
    if not name or "\x00" in name or "\\" in name:
        raise UnpackError(f"unsafe name in archive: {name!r}")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise UnpackError(f"absolute path in archive: {name!r}")
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if any(p == ".." for p in parts) or not parts:
        raise UnpackError(f"path escaping the archive: {name!r}")
    return parts


def _checked_members(tar: tarfile.TarFile) -> tuple[str, list[tuple[tarfile.TarInfo, tuple[str, ...]]]]:
    """The archive's members, all checked before anything is written: the top-level folder and
    each member with its path inside it."""
    members: list[tuple[tarfile.TarInfo, tuple[str, ...]]] = []
    tops: set[str] = set()
    total = 0
    limit = _max_bytes()
    for n, m in enumerate(tar):
        if n >= MAX_MEMBERS:
            raise UnpackError(f"more than {MAX_MEMBERS} members: not a trace")
        parts = safe_member_path(m.name)
        if m.issym() or m.islnk():
            raise UnpackError(f"link in archive: {m.name!r} (a packed trace has none)")
        if not (m.isreg() or m.isdir()):
            raise UnpackError(f"special file in archive: {m.name!r} (a packed trace has none)")
        tops.add(parts[0])
        if m.isreg():
            if len(parts) < 2:
                raise UnpackError(f"file outside the trace's folder: {m.name!r}")
            total += m.size
            if total > limit:
                raise UnpackError(f"archive unpacks to more than {limit} bytes "
                                  f"(raise {MAX_BYTES_ENV} to open it)")
            members.append((m, parts[1:]))
    if len(tops) != 1:
        raise UnpackError("a packed trace has one top-level folder; this archive has "
                          f"{len(tops) or 'none'}")
    return tops.pop(), members


def _extract(tar: tarfile.TarFile, members: list[tuple[tarfile.TarInfo, tuple[str, ...]]],
             dest: Path) -> None:
    limit = _max_bytes()
    written = 0
    for m, parts in members:
        target = dest.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        src = tar.extractfile(m)
        if src is None:
            raise UnpackError(f"unreadable member: {m.name!r}")
        # O_EXCL|O_NOFOLLOW: a name given twice, or one that meets a link, is refused
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                         | getattr(os, "O_NOFOLLOW", 0), 0o644)
        except FileExistsError:
            raise UnpackError(f"name given twice in archive: {m.name!r}") from None
        with os.fdopen(fd, "wb") as out:
            for chunk in iter(lambda: src.read(_CHUNK), b""):
                written += len(chunk)
                if written > limit:
                    raise UnpackError(f"archive unpacks to more than {limit} bytes")
                out.write(chunk)


def _verify(dest: Path) -> dict[str, Any] | None:
    """Check the files against the pack manifest, when there is one."""
    mpath = dest / PACK_MANIFEST
    if not mpath.is_file():
        return None
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
        files = manifest["files"]
        assert manifest.get("format") == PACK_FORMAT and isinstance(files, dict)
    except (ValueError, KeyError, TypeError, AssertionError):
        raise UnpackError(f"damaged pack manifest ({PACK_MANIFEST})") from None
    present = {p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()}
    present.discard(PACK_MANIFEST)
    if present != set(files):
        extra, missing = sorted(present - set(files)), sorted(set(files) - present)
        raise UnpackError(f"archive does not match its manifest (not listed: {extra[:3]}, "
                          f"missing: {missing[:3]})")
    for rel, meta in files.items():
        if not isinstance(meta, dict) or _sha256_file(dest / rel) != meta.get("sha256"):
            raise UnpackError(f"{rel}: sha256 differs from the pack manifest (damaged archive)")
    return manifest


def unpack(archive: str | os.PathLike[str], cache: str | os.PathLike[str] | None = None) -> Path:
    """The trace inside ``archive``, unpacked (once) under ``cache`` (default ``cache_root()``)."""
    src = Path(archive)
    try:
        digest = _sha256_file(src)
    except OSError as e:
        raise UnpackError(f"cannot read {src}: {e.strerror or e}") from e
    root = Path(cache) if cache is not None else cache_root()
    final = root / digest[:32]
    if (final / _DONE).is_file():
        return _trace_dir(final)
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{digest[:32]}.{os.getpid()}-{int(time.time() * 1000)}"
    tmp.mkdir()
    try:
        try:
            with tarfile.open(src, mode="r:gz") as tar:
                top, members = _checked_members(tar)
                _extract(tar, members, tmp / top)
        except (tarfile.TarError, EOFError, OSError) as e:
            raise UnpackError(f"{src}: not a readable .tar.gz ({e})") from e
        (tmp / top).mkdir(exist_ok=True)
        _verify(tmp / top)
        if not (tmp / top / schema.MANIFEST).is_file():
            raise UnpackError(f"{src}: the archive holds no tuidebug trace "
                              f"({top}/{schema.MANIFEST} missing)")
        (tmp / _DONE).write_text(json.dumps({"archive": str(src), "sha256": digest}))
        try:
            os.replace(tmp, final)
        except OSError:
            if not (final / _DONE).is_file():  # not another process's identical unpack
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return _trace_dir(final)


def _trace_dir(folder: Path) -> Path:
    for d in sorted(folder.iterdir()):
        if d.is_dir() and not d.is_symlink():
            return d
    raise UnpackError(f"{folder}: unpacked folder holds no trace")
