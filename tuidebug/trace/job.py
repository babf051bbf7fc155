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
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Mapping

from tuidebug.trace import atomic

JOB = "job.json"
RECORDS_DIR = "job"
FORMAT = "tuidebug-job"
FORMAT_VERSION = 1
_RANK_DIR_RE = re.compile(r"^rank_(\d+)$")
_RECORD_RE = re.compile(r"^rank_(\d+)\.json$")


def rank_dir(root: Path, rank: int) -> Path:
    return root / f"rank_{rank}"


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


def _records(root: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    try:
        names = sorted(os.listdir(root / RECORDS_DIR))
    except OSError:
        return out
    for name in names:
        m = _RECORD_RE.match(name)
        if not m or (root / RECORDS_DIR / name).is_symlink():
            continue
        try:
            data = json.loads((root / RECORDS_DIR / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("rank") == int(m.group(1)):
            out.append(data)
    return sorted(out, key=lambda r: r["rank"])


def _rank_dirs(root: Path) -> list[int]:
    try:
        names = os.listdir(root)
    except OSError:
        return []
    return sorted(int(m.group(1)) for n in names
                  if (m := _RANK_DIR_RE.match(n)) and (root / n).is_dir()
                  and not (root / n).is_symlink())


def is_job_dir(path: Path) -> bool:
    """A job directory: has ``job.json``, records, or ``rank_<r>/`` traces, and is not itself a
    trace."""
    if not path.is_dir() or (path / "manifest.json").exists():
        return False
    return (path / JOB).is_file() or (path / RECORDS_DIR).is_dir() or bool(_rank_dirs(path))


def assemble(root: Path, *, launcher: str | None = None) -> dict[str, Any]:
    """The job as its records (and ``rank_<r>/`` folders without a record) say it is."""
    records = _records(root)
    seen = {r["rank"] for r in records}
    for r in _rank_dirs(root):
        if r not in seen:  # a trace whose record is missing (copied by hand, or never written)
            records.append({"rank": r, "status": "unknown", "trace": rank_dir(root, r).name})
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
            "ranks": records}


def write_job(root: Path, *, launcher: str | None = None) -> dict[str, Any]:
    """Rebuild ``job.json`` from the records and write it atomically (lock-free: each writer
    writes a whole file under a temporary name and renames it; the last rename wins, and a
    reader never trusts it over the records)."""
    job = assemble(root, launcher=launcher)
    if launcher is None:
        try:  # keep the launching process's word for the launcher
            prev = json.loads((root / JOB).read_text(encoding="utf-8"))
            if isinstance(prev, dict) and prev.get("launched_by"):
                job["launched_by"] = prev["launched_by"]
                job["launcher"] = prev.get("launcher", job["launcher"])
        except (OSError, ValueError):
            pass
    else:
        job["launched_by"] = "tuidebug trace"
    atomic.write_json(root / JOB, job)
    return job


def read_job(root: Path) -> dict[str, Any]:
    """The job, rebuilt from the records; the launcher named by ``job.json`` when it says."""
    job = assemble(root)
    try:
        saved = json.loads((root / JOB).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        saved = None
    if isinstance(saved, dict):
        if saved.get("launched_by"):
            job["launched_by"] = str(saved["launched_by"])
            job["launcher"] = saved.get("launcher") or job["launcher"]
        if not job["ranks"] and isinstance(saved.get("world_size"), int):
            job["world_size"] = saved["world_size"]
    return job


def merge(sources: list[Path], out: Path) -> dict[str, Any]:
    """Copy the ranks of several job folders (one per node, say) into the new job folder
    ``out`` and write its ``job.json``. Symbolic links are not copied (a trace never needs one;
    following one could read outside the sources). Raises ValueError when two sources hold the
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
        return [n for n in names if os.path.islink(os.path.join(folder, n))]

    for r, src in sorted(owner.items()):
        d = rank_dir(src, r)
        if d.is_dir() and not d.is_symlink():
            shutil.copytree(d, rank_dir(out, r), ignore=no_links)
        rec = record_path(src, r)
        if rec.is_file() and not rec.is_symlink():
            record_path(out, r).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(rec, record_path(out, r))
    out.mkdir(parents=True, exist_ok=True)
    return write_job(out)
