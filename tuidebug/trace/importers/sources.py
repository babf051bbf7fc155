"""What a path is (a tuidebug trace, a TORCH_TRACE log or directory, a TORCH_COMPILE_DEBUG
folder), its logs, their ranks, and which log an import reads. Pure text; no torch."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from tuidebug.trace.format import safefile
from tuidebug.errors import ImportFailed
from tuidebug.trace.format import schema
from tuidebug.trace.format.manifest import is_trace_dir
from tuidebug.trace.importers import tracelog

Kind = Literal["tuidebug", "torch_trace", "torch_compile_debug"]

# The files TORCH_TRACE=<dir> writes: dedicated_log_torch_trace_<…>.log
TRACE_DIR_LOG_RE = re.compile(r"^dedicated_log_torch_trace")
_RANK_RE = re.compile(r"(?:^|[_.-])rank_?(?P<rank>\d+)(?:[_.-]|$)")


# -- detection ------------------------------------------------------------------------------------

def trace_logs(path: str | os.PathLike[str]) -> list[Path]:
    """The TORCH_TRACE logs of a file or directory (the file itself, or the directory's
    files that look like one), sorted by name."""
    p = Path(path)
    if p.is_file():
        return [p] if tracelog.is_torch_trace_file(p) else []
    if not p.is_dir():
        return []
    out = []
    try:
        children = sorted(p.iterdir())
    except OSError:
        return []
    for c in children:
        if c.is_file() and not c.name.startswith(".") and tracelog.is_torch_trace_file(c):
            out.append(c)
    return out


def detect(path: str | os.PathLike[str]) -> Kind | None:
    """What ``path`` is: a tuidebug trace, a TORCH_TRACE log (file or directory), a
    TORCH_COMPILE_DEBUG folder, or None (none of these)."""
    p = Path(path)
    if not p.exists():
        return None
    if is_trace_dir(p):
        return "tuidebug"
    if p.is_dir():
        # imported here, for a folder only: it brings the whole importer (a fifth of a second)
        from tuidebug.trace.importers import debug_dir

        if debug_dir.is_debug_dir(p):
            return "torch_compile_debug"
    if trace_logs(p):
        return "torch_trace"
    return None


# -- ranks ----------------------------------------------------------------------------------------

def log_rank(log: Path) -> int | None:
    """The rank of a log: from its name (``dedicated_log_torch_trace_rank_3_x.log``), else from
    the ``rank`` field of its first records."""
    m = _RANK_RE.search(log.name)
    if m:
        return int(m["rank"])
    try:
        with safefile.open_regular(log) as f:
            for _ in range(30):
                raw = f.readline(safefile.MAX_LINE_BYTES)
                if not raw:
                    break
                if raw[:1] == b"\t" or b'"rank"' not in raw:
                    continue
                hm = tracelog._HEADER_RE.match(raw.rstrip(b"\r\n"))
                if hm:
                    try:
                        meta = safefile.loads(hm["json"])
                    except ValueError:
                        continue
                    if isinstance(meta.get("rank"), int):
                        return int(meta["rank"])
    except OSError:
        return None
    return None


def _logs_for(path: Path, kind: Kind) -> list[Path]:
    if kind == "torch_trace":
        return trace_logs(path)
    if kind == "torch_compile_debug":
        from tuidebug.trace.importers import debug_dir

        root = debug_dir.debug_root(path) or path
        return debug_dir.tlparse_logs(root)
    return []


def list_ranks(path: str | os.PathLike[str]) -> list[int]:
    """Ranks with a log under ``path`` (sorted); [] when the logs carry no rank."""
    p = Path(path)
    kind = detect(p)
    if kind == "tuidebug":
        try:
            m = safefile.read_json(p / schema.MANIFEST)
            ranks = (m.get("imported_from") or {}).get("ranks") or []
            return sorted(int(r) for r in ranks)
        except (OSError, ValueError, TypeError, AttributeError, safefile.Refused):
            return []
    if kind is None:
        return []
    ranks = {r for r in (log_rank(lg) for lg in _logs_for(p, kind)) if r is not None}
    return sorted(ranks)


def choose_log(path: Path, rank: int | None) -> tuple[Path, list[str]]:
    logs = trace_logs(path)
    if not logs:
        raise ImportFailed(f"{path}: no TORCH_TRACE log found")
    notes: list[str] = []
    ranked = {lg: log_rank(lg) for lg in logs}
    if rank is not None:
        cands = [lg for lg, r in ranked.items() if r == rank]
        if not cands:
            have = sorted({r for r in ranked.values() if r is not None})
            raise ImportFailed(f"{path}: no log for rank {rank}"
                               + (f"; ranks: {', '.join(map(str, have))}" if have else
                                  "; its logs carry no rank"))
    else:
        with_rank = sorted({r for r in ranked.values() if r is not None})
        if with_rank:
            cands = [lg for lg, r in ranked.items() if r == with_rank[0]]
            if len(with_rank) > 1:
                notes.append(f"{len(with_rank)} ranks in {path} "
                             f"({', '.join(map(str, with_rank))}); imported rank {with_rank[0]}")
        else:
            cands = logs
    chosen = max(cands, key=lambda lg: (mtime(lg), lg.name))
    others = [lg.name for lg in cands if lg != chosen]
    if others:
        notes.append(f"{len(others)} other log(s) in {path} not imported "
                     f"({', '.join(others[:5])}{'…' if len(others) > 5 else ''}); "
                     "open one file to import it")
    return chosen, notes


def mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0

