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

from tuidebug.errors import ImportFailed
from tuidebug.trace.importers.cache import (CACHE_DIR_ENV, IMPORTER_VERSION, cache_dir_for,
                                            cache_root, ensure_trace, source_key)
from tuidebug.trace.importers.convert import import_path
from tuidebug.trace.importers.sources import Kind, detect, list_ranks, log_rank, trace_logs

__all__ = ["CACHE_DIR_ENV", "IMPORTER_VERSION", "ImportFailed", "Kind", "cache_dir_for",
           "cache_root", "detect", "ensure_trace", "import_path", "list_ranks", "log_rank",
           "source_key", "trace_logs"]
