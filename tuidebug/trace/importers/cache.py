"""The import cache: a trace directory for any source, imported once and reused while the
source is unchanged (beside the source, else in the user's cache). Pure text; no torch."""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path
from typing import Callable

from tuidebug.version import __version__
from tuidebug.trace.format import schema
from tuidebug.trace.format import safefile
from tuidebug.trace.importers.convert import import_path
from tuidebug.errors import ImportFailed
from tuidebug.trace.importers.sources import TRACE_DIR_LOG_RE, Kind, detect, trace_logs

# Bump when an importer writes something different: cached imports are then redone.
IMPORTER_VERSION = 3  # 2: printed graphs kept as text (stages/NNN-<name>.txt); 3: in-place
# operator nodes ("x += 1;  y = x") read, not dropped as corrupt
CACHE_DIR_ENV = "TUIDEBUG_IMPORT_CACHE"


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


def user_cache_dir(name: str, env_var: str) -> Path:
    """``$env_var`` when set, else ``~/.cache/tuidebug/<name>`` (``$XDG_CACHE_HOME`` honoured)."""
    env = os.environ.get(env_var)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tuidebug" / name


def cache_root() -> Path:
    return user_cache_dir("imports", CACHE_DIR_ENV)


def _source_root(p: Path) -> Path:
    """The outermost folder the source belongs to — a run folder's ``torch_compile_debug``,
    a log file's TORCH_TRACE directory — so that an import is made beside it, never inside."""
    from tuidebug.trace.importers import debug_dir

    if debug_dir._RUN_RE.match(p.name):
        return debug_dir.debug_root(p) or p
    if p.is_file() and p.parent.name == "tlparse" \
            and debug_dir.debug_root(p.parent.parent) == p.parent.parent:
        return p.parent.parent  # torch_compile_debug/tlparse/<log>
    if p.is_file() and (TRACE_DIR_LOG_RE.match(p.name) or len(trace_logs(p.parent)) > 1):
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
        m = safefile.read_json(trace / schema.MANIFEST)
    except (OSError, ValueError, safefile.Refused):
        return False
    imp = (m.get("imported_from") if isinstance(m, dict) else None) or {}
    if not isinstance(imp, dict):
        return False
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
    return build_cached(p, candidates, is_ours=_is_our_import,
                        current=lambda c: _up_to_date(c, key),
                        build=lambda out: import_path(p, out, rank, on_progress=on_progress,
                                                      cache_key=key))


def build_cached(source: Path, candidates: list[Path], *, is_ours: Callable[[Path], bool],
                 current: Callable[[Path], bool], build: Callable[[Path], None]) -> Path:
    """The first of ``candidates`` that ``build`` can fill: built into a temporary sibling,
    then moved into place. A directory tuidebug did not make (``is_ours``) is never replaced;
    when another process put a ``current`` one there meanwhile, that one is used."""
    last_error: Exception | None = None
    for c in candidates:
        if c.exists() and not is_ours(c):
            last_error = FileExistsError(f"{c} exists and is not an import made by tuidebug")
            continue  # never replace a directory we did not make
        try:
            _writable(c.parent)
        except OSError as e:
            last_error = e
            continue
        tmp_out = c.parent / f".{c.name}.new-{os.getpid()}-{int(time.time() * 1000)}"
        try:
            build(tmp_out)
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
                if current(c):  # another process made the same import meanwhile
                    shutil.rmtree(tmp_out, ignore_errors=True)
                    return c
                raise
            return c
        except OSError as e:
            shutil.rmtree(tmp_out, ignore_errors=True)
            last_error = e
            continue
    raise ImportFailed(f"could not write an import of {source}: {last_error}")


def _is_our_import(d: Path) -> bool:
    try:
        m = safefile.read_json(d / schema.MANIFEST)
    except (OSError, ValueError, safefile.Refused):
        return False
    return isinstance(m, dict) and m.get("format") == schema.FORMAT_NAME \
        and isinstance(m.get("imported_from"), dict) and "key" in m["imported_from"]

