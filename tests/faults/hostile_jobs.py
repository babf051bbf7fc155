"""Hostile job directories (``tuidebug info JOBDIR``), built by hand from a committed real trace.

A job directory (docs/distributed.md) is ``job.json``, ``job/rank_<r>.json`` records and
``rank_<r>/`` traces; each case copies ``tests/faults/hostile.BASE`` as two ranks and damages
what the ranks view reads: escape sequences and markup in every field, wrong types, paths out of
the job, huge numbers, FIFOs, deep JSON. ``build(name, root, outside)`` returns (the job
directory, a file name a reported problem must give, or None).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable

from tests.faults.hostile import BASE, EVIL


def _record(rank: int, **extra: Any) -> dict[str, Any]:
    return {"rank": rank, "world_size": 2, "local_rank": rank, "node_rank": 0,
            "hostname": "node0", "launcher": "torchrun", "status": "ok",
            "trace": f"rank_{rank}", **extra}


def _write(d: Path, name: str, data: Any) -> None:
    p = d / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(data if isinstance(data, str) else json.dumps(data))


def _escapes(d: Path, outside: Path) -> str | None:
    for r in (0, 1):
        _write(d, f"job/rank_{r}.json", _record(r, hostname=EVIL, launcher=EVIL, status=EVIL,
                                                 run_id=EVIL, exit_code=EVIL))
    _write(d, "job.json", {"launched_by": EVIL, "launcher": EVIL, "world_size": 2,
                           "nodes": [{"hostname": EVIL}]})
    return None


def _wrong_types(d: Path, outside: Path) -> str | None:
    _write(d, "job/rank_0.json", _record(0, world_size="x", hostname=[1], node_rank={},
                                         local_rank=[], status=5, launcher=[], trace=7))
    _write(d, "job/rank_1.json", [1, 2, 3])
    _write(d, "job/rank_2.json", {"rank": "2"})
    _write(d, "job.json", [1, 2])
    return "rank_1.json"


def _paths_out(d: Path, outside: Path) -> str | None:
    shutil.copytree(BASE, outside / "elsewhere")
    _write(d, "job/rank_0.json", _record(0, trace="../../elsewhere"))
    _write(d, "job/rank_1.json", _record(1, trace=str(outside / "elsewhere")))
    shutil.rmtree(d / "rank_1")
    (d / "rank_1").symlink_to(outside / "elsewhere")
    (d / "job" / "rank_3.json").symlink_to(outside / "elsewhere" / "manifest.json")
    _write(d, "job.json", {"ranks": [{"rank": 0, "trace": "/etc"}], "world_size": 2})
    return "rank_1"


def _huge(d: Path, outside: Path) -> str | None:
    _write(d, "job/rank_0.json", _record(0, world_size=10 ** 12, node_rank=10 ** 30,
                                         local_rank=-10 ** 30))
    _write(d, "job/rank_1.json", '{"rank": 1, "world_size": ' + "9" * 5000 + "}")
    _write(d, "job/rank_5.json", "[" * 100_000 + "]" * 100_000)
    _write(d, "job.json", '{"world_size": ' + "9" * 5000 + "}")
    os.mkfifo(d / "job" / "rank_4.json")
    return "rank_5.json"


def _progress(d: Path, outside: Path) -> str | None:
    """Ranks that timed out (their progress logs are read): rank 0's log a FIFO (never opened
    for reading: it would block), rank 1's a line nested 100,000 deep, lines of the wrong
    types and escape sequences; a third rank's log a link to a file outside, a fourth's a
    folder."""
    for r in (0, 1, 2, 3):
        _write(d, f"job/rank_{r}.json", _record(r, status="timed_out", world_size=4))
    os.mkfifo(d / "job" / "rank_0.progress.jsonl")
    lines = ["[" * 100_000 + "]" * 100_000,
             json.dumps({"event": "collective", "seq": 1, "group": {"a": [1]}, "op": [EVIL],
                         "members": [1, "a", {}], "line": EVIL}),
             json.dumps({"event": "done", "seq": [1]}), "5", "NaN", '{"seq": 1' + "9" * 5000,
             json.dumps({"event": "collective", "seq": 2, "group": EVIL, "op": EVIL,
                         "line": EVIL})]
    _write(d, "job/rank_1.progress.jsonl", "\n".join(lines) + "\n")
    (outside / "secret.jsonl").write_text(json.dumps(
        {"event": "collective", "seq": 9, "group": "0", "op": "SECRET_OP"}) + "\n")
    (d / "job" / "rank_2.progress.jsonl").symlink_to(outside / "secret.jsonl")
    (d / "job" / "rank_3.progress.jsonl").mkdir()
    return None


CASES: dict[str, Callable[[Path, Path], str | None]] = {
    "job_escapes": _escapes,
    "job_wrong_types": _wrong_types,
    "job_paths_out": _paths_out,
    "job_huge": _huge,
    "job_progress": _progress,
}


def build(name: str, root: Path, outside: Path) -> tuple[Path, str | None]:
    outside.mkdir(parents=True, exist_ok=True)
    d = root / name
    for r in (0, 1):
        shutil.copytree(BASE, d / f"rank_{r}", symlinks=True)
        _write(d, f"job/rank_{r}.json", _record(r))
    return d, CASES[name](d, outside)
