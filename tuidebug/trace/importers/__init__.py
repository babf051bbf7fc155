"""Open what PyTorch already writes: TORCH_TRACE logs and TORCH_COMPILE_DEBUG folders.

::

    from tuidebug.trace.importers import detect, ensure_trace, import_path, list_ranks

    detect(path)                 # "tuidebug" | "torch_trace" | "torch_compile_debug" | None
    list_ranks(path)             # [0, 1, …] for a multi-rank TORCH_TRACE directory, else []
    import_path(path, out_dir, rank=None)   # import into a new trace directory; returns it
    ensure_trace(path, rank=None)           # a trace directory for any of the above, imported
                                            # once into a cache and reused while up to date

The source is only read, never modified. What a log does not hold is listed in the trace's
``manifest.json`` under ``imported_from.missing`` ("not in this log; trace with tuidebug to get
it"); damaged lines are listed, with their line numbers, under ``warnings``. Nothing here
imports torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Literal

from tuidebug import __version__
from tuidebug.errors import ImportFailed
from tuidebug.trace import schema
from tuidebug.trace.importers import tracelog

Kind = Literal["tuidebug", "torch_trace", "torch_compile_debug"]

# Bump when an importer writes something different: cached imports are then redone.
IMPORTER_VERSION = 1
CACHE_DIR_ENV = "TUIDEBUG_IMPORT_CACHE"
# The files TORCH_TRACE=<dir> writes: dedicated_log_torch_trace_<…>.log
_TRACE_DIR_LOG_RE = re.compile(r"^dedicated_log_torch_trace")
_RANK_RE = re.compile(r"(?:^|[_.-])rank_?(?P<rank>\d+)(?:[_.-]|$)")

__all__ = ["ImportFailed", "detect", "ensure_trace", "import_path", "list_ranks", "log_rank",
           "trace_logs", "IMPORTER_VERSION"]


# -- detection ------------------------------------------------------------------------------------

def _is_tuidebug(path: Path) -> bool:
    if path.is_file() and path.name == schema.MANIFEST:
        path = path.parent
    if not path.is_dir():
        return False
    manifest = path / schema.MANIFEST
    if manifest.is_file():
        try:
            with open(manifest, "rb") as f:
                head = f.read(4096)
            if schema.FORMAT_NAME.encode() in head:
                return True
            data = json.loads(manifest.read_text(encoding="utf-8"))
            return isinstance(data, dict) and data.get("format") == schema.FORMAT_NAME
        except (OSError, ValueError):
            return (path / schema.GRAPHS_DIR).is_dir()
    return (path / schema.GRAPHS_DIR).is_dir() and not (path / "tlparse").is_dir()


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
    from tuidebug.trace.importers import debug_dir

    p = Path(path)
    if not p.exists():
        return None
    if _is_tuidebug(p):
        return "tuidebug"
    if p.is_dir() and debug_dir.is_debug_dir(p):
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
        with open(log, "rb") as f:
            for _ in range(30):
                raw = f.readline()
                if not raw:
                    break
                if raw[:1] == b"\t" or b'"rank"' not in raw:
                    continue
                hm = tracelog._HEADER_RE.match(raw.rstrip(b"\r\n"))
                if hm:
                    try:
                        meta = json.loads(hm["json"])
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
            m = json.loads((p / schema.MANIFEST).read_text(encoding="utf-8"))
            ranks = (m.get("imported_from") or {}).get("ranks") or []
            return sorted(int(r) for r in ranks)
        except (OSError, ValueError, TypeError):
            return []
    if kind is None:
        return []
    ranks = {r for r in (log_rank(lg) for lg in _logs_for(p, kind)) if r is not None}
    return sorted(ranks)


def _choose_log(path: Path, rank: int | None) -> tuple[Path, list[str]]:
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
    chosen = max(cands, key=lambda lg: (_mtime(lg), lg.name))
    others = [lg.name for lg in cands if lg != chosen]
    if others:
        notes.append(f"{len(others)} other log(s) in {path} not imported "
                     f"({', '.join(others[:5])}{'…' if len(others) > 5 else ''}); "
                     "open one file to import it")
    return chosen, notes


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0


# -- import ---------------------------------------------------------------------------------------

def import_path(path: str | os.PathLike[str], out_dir: str | os.PathLike[str],
                rank: int | None = None, *,
                on_progress: Callable[[str], None] | None = None) -> Path:
    """Import a TORCH_TRACE log or directory, or a TORCH_COMPILE_DEBUG folder, into the new
    trace directory ``out_dir`` (which must not exist, or be empty). For a multi-rank source,
    ``rank`` picks the rank (default: the lowest); ``list_ranks`` says which exist.
    Returns ``out_dir``. The trace is written beside it and renamed into place when complete."""
    p = Path(path)
    out = Path(out_dir)
    kind = detect(p)
    if kind is None:
        raise ImportFailed(f"{p}: not a tuidebug trace, a TORCH_TRACE log or a "
                           "torch_compile_debug folder")
    if kind == "tuidebug":
        raise ImportFailed(f"{p} is already a tuidebug trace; open it directly")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ImportFailed(f"output directory {out} exists and is not empty")
    parent = out.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.importing-", dir=parent))
    except OSError as e:
        raise ImportFailed(f"cannot write to {parent}: {e.strerror or e}") from e
    try:
        ranks = list_ranks(p)
        if kind == "torch_trace":
            from tuidebug.trace.importers.torch_trace import TorchTraceImporter

            log, notes = _choose_log(p, rank)
            imp: Any = TorchTraceImporter(log, tmp, source=p, ranks=ranks,
                                          on_progress=on_progress)
            imp.warnings += notes
        else:
            from tuidebug.trace.importers.debug_dir import DebugDirImporter

            try:
                imp = DebugDirImporter(p, tmp, rank=rank, ranks=ranks, on_progress=on_progress)
            except ValueError as e:
                raise ImportFailed(str(e)) from e
        imp.run()
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


# -- the import cache -----------------------------------------------------------------------------

def _source_files(p: Path, kind: Kind) -> list[Path]:
    if kind == "torch_trace":
        return trace_logs(p)
    from tuidebug.trace.importers import debug_dir

    root = debug_dir.debug_root(p) or p
    files: list[Path] = list(debug_dir.tlparse_logs(root))
    for run in ([p] if debug_dir._RUN_RE.match(p.name) else debug_dir.runs(root)):
        files += [f for f in run.rglob("*") if f.is_file()]
    return files


def source_key(path: str | os.PathLike[str], rank: int | None = None) -> str:
    """Changes whenever the source (any of its files), the rank or the importer changes."""
    p = Path(path).resolve()
    kind = detect(p)
    h = hashlib.sha256()
    h.update(f"{IMPORTER_VERSION}\0{__version__}\0{p}\0{kind}\0{rank}\0".encode())
    if kind in ("torch_trace", "torch_compile_debug"):
        for f in sorted(_source_files(p, kind)):
            try:
                st = f.stat()
            except OSError:
                continue
            h.update(f"{f}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:32]


def cache_root() -> Path:
    env = os.environ.get(CACHE_DIR_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tuidebug" / "imports"


def _source_root(p: Path) -> Path:
    """The outermost folder the source belongs to — a run folder's ``torch_compile_debug``,
    a log file's TORCH_TRACE directory — so that an import is made beside it, never inside."""
    from tuidebug.trace.importers import debug_dir

    if debug_dir._RUN_RE.match(p.name):
        return debug_dir.debug_root(p) or p
    if p.is_file() and p.parent.name == "tlparse" \
            and debug_dir.debug_root(p.parent.parent) == p.parent.parent:
        return p.parent.parent  # torch_compile_debug/tlparse/<log>
    if p.is_file() and (_TRACE_DIR_LOG_RE.match(p.name) or len(trace_logs(p.parent)) > 1):
        return p.parent
    return p


def cache_dir_for(path: str | os.PathLike[str], rank: int | None = None) -> list[Path]:
    """Where an import of ``path`` may be cached, in order of preference: beside the source
    (``<name>.tuidebug`` or ``<name>.rank<N>.tuidebug``; for a log file or run folder inside a
    TORCH_TRACE or ``torch_compile_debug`` folder, ``<folder>.<name>.tuidebug`` beside that
    folder), else in the user cache."""
    p = Path(path).resolve()
    root = _source_root(p)
    name = root.name if root == p else f"{root.name}.{p.name}"
    suffix = f".rank{rank}" if rank is not None else ""
    beside = root.parent / f"{name}{suffix}.tuidebug"
    digest = hashlib.sha256(f"{p}\0{rank}".encode()).hexdigest()[:24]
    return [beside, cache_root() / digest]


def _up_to_date(trace: Path, key: str) -> bool:
    try:
        m = json.loads((trace / schema.MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    imp = m.get("imported_from") or {}
    return imp.get("key") == key and m.get("status") in (schema.STATUS_OK, schema.STATUS_FAILED)


def _writable(d: Path) -> bool:
    d.mkdir(parents=True, exist_ok=True)
    probe = d / f".tuidebug-write-test-{os.getpid()}"
    probe.write_text("ok")
    probe.unlink()
    return True


def ensure_trace(path: str | os.PathLike[str], rank: int | None = None, *,
                 on_progress: Callable[[str], None] | None = None) -> Path:
    """A tuidebug trace directory for ``path``: the path itself for a tuidebug trace; for a
    TORCH_TRACE log/directory or a TORCH_COMPILE_DEBUG folder, its import, made once into a
    cache directory (beside the source, or ``~/.cache/tuidebug/imports/<hash>`` when the
    source's directory is not writable) and reused while the source is unchanged."""
    p = Path(path)
    kind = detect(p)
    if kind is None:
        if not p.exists():
            raise ImportFailed(f"no such file or directory: {p}")
        raise ImportFailed(f"{p}: not a tuidebug trace, a TORCH_TRACE log or a "
                           "torch_compile_debug folder")
    if kind == "tuidebug":
        return p.parent if p.is_file() else p
    key = source_key(p, rank)
    candidates = cache_dir_for(p, rank)
    for c in candidates:
        if _up_to_date(c, key):
            return c
    last_error: Exception | None = None
    for c in candidates:
        if c.exists() and not _is_our_import(c):
            last_error = FileExistsError(f"{c} exists and is not an import made by tuidebug")
            continue  # never replace a directory we did not make
        try:
            _writable(c.parent)
        except OSError as e:
            last_error = e
            continue
        tmp_out = c.parent / f".{c.name}.new-{os.getpid()}-{int(time.time() * 1000)}"
        try:
            import_path(p, tmp_out, rank, on_progress=on_progress)
            _stamp(tmp_out, key)
            if c.exists():
                old = c.parent / f".{c.name}.old-{os.getpid()}-{int(time.time() * 1000)}"
                try:
                    os.replace(c, old)
                except OSError:
                    old = None  # type: ignore[assignment]
                if old is not None:
                    shutil.rmtree(old, ignore_errors=True)
            try:
                os.replace(tmp_out, c)
            except OSError:
                if _up_to_date(c, key):  # another process made the same import meanwhile
                    shutil.rmtree(tmp_out, ignore_errors=True)
                    return c
                raise
            return c
        except OSError as e:
            shutil.rmtree(tmp_out, ignore_errors=True)
            last_error = e
            continue
    raise ImportFailed(f"could not write an import of {p}: {last_error}")


def _is_our_import(d: Path) -> bool:
    try:
        m = json.loads((d / schema.MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(m, dict) and m.get("format") == schema.FORMAT_NAME \
        and isinstance(m.get("imported_from"), dict) and "key" in m["imported_from"]


def _stamp(trace: Path, key: str) -> None:
    from tuidebug.trace import atomic

    mpath = trace / schema.MANIFEST
    m = json.loads(mpath.read_text(encoding="utf-8"))
    m.setdefault("imported_from", {})["key"] = key
    atomic.write_json(mpath, m)
