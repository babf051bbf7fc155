"""A job directory: the traces of every rank of a distributed job, and ``job.json``. No torch.

Layout (documented in docs/trace-format.md)::

    DIR/rank_<r>/          a complete single-process trace of rank r
    DIR/job/rank_<r>.json  rank r's record: host, local rank, node rank, launcher, status
    DIR/job.json           the job: world size, ranks, nodes, launcher (assembled from job/)

Every rank writes only its own ``rank_<r>/`` and ``job/rank_<r>.json`` (atomically, through a
temporary file and a rename), so ranks on several nodes can share one folder without locks.
``job.json`` is a convenience copy, rebuilt from the records by each rank when it ends and by
the launching ``tuidebug trace``; readers (:func:`read_job`) always rebuild it from the records,
so a ``job.json`` written by a rank that saw fewer records than exist is never believed.

A job folder is untrusted like a trace (docs/security.md): records and ``job.json`` are read
through ``safefile`` (regular files only, no links, ``MAX_RECORD_BYTES``, bounded JSON), each
field is checked for its type and range (a wrong one is dropped), and what is not read or not
believed is named in the job's ``problems``.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any, Mapping

from tuidebug.trace.format import atomic, safefile, schema

JOB = "job.json"
RECORDS_DIR = "job"
FORMAT = "tuidebug-job"
FORMAT_VERSION = 1
_RANK_DIR_RE = re.compile(r"^rank_(\d+)$")
_RECORD_RE = re.compile(r"^rank_(\d+)\.json$")
MAX_RECORD_BYTES = 1024 * 1024  # one rank's record, or job.json
MAX_WORLD_SIZE = 1 << 20  # a larger world size in a record is not believed
_INT_FIELDS = ("world_size", "local_rank", "node_rank", "exit_code")
_STR_FIELDS = ("hostname", "launcher", "status", "run_id", "trace", "launched_by",
               "ended_by")


def rank_dir(root: Path, rank: int) -> Path:
    return root / f"rank_{rank}"


def rank_trace(root: Path, rank: int) -> Path | None:
    """Rank ``rank``'s trace folder in job ``root`` when it has one: a real folder, not a link
    (a link in a job folder is a path out of it, never followed), with a manifest."""
    d = rank_dir(root, rank)
    return None if d.is_symlink() or not (d / schema.MANIFEST).is_file() else d


def rank_of(root: Path, trace_dir: Path) -> int | None:
    """The rank whose trace ``trace_dir`` is in job ``root`` (``root/rank_<r>``), or None; either
    path may be relative (``tuidebug open DIR``)."""
    trace_dir = trace_dir.resolve()
    number = trace_dir.name.removeprefix("rank_")
    if trace_dir.name.startswith("rank_") and number.isdigit() \
            and trace_dir.parent == root.resolve():
        return int(number)
    return None


def record_path(root: Path, rank: int) -> Path:
    return root / RECORDS_DIR / f"rank_{rank}.json"


def _int(env: Mapping[str, str], name: str) -> int | None:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        return None


def rank_from_env(env: Mapping[str, str]) -> dict[str, Any] | None:
    """Where this process stands in a distributed job, from its launcher's environment:
    torchrun (and anything that sets RANK/WORLD_SIZE, as torch.distributed's env:// does), or
    Slurm's SLURM_PROCID/SLURM_NTASKS as a fallback. None outside a launcher."""
    rank, world = _int(env, "RANK"), _int(env, "WORLD_SIZE")
    if rank is not None and world is not None:
        launcher = "torchrun" if "TORCHELASTIC_RUN_ID" in env else "env"
        return {"rank": rank, "world_size": world, "local_rank": _int(env, "LOCAL_RANK"),
                "node_rank": _int(env, "GROUP_RANK"), "launcher": launcher,
                "run_id": env.get("TORCHELASTIC_RUN_ID")}
    rank, world = _int(env, "SLURM_PROCID"), _int(env, "SLURM_NTASKS")
    if rank is not None and world is not None:
        return {"rank": rank, "world_size": world, "local_rank": _int(env, "SLURM_LOCALID"),
                "node_rank": _int(env, "SLURM_NODEID"), "launcher": "slurm",
                "run_id": env.get("SLURM_JOB_ID")}
    return None


def write_record(root: Path, record: dict[str, Any]) -> None:
    """Write (or overwrite) one rank's record; only that rank ever writes it."""
    atomic.write_json(record_path(root, int(record["rank"])), record)


def mark_stopped(root: Path, rank: int, why: str) -> None:
    """Rank ``rank``'s trace was ended from outside while its capture ran (``tuidebug trace
    --timeout``): its manifest gets ``stopped`` ({why, at}), so that it reads ``stopped``, not
    crashed. Only a trace still ``running`` is touched; a link is never followed."""
    import time

    path = rank_dir(root, rank) / schema.MANIFEST
    if path.is_symlink() or rank_dir(root, rank).is_symlink():
        return
    data = _read_json(path, None, schema.MANIFEST)  # rewritten whole: every key kept
    if isinstance(data, dict) and data.get("status") == "running":
        atomic.write_json(path, {**data, "stopped": {"why": why, "at": time.time()}})


def _read_json(path: Path, problems: list[str] | None, rel: str) -> Any:
    """A record or ``job.json``: a regular file, not a link, capped, bounded JSON; None (and a
    problem naming ``rel``) when it cannot be read."""
    try:
        return safefile.read_json(path, MAX_RECORD_BYTES, no_link=True)
    except FileNotFoundError:
        return None
    except (safefile.Refused, OSError, ValueError) as e:
        if problems is not None:
            problems.append(f"{rel}: {e}")
        return None


def _checked(data: dict[str, Any], rel: str, problems: list[str] | None) -> dict[str, Any]:
    """``data`` with only the fields of the types (and ranges) a record has."""
    out = dict(data)
    bad = []
    for key in _INT_FIELDS:
        v = out.get(key)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or abs(v) > 1 << 31
                              or key == "world_size" and not 0 < v <= MAX_WORLD_SIZE):
            bad.append(key)
            out.pop(key)
    for key in _STR_FIELDS:
        if out.get(key) is not None and not isinstance(out[key], str):
            bad.append(key)
            out.pop(key)
    words = out.get("last_words")
    if words is not None and not (isinstance(words, list) and len(words) <= 20
                                  and all(isinstance(w, str) and len(w) <= 2000 for w in words)):
        bad.append("last_words")
        out.pop("last_words")
    if bad and problems is not None:
        problems.append(f"{rel}: {', '.join(bad)} of the wrong type or out of range; ignored")
    return out


def _records(root: Path, problems: list[str] | None = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if (root / RECORDS_DIR).is_symlink():  # records read only inside the job folder
        if problems is not None:
            problems.append(f"{RECORDS_DIR}: a symbolic link; its records are not read")
        return out
    try:
        names = sorted(os.listdir(root / RECORDS_DIR))
    except OSError:
        return out
    for name in names:
        m = _RECORD_RE.match(name)
        if not m:
            continue
        rel = f"{RECORDS_DIR}/{name}"
        data = _read_json(root / RECORDS_DIR / name, problems, rel)
        if data is None:
            continue
        rank = int(m.group(1))
        if not isinstance(data, dict) or data.get("rank") != rank or \
                isinstance(data.get("rank"), bool):
            if problems is not None:
                problems.append(f"{rel}: not a record of rank {rank}; ignored")
            continue
        out.append(_checked(data, rel, problems))
    return sorted(out, key=lambda r: r["rank"])


def _rank_dirs(root: Path, problems: list[str] | None = None) -> list[int]:
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    out = []
    for n in names:
        if (m := _RANK_DIR_RE.match(n)) and (root / n).is_dir():
            if (root / n).is_symlink():  # a trace is read only inside the job folder
                if problems is not None:
                    problems.append(f"{n}: a symbolic link; its trace is not read")
                continue
            out.append(int(m.group(1)))
    return out


def rank_dirs(root: Path) -> list[int]:
    """The ranks with a ``rank_<r>/`` folder (not a symbolic link) in ``root``."""
    return _rank_dirs(root)


def is_job_dir(path: Path) -> bool:
    """A job directory: has ``job.json``, records, or ``rank_<r>/`` traces, and is not itself a
    trace."""
    if not path.is_dir() or (path / schema.MANIFEST).exists():
        return False
    return (path / JOB).is_file() or (path / RECORDS_DIR).is_dir() or bool(_rank_dirs(path))


def assemble(root: Path, *, launcher: str | None = None) -> dict[str, Any]:
    """The job as its records (and ``rank_<r>/`` folders without a record) say it is."""
    problems: list[str] = []
    records = _records(root, problems)
    seen = {r["rank"] for r in records}
    for r in _rank_dirs(root, problems):
        if r not in seen:  # a trace whose record is missing (copied by hand, or never written)
            records.append({"rank": r, "status": "unknown", "trace": rank_dir(root, r).name,
                            "no_record": True})
    records.sort(key=lambda r: r["rank"])
    worlds = {r["world_size"] for r in records if isinstance(r.get("world_size"), int)}
    world = max(worlds) if worlds else len(records)
    nodes: dict[tuple[str, Any], dict[str, Any]] = {}
    for r in records:  # a node: a host, or one launcher's share of it (its node rank)
        host = str(r.get("hostname") or "?")
        n = nodes.setdefault((host, r.get("node_rank")),
                             {"hostname": host, "node_rank": r.get("node_rank"), "ranks": []})
        n["ranks"].append(r["rank"])
    launchers = sorted({str(r["launcher"]) for r in records if r.get("launcher")})
    present = {r["rank"] for r in records}
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "world_size": world,
            "launcher": launcher or (launchers[0] if len(launchers) == 1 else
                                     ", ".join(launchers) or None),
            "nodes": sorted(nodes.values(), key=lambda n: (n["node_rank"] is None,
                                                           n["node_rank"] or 0, n["hostname"])),
            "missing_ranks": [r for r in range(world) if r not in present],
            "ranks": records, "problems": problems}


def write_job(root: Path, *, launcher: str | None = None) -> dict[str, Any]:
    """Rebuild ``job.json`` from the records and write it atomically (lock-free: each writer
    writes a whole file under a temporary name and renames it; the last rename wins, and a
    reader never trusts it over the records)."""
    job = assemble(root, launcher=launcher)
    job.pop("problems", None)  # what a reader met; not part of the job's record
    if launcher is None:  # keep the launching process's word for the launcher
        prev = _read_json(root / JOB, None, JOB)
        if isinstance(prev, dict) and isinstance(prev.get("launched_by"), str):
            job["launched_by"] = prev["launched_by"]
            if isinstance(prev.get("launcher"), str):
                job["launcher"] = prev["launcher"]
    else:
        job["launched_by"] = "tuidebug trace"
    atomic.write_json(root / JOB, job)
    return job


def read_job(root: Path) -> dict[str, Any]:
    """The job, rebuilt from the records; the launcher named by ``job.json`` when it says."""
    job = assemble(root)
    saved = _read_json(root / JOB, job["problems"], JOB)
    if saved is not None and not isinstance(saved, dict):
        job["problems"].append(f"{JOB}: not a JSON object; ignored")
    elif isinstance(saved, dict):
        saved = _checked(saved, JOB, job["problems"])
        if saved.get("launched_by"):
            job["launched_by"] = saved["launched_by"]
            job["launcher"] = saved.get("launcher") or job["launcher"]
        if not job["ranks"] and saved.get("world_size"):
            job["world_size"] = saved["world_size"]
    return job


def merge(sources: list[Path], out: Path) -> dict[str, Any]:
    """Copy the ranks of several job folders (one per node, say) into the new job folder
    ``out`` and write its ``job.json``. Only folders and regular files are copied: not symbolic
    links (a trace never needs one; following one could read outside the sources), nor FIFOs,
    sockets or devices (copying a FIFO blocks or fails). Raises ValueError when two sources hold the
    same rank, or a source is not a job folder, or ``out`` is not empty."""
    import shutil

    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} is not empty")
    owner: dict[int, Path] = {}
    for src in sources:
        if not is_job_dir(src):
            raise ValueError(f"{src} is not a job folder (no job.json, job/ or rank_<r>/)")
        ranks = {r["rank"] for r in _records(src)} | set(_rank_dirs(src))
        for r in ranks:
            if r in owner:
                raise ValueError(f"rank {r} is in both {owner[r]} and {src}")
            owner[r] = src

    def no_links(folder: str, names: list[str]) -> list[str]:
        def plain(n: str) -> bool:
            try:
                mode = os.lstat(os.path.join(folder, n)).st_mode
            except OSError:
                return False
            return stat.S_ISDIR(mode) or stat.S_ISREG(mode)
        return [n for n in names if not plain(n)]

    def capped_copy(s: str, d: str) -> None:
        size = os.lstat(s).st_size
        if size > safefile.MAX_FILE_BYTES:
            raise ValueError(f"{s}: {size:,} bytes, over the {safefile.MAX_FILE_BYTES:,}-byte "
                             "limit for a file of a trace; not merged")
        shutil.copy2(s, d, follow_symlinks=False)

    records = {src: {rec["rank"]: rec for rec in _records(src)} for src in set(owner.values())}
    for r, src in sorted(owner.items()):
        d = rank_dir(src, r)
        if d.is_dir() and not d.is_symlink():
            shutil.copytree(d, rank_dir(out, r), ignore=no_links, copy_function=capped_copy)
        # the record as read (inside the source, not through a link, checked), not its bytes:
        # a job/ folder that is a link out of the source is never followed
        if r in records[src]:
            record_path(out, r).parent.mkdir(parents=True, exist_ok=True)
            atomic.write_json(record_path(out, r), records[src][r])
    out.mkdir(parents=True, exist_ok=True)
    return write_job(out)
