"""Import a TORCH_TRACE log or directory, or a TORCH_COMPILE_DEBUG folder, into a new trace
directory, written beside it and renamed into place when complete. Pure text; no torch."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from tuidebug.errors import ImportFailed
from tuidebug.trace.format.written import Written
from tuidebug.trace.importers.sources import choose_log, detect, list_ranks


def import_path(path: str | os.PathLike[str], out_dir: str | os.PathLike[str],
                rank: int | None = None, *,
                on_progress: Callable[[str], None] | None = None,
                cache_key: str | None = None, written: Written | None = None) -> Path:
    """Import a TORCH_TRACE log or directory, or a TORCH_COMPILE_DEBUG folder, into the new
    trace directory ``out_dir`` (which must not exist, or be empty). For a multi-rank source,
    ``rank`` picks the rank (default: the lowest); ``list_ranks`` says which exist.
    Returns ``out_dir``. The trace is written beside it and renamed into place when complete.
    ``written``: what is written, kept for a reader of the trace in this process
    (``Trace(out_dir, written=)``: the summary ``tuidebug import`` prints)."""
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

            log, notes = choose_log(p, rank)
            imp: Any = TorchTraceImporter(log, tmp, source=p, ranks=ranks,
                                          on_progress=on_progress, cache_key=cache_key,
                                          written=written)
            imp.warnings += notes
        else:
            from tuidebug.trace.importers.debug_dir import DebugDirImporter

            try:
                imp = DebugDirImporter(p, tmp, rank=rank, ranks=ranks, on_progress=on_progress,
                                       cache_key=cache_key, written=written)
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

