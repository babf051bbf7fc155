"""Identical files of a job's ranks stored once: hard links within the job directory. No torch.

After a job ends (the launching ``tuidebug trace``, ``tuidebug merge``), every regular file of
every ``rank_<r>/`` whose content equals a file already seen (same size, same SHA-256) is
replaced by a hard link to that file: a temporary link made next to it, renamed over it
(atomic; a reader sees the old file or the link, never neither). Each ``rank_<r>/`` stays a
complete trace that reads, packs and copies as before — a hard link is a second name for the
same bytes, inside the job directory, and the reader's confinement (no symbolic links, no path
out of the trace) is untouched. Files are never modified in place afterwards (every trace write
is a new file renamed into place), so a later write to one rank's file never reaches another's.

Symbolic links and anything that is not a regular file are left alone and never followed.
A rank whose record says it is still ``running`` (another node's, or another launcher's on
this host, in a shared job folder) is left alone: it may still append to its files
(``autotune.jsonl``, ``launches.jsonl`` are opened by name in append mode), and an append to a
file linked to another rank's would change that rank's file too.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any, Iterator

from tuidebug.trace.jobs import job as joblayout
from tuidebug.trace.format import safefile

CHUNK = 1 << 20


def _files(top: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """Every regular file below ``top`` (``lstat``: links are not followed, nor entered)."""
    stack = [top]
    while stack:
        d = stack.pop()
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                stack.append(Path(e.path))
            elif stat.S_ISREG(st.st_mode):
                yield Path(e.path), st


def _sha256(path: Path) -> str | None:
    h = hashlib.sha256()
    try:
        with safefile.open_regular(path, no_link=True) as f:
            while chunk := f.read(CHUNK):
                h.update(chunk)
    except (OSError, safefile.Refused):
        return None
    return h.hexdigest()


def disk_bytes(root: Path) -> int:
    """Bytes the job's rank traces take on disk, each inode counted once."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for r in joblayout.rank_dirs(root):
        for _, st in _files(joblayout.rank_dir(root, r)):
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def _ended(root: Path) -> list[int]:
    """The ranks with a trace folder whose record does not say they are still running."""
    running = {r["rank"] for r in joblayout.read_job(root)["ranks"]
               if r.get("status") == "running"}
    return [r for r in joblayout.rank_dirs(root) if r not in running]


def link_identical(root: Path, *, min_size: int = 1) -> dict[str, Any]:
    """Hard-link identical files across (and within) the ranks of job directory ``root`` that
    ended. Returns ``{files, linked, bytes_before, bytes_after, running}`` (bytes counted once
    per inode; ``running``: the ranks left alone, still running)."""
    root = Path(root)
    before = disk_bytes(root)
    by_size: dict[int, list[tuple[Path, os.stat_result]]] = {}
    files = 0
    ended = _ended(root)
    for r in ended:
        for path, st in _files(joblayout.rank_dir(root, r)):
            files += 1
            if st.st_size >= min_size:
                by_size.setdefault(st.st_size, []).append((path, st))
    linked = 0
    for same_size in by_size.values():
        if len(same_size) < 2:
            continue
        first: dict[str, tuple[Path, os.stat_result]] = {}
        for path, st in same_size:
            digest = _sha256(path)
            if digest is None:
                continue
            if digest not in first:
                first[digest] = (path, st)
                continue
            src, sst = first[digest]
            if (sst.st_dev, sst.st_ino) == (st.st_dev, st.st_ino) or sst.st_dev != st.st_dev:
                continue  # already one file; or another file system (no link possible)
            tmp = path.with_name(f".{path.name}.link-{os.getpid()}")
            try:
                os.link(src, tmp, follow_symlinks=False)
                os.replace(tmp, path)
                linked += 1
            except OSError:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
    return {"files": files, "linked": linked, "bytes_before": before,
            "bytes_after": disk_bytes(root),
            "running": sorted(set(joblayout.rank_dirs(root)) - set(ended))}
