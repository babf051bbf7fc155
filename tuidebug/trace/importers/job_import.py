"""A multi-rank TORCH_TRACE folder as a job directory: every rank's log imported into
``rank_<r>/`` with its record, so the cross-rank analysis (``tuidebug.trace.jobs.ranks``) reads it as
it reads a job traced by tuidebug. Pure text; no torch.

Made once per source (beside it as ``<folder>.job.tuidebug``, else in the user cache) and
reused while no log changed, as single imports are (``cache.py``). What the logs lack (every
rank's ``imported_from.missing``) is said by :func:`missing`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Callable

from tuidebug.errors import ImportFailed, TraceError
from tuidebug.trace.format import atomic
from tuidebug.trace.format.manifest import find_manifest, read_manifest
from tuidebug.trace.jobs import job as joblayout
from tuidebug.trace.format import safefile
from tuidebug.trace.importers.cache import build_cached, cache_root, source_key
from tuidebug.trace.importers.convert import import_path
from tuidebug.trace.importers.sources import detect, list_ranks

MARKER = "import.json"


def is_multi_rank(path: str | os.PathLike[str]) -> bool:
    p = Path(path)
    return p.is_dir() and detect(p) == "torch_trace" and len(list_ranks(p)) > 1


def _candidates(p: Path) -> list[Path]:
    digest = hashlib.sha256(f"{p}\0job".encode()).hexdigest()[:24]
    return [p.parent / f"{p.name}.job.tuidebug", cache_root() / f"job-{digest}"]


def _marker(d: Path) -> dict[str, Any]:
    try:
        data = safefile.read_json(d / MARKER)
    except (OSError, ValueError, safefile.Refused):
        return {}
    return data if isinstance(data, dict) else {}


def _build(src: Path, out: Path, key: str, on_progress: Callable[[str], None] | None) -> None:
    ranks = list_ranks(src)
    world = max(ranks) + 1
    for r in ranks:
        if on_progress:
            on_progress(f"importing rank {r} of {len(ranks)}")
        status = "ok"
        try:
            t = import_path(src, joblayout.rank_dir(out, r), r)
            status = read_manifest(t).status or "unknown"
        except (ImportFailed, TraceError, OSError, ValueError) as e:
            status = f"not imported: {e}"[:300]
        joblayout.write_record(out, {"rank": r, "world_size": world, "status": status,
                                     "trace": joblayout.rank_dir(out, r).name,
                                     "launcher": "TORCH_TRACE", "hostname": None,
                                     "node_rank": None, "local_rank": None})
    joblayout.write_job(out, launcher="TORCH_TRACE")
    from tuidebug.trace.jobs.dedup import link_identical

    link_identical(out)
    atomic.write_json(out / MARKER, {"source": str(src), "key": key, "ranks": ranks})


def ensure_job(path: str | os.PathLike[str], *,
               on_progress: Callable[[str], None] | None = None) -> Path:
    """The job directory of multi-rank TORCH_TRACE folder ``path`` (imported once, reused
    while its logs are unchanged)."""
    src = Path(path).resolve()
    key = source_key(src, rank=-1)
    candidates = _candidates(src)
    for c in candidates:
        if _marker(c).get("key") == key:
            return c
    return build_cached(src, candidates, is_ours=lambda c: bool(_marker(c)),
                        current=lambda c: _marker(c).get("key") == key,
                        build=lambda out: _build(src, out, key, on_progress))


def import_job(path: str | os.PathLike[str], out: Path) -> Path:
    """Import every rank of ``path`` into the new job directory ``out``."""
    src = Path(path).resolve()
    if out.exists() and any(out.iterdir()):
        raise ImportFailed(f"{out} is not empty")
    _build(src, out, source_key(src, rank=-1), None)
    return out


def missing(job: Path) -> list[str]:
    """What the ranks' logs do not hold (the union of their imports' ``missing``)."""
    out: list[str] = []
    for r in joblayout.rank_dirs(job):
        m = find_manifest(joblayout.rank_dir(job, r))
        miss = (m.imported_from or {}).get("missing") if m is not None else None
        for x in miss if isinstance(miss, list) else []:
            if isinstance(x, str) and x not in out:
                out.append(x)
    return out
