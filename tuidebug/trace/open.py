"""The one door: whatever the user names becomes a trace here.

Every command and the TUI resolve what they are given through :func:`open_input`, so that each
accepts every form:

* a tuidebug trace folder (itself);
* a ``.tar.gz`` made by ``tuidebug pack`` (unpacked safely, once, into the archive cache);
* a TORCH_TRACE log file or folder, or a torch_compile_debug folder (imported once, beside the
  source or in the user cache; the source is never modified);
* a multi-rank TORCH_TRACE folder with no rank named (every rank imported once, as a job);
* a distributed job's folder (``tuidebug trace --nproc-per-node``): the trace of ``rank``, by
  default the lowest rank that has one.

What was done on the way (unpacked, imported) is said through ``on_note``; what cannot be opened
raises a :class:`~tuidebug.errors.TuidebugError` saying why (``TraceError``; an unsafe archive
``UnpackError``, a log that cannot be imported ``ImportFailed``). Nothing here imports torch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal

from tuidebug.errors import TraceError
from tuidebug.trace.format import schema
from tuidebug.trace.format.manifest import is_trace_dir

Kind = Literal["trace", "archive", "torch_trace", "torch_compile_debug", "job"]
Note = Callable[[str], None]

ACCEPTED = ("a trace folder, a .tar.gz made by `tuidebug pack`, a TORCH_TRACE log or folder, "
            "a torch_compile_debug folder, or a distributed job's folder")


@dataclass(frozen=True)
class Opened:
    """What the user named, as a trace.

    ``trace``: the trace folder to read (for a job: the trace of ``rank``, or of the lowest
    rank that has one); None only for a job named without a rank in which no rank has a trace.
    ``job``: the job folder when what was named is a distributed job (or a multi-rank
    TORCH_TRACE folder, imported as one). ``rank``: the rank whose trace it is, when one was
    asked for or a job's was chosen."""

    named: Path
    kind: Kind
    trace: Path | None
    job: Path | None = None
    rank: int | None = None

    def one_trace(self) -> Path:
        """The trace folder; ``TraceError`` for a job none of whose ranks has a trace."""
        if self.trace is None:
            raise TraceError(f"{self.named} is a distributed job without a trace of any rank")
        return self.trace


def open_input(named: str | os.PathLike[str], rank: int | None = None, *,
               on_note: Note | None = None) -> Opened:
    """Resolve ``named`` (any form listed in the module docstring) into a trace."""
    path = Path(named).expanduser()
    note = on_note or (lambda _text: None)
    if not path.exists() and not path.is_symlink():
        raise TraceError(f"no such file or directory: {path}")
    if path.is_dir() and (path / schema.MANIFEST).is_file() and is_trace_dir(path):
        # the common case, a trace folder: no archive, no job (a job folder has no manifest),
        # no log; answered without importing the importers, the archive or the job readers
        return Opened(Path(named), "trace", path, rank=rank)
    from tuidebug.trace.importers import detect

    kind: Kind = "trace"
    found = _unpacked(path, note)
    if found is not None:
        kind, path = "archive", found
    job = _multi_rank_job(path, rank, note)
    if job is not None:
        return _job_rank(named, job, rank, "torch_trace")
    if _is_job(path):
        return _job_rank(named, path, rank, "job")
    what = detect(path)
    if what in ("torch_trace", "torch_compile_debug"):
        from tuidebug.trace.importers import ensure_trace

        out = ensure_trace(path, rank=rank)  # ImportFailed says why not
        note(f"imported {path} → {out}")
        return Opened(Path(named), what, out, rank=rank)
    if what is None and path.is_file():
        raise TraceError(f"{path} is not a trace: expected {ACCEPTED}")
    return Opened(Path(named), kind, path, rank=rank)  # Trace() says what is wrong with a folder


def trace_dir(named: str | os.PathLike[str], rank: int | None = None, *,
              on_note: Note | None = None) -> Path:
    """The one trace folder that ``named`` stands for (see :func:`open_input`); for a job named
    without a rank, the lowest rank's (said through ``on_note``)."""
    opened = open_input(named, rank, on_note=on_note)
    if opened.job is not None and rank is None and opened.trace is not None and on_note:
        on_note(f"{named} is a distributed job: the trace of rank {opened.rank} is read")
    return opened.one_trace()


def archive_stem(archive: Path) -> Path:
    """``x.tar.gz`` → ``x`` (beside it): where what is made from an archive's trace goes."""
    for suffix in (".tar.gz", ".tgz", ".gz"):
        if archive.name.endswith(suffix) and len(archive.name) > len(suffix):
            return archive.with_name(archive.name[: -len(suffix)])
    return archive


def _unpacked(path: Path, note: Note) -> Path | None:
    """The trace inside ``path`` when it is a packed trace (unpacked once), else None."""
    from tuidebug.trace.archive.unpack import is_archive, unpack

    if not is_archive(path):
        return None
    out = unpack(path)  # UnpackError: unsafe, damaged, too large, or no trace inside
    note(f"unpacked {path} → {out}")
    return out


def _multi_rank_job(path: Path, rank: int | None, note: Note) -> Path | None:
    """The job folder of a multi-rank TORCH_TRACE folder named without a rank (every rank
    imported once), else None."""
    if rank is not None:
        return None
    from tuidebug.trace.importers.job_import import ensure_job, is_multi_rank

    if not is_multi_rank(path):
        return None
    job = ensure_job(path)
    note(f"imported every rank of {path} → {job}")
    return job


def _is_job(path: Path) -> bool:
    from tuidebug.trace.jobs.job import is_job_dir

    return is_job_dir(path)


def job_of(trace: Path) -> Path | None:
    """The job folder a trace folder is a rank of (``JOB/rank_<r>``: the path ``tuidebug trace
    --nproc-per-node`` prints for each rank), or None."""
    from tuidebug.trace.jobs.job import is_job_dir, rank_of

    parent = trace.resolve().parent
    return parent if is_job_dir(parent) and rank_of(parent, trace) is not None else None


def _job_rank(named: str | os.PathLike[str], job: Path, rank: int | None, kind: Kind) -> Opened:
    """The trace of ``rank`` in ``job`` (None: the lowest rank with one)."""
    from tuidebug.trace.jobs.job import rank_dirs, rank_trace

    if rank is not None:
        trace = rank_trace(job, rank)
        if trace is None:  # none, or a link out of the job (not followed)
            raise TraceError(f"{named} is a job directory without a trace of rank {rank}")
        return Opened(Path(named), kind, trace, job, rank)
    for r in sorted(rank_dirs(job)):
        if (trace := rank_trace(job, r)) is not None:
            return Opened(Path(named), kind, trace, job, r)
    return Opened(Path(named), kind, None, job)
