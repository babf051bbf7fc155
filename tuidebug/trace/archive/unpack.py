"""Open a packed trace (``.tar.gz``) safely: an archive is untrusted data.

``unpack(archive)`` extracts into a cache folder named by the archive's sha256 (reused when the
same archive is opened again) and returns the trace directory. Only regular files and folders
are taken, each by its own ``write``: no absolute name, no ``..``, no link, device, FIFO or
sparse member, no name outside the archive's one top-level folder. Before the tar reader holds
anything, a header's own size is capped (a PAX or GNU long-name header announcing gigabytes is
refused, ``MAX_HEADER_BYTES``); the number of members and the bytes written are capped
(``MAX_BYTES``, ``MAX_MEMBERS``, overridable by environment), so that a gzip bomb stops with a
message, and a corrupt deflate stream is a clear error. Every file must be listed in the pack
manifest (``tuidebug pack`` writes it last) with the same sha256 and size, and every listed file
be present: an archive without it is damaged.

The cache: ``v2-<sha256>/`` holds ``trace/<top folder>`` (the top folder's name made safe for
the file system) and ``done.json``, written last: no member name can meet the bookkeeping. An
unpack interrupted (its process gone) leaves a ``.v2-…`` folder that the next unpack removes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tarfile
import time
import zlib
from pathlib import Path
from typing import Any

from tuidebug.errors import UnpackError
from tuidebug.trace.archive.pack import MAX_BYTES, PACK_FORMAT, PACK_MANIFEST
from tuidebug.trace.format import safefile, schema

CACHE_DIR_ENV = "TUIDEBUG_ARCHIVE_CACHE"
MAX_BYTES_ENV = "TUIDEBUG_UNPACK_MAX_BYTES"
MAX_MEMBERS = 200_000
MAX_HEADER_BYTES = 1 << 20  # a PAX or GNU long-name header (a name, a few fields)
_CHUNK = 1 << 20
_KEY = "v2-"  # the cache layout: trace/<top> beside done.json
_TREE = "trace"
_DONE = "done.json"  # written last: a folder without it is an unfinished unpack
_PARTIAL = re.compile(r"^\.v2-[0-9a-f]{32}\.(?P<pid>\d+)-\d+$")
# header types whose data the tar reader reads into memory (a name, PAX records)
_HEADER_TYPES = {tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE,
                 tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE}


class _CappedTarInfo(tarfile.TarInfo):
    """A tar header whose extended headers are capped before they are read into memory, and
    whose sparse forms (a packed trace has none) are refused before they are followed."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in _HEADER_TYPES and self.size > MAX_HEADER_BYTES:
            raise UnpackError(f"an archive header of {self.size:,} bytes (over "
                              f"{MAX_HEADER_BYTES:,}): not a packed trace")
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise UnpackError(f"sparse member in archive: {safefile.safe_str(self.name)!r}")
        return super()._proc_member(tarfile_)  # type: ignore[misc]

    def _no_sparse(self, *args: Any) -> None:
        raise UnpackError("sparse member in archive (a packed trace has none)")

    # the GNU sparse forms of a PAX header (1.0 reads a count of its own from the data)
    _proc_gnusparse_00 = _proc_gnusparse_01 = _proc_gnusparse_10 = _no_sparse


def is_archive(path: str | os.PathLike[str]) -> bool:
    """A regular file that starts as gzip does (``tuidebug pack`` writes ``.tar.gz``)."""
    try:
        head, _ = safefile.read_bytes(Path(path), 2, truncate=True)
    except (OSError, safefile.Refused):
        return False
    return head == b"\x1f\x8b"


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
    with safefile.open_regular(path) as f:
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


def _verify(dest: Path) -> dict[str, Any]:
    """Check the files against the pack manifest; an archive without one is damaged."""
    mpath = dest / PACK_MANIFEST
    if not mpath.is_file():
        raise UnpackError(f"damaged archive: its pack manifest ({PACK_MANIFEST}, written last "
                          "by tuidebug pack) is missing, so its files cannot be checked")
    try:
        manifest = safefile.read_json(mpath, no_link=True)
        files = manifest["files"]
        assert manifest.get("format") == PACK_FORMAT and isinstance(files, dict)
    except (ValueError, KeyError, TypeError, AssertionError, safefile.Refused):
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


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _clean_interrupted(root: Path) -> None:
    """Remove the partial unpacks of processes that are gone (killed mid-unpack)."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for e in entries:
        m = _PARTIAL.match(e.name)
        if m and e.is_dir(follow_symlinks=False) and not _pid_alive(int(m["pid"])):
            shutil.rmtree(e.path, ignore_errors=True)


def unpack(archive: str | os.PathLike[str], cache: str | os.PathLike[str] | None = None) -> Path:
    """The trace inside ``archive``, unpacked (once) under ``cache`` (default ``cache_root()``)."""
    src = Path(archive)
    try:
        digest = _sha256_file(src)
    except (OSError, safefile.Refused) as e:
        raise UnpackError(f"cannot read {src}: {getattr(e, 'strerror', None) or e}") from e
    root = Path(cache) if cache is not None else cache_root()
    final = root / f"{_KEY}{digest[:32]}"
    if (final / _DONE).is_file():
        return _trace_dir(final)
    root.mkdir(parents=True, exist_ok=True)
    _clean_interrupted(root)
    tmp = root / f".{_KEY}{digest[:32]}.{os.getpid()}-{int(time.time() * 1000)}"
    tmp.mkdir()
    try:
        try:
            with tarfile.open(src, mode="r:gz", tarinfo=_CappedTarInfo) as tar:
                top, members = _checked_members(tar)
                dest = tmp / _TREE / safefile.safe_name(top)
                dest.mkdir(parents=True)
                _extract(tar, members, dest)
        except UnpackError:
            raise
        except (tarfile.TarError, EOFError, OSError, zlib.error, ValueError) as e:
            raise UnpackError(f"{src}: not a readable .tar.gz ({e})") from e
        _verify(dest)
        if not (dest / schema.MANIFEST).is_file():
            raise UnpackError(f"{src}: the archive holds no tuidebug trace "
                              f"({schema.MANIFEST} missing in its folder)")
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
    tree = folder / _TREE
    for d in sorted(tree.iterdir()) if tree.is_dir() else []:
        if d.is_dir() and not d.is_symlink():
            return d
    raise UnpackError(f"{folder}: unpacked folder holds no trace")
