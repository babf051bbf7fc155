"""A rank's progress log, and who waits for whom when a job hangs. No torch.

While a rank of a distributed job runs, its capture child appends one JSON line to
``DIR/job/rank_<r>.progress.jsonl`` before each collective it issues (``{"event":
"collective", "op", "seq", "group", "line", ...}``) and one when the collective returned
(``{"event": "done", "seq", "group"}``). Each line is one ``write`` on a file opened with
``O_APPEND``, so a rank killed at any point (``--timeout``, the NCCL watchdog, SIGKILL) leaves
every line it wrote before; the last phase it reached is its trace's manifest (``phase``,
``current_graph``, rewritten atomically per phase).

Reading is for untrusted folders: only the last :data:`TAIL_BYTES` of the file are read, a
line that is not a JSON object is skipped, and values are checked for type.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tuidebug.trace.jobs import job as joblayout
from tuidebug.trace.format import safefile

TAIL_BYTES = 256 * 1024


def progress_path(root: Path, rank: int) -> Path:
    return root / joblayout.RECORDS_DIR / f"rank_{rank}.progress.jsonl"


class ProgressLog:
    """Appends events to one rank's progress log (one ``write`` per line, flushed by the OS on
    any exit of the process)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT
                          | getattr(os, "O_NOFOLLOW", 0), 0o644)

    def append(self, event: dict[str, Any]) -> None:
        self.append_line(json.dumps(event, default=str))

    def append_line(self, line: str) -> None:
        """One event already encoded as a JSON object (no newline)."""
        try:
            os.write(self.fd, (line + "\n").encode())
        except OSError:
            pass  # a full disk must not stop the rank

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


def _events(path: Path) -> list[dict[str, Any]]:
    """The events of a progress log: a regular file inside the job folder (not a link, a FIFO
    or a folder), its last TAIL_BYTES, each line parsed with bounded nesting."""
    if path.parent.is_symlink():  # job/ itself a link: a path out of the job folder
        return []
    try:
        data, size = safefile.read_tail(path, TAIL_BYTES)
    except (safefile.Refused, OSError):
        return []
    lines = data.split(b"\n")
    if size > TAIL_BYTES:
        lines = lines[1:]  # the first one is cut
    out = []
    for ln in lines:
        try:
            ev = safefile.loads(ln)
        except ValueError:  # bad JSON, too deep, an integer too long, not UTF-8
            continue
        if isinstance(ev, dict):
            out.append(ev)
    return out


def _text(v: Any) -> str | None:
    return str(v)[:300] if isinstance(v, (str, int, float)) else None


MAX_MEMBERS = 1 << 16
MAX_LISTED = 1024  # group members kept as a list (a longer list: not used, as if not given)
MAX_GROUPS = 256  # groups whose highest collective a rank's log is read for


def _members(v: Any) -> list[int] | dict[str, int] | None:
    """A collective's group members as logged: a list of global ranks (at most MAX_LISTED), or
    a long arithmetic run ``{"first", "step", "count"}`` kept as such (never expanded: 400
    ranks of 65,536 members each made ``info --json`` gigabytes); None when not given (every
    rank) or malformed."""
    if isinstance(v, list):
        return [m for m in v if type(m) is int] if len(v) <= MAX_LISTED else None
    if isinstance(v, dict):
        first, step, count = v.get("first"), v.get("step"), v.get("count")
        if all(type(x) is int for x in (first, step, count)) and step > 0 \
                and 0 < count <= MAX_MEMBERS and abs(first) < 1 << 31 and step < 1 << 31:
            return {"first": first, "step": step, "count": count}
    return None


def is_member(members: list[int] | dict[str, int] | None, rank: int) -> bool:
    """Is ``rank`` in the group (``members`` as :func:`_members` keeps them; None: every rank)."""
    if members is None:
        return True
    if isinstance(members, dict):
        k, off = divmod(rank - members["first"], members["step"])
        return off == 0 and 0 <= k < members["count"]
    return rank in members


def _op_kind(op: str) -> str:
    """send and recv of one pair of ranks are the two sides of one exchange, not a mismatch."""
    return "send/recv" if op in ("send", "recv") else op


def last_collective(path: Path) -> dict[str, Any] | None:
    """The last collective the rank's log names: op, seq, group, line, and ``state`` —
    ``waiting`` (issued, never returned: the rank is in it) or ``done``; ``reached``: per
    group, the highest number the log shows the rank issued (an asynchronous collective
    returns at once: the rank reached it, though it may wait for it later). Only the rank's
    last attempt counts: a restarted rank logs ``start`` again and numbers its collectives
    anew."""
    last: dict[str, Any] | None = None
    reached: dict[str, int] = {}
    for ev in _events(path):
        if ev.get("event") == "start":  # a new attempt (torchrun --max-restarts): numbered anew
            last, reached = None, {}
        elif ev.get("event") == "collective" and isinstance(ev.get("seq"), int):
            group = _text(ev.get("group")) or "default"
            if group in reached or len(reached) < MAX_GROUPS:
                reached[group] = max(reached.get(group, 0), ev["seq"])
            last = {"op": _text(ev.get("op")) or "?", "seq": ev["seq"], "group": group,
                    "line": _text(ev.get("line")), "async": ev.get("async") is True,
                    "members": _members(ev.get("members")),
                    "state": "waiting", "reached": reached}
        elif (ev.get("event") == "done" and last is not None and ev.get("seq") == last["seq"]
              and _text(ev.get("group")) == last["group"]):
            last["state"] = "done"
    return last


def rank_progress(root: Path, rank: int, manifest: dict[str, Any] | None) -> dict[str, Any]:
    """How far rank ``rank`` got: its trace's last compile phase and graph (``phase`` is
    ``script`` once that graph was compiled: the rank ran on), and its last collective."""
    m = manifest or {}
    graph, phase = _text(m.get("current_graph")), _text(m.get("phase"))
    entries = m.get("graphs") if isinstance(m.get("graphs"), list) else []
    status = next((e.get("status") for e in entries
                   if isinstance(e, dict) and e.get("id") == graph), None)
    return {"phase": "script" if phase and status in ("ok", "failed") else phase,
            "compile_phase": phase, "graph": graph, "graph_status": _text(status),
            "collective": last_collective(progress_path(root, rank))}


def _reached(c: dict[str, Any] | None, group: str) -> int:
    n = ((c or {}).get("reached") or {}).get(group)
    return n if isinstance(n, int) else 0


def _c(c: dict[str, Any]) -> str:
    return f"{c['op']} #{c['seq']}" + (f" ({c['line']})" if c.get("line") else "")


def waits(ranks: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Who waits for whom, from the ``progress`` of the ranks that did not finish (status
    ``timed_out``, ``killed``, ``running``): per group, the ranks in a collective and what they
    wait for. None when no unfinished rank was in a collective."""
    stuck = [r for r in ranks if r.get("status") in ("timed_out", "killed", "running", "unknown")
             and r.get("progress")]
    if not stuck:
        return None
    lines, mismatches = [], []
    waiting: dict[str, dict[int, dict[str, Any]]] = {}
    for r in stuck:
        p = r["progress"]
        c = p.get("collective")
        if c and c["state"] == "waiting":
            waiting.setdefault(c["group"], {})[r["rank"]] = c
            lines.append(f"rank {r['rank']} waits in {_c(c)}")
        else:
            if p.get("phase") == "script":
                where = f"running the script (after compiling graph {p['graph']})"
            elif p.get("phase"):
                where = f"compiling graph {p['graph']}, phase {p['phase']}"
            else:
                where = "before compiling anything"
            done = ("; no collective issued" if not c else
                    f"; its last collective {_c(c)} was issued asynchronously (it may wait for "
                    "it)" if c.get("async") else f"; its last collective {_c(c)} returned")
            lines.append(f"rank {r['rank']} is in no collective: {where}{done}")
    if not waiting:
        return None
    for group, per in waiting.items():
        seqs = {c["seq"] for c in per.values()}
        members = next((c["members"] for c in per.values() if c.get("members")), None)
        top = max(c["seq"] for c in per.values())
        # a rank not waiting here is behind unless its log shows it issued #top of this group
        # (asynchronously, then waited elsewhere)
        behind = [r["rank"] for r in stuck if r["rank"] not in per
                  and is_member(members, r["rank"])
                  and _reached(r["progress"].get("collective"), group) < top]
        if len(seqs) == 1 and len({_op_kind(c["op"]) for c in per.values()}) > 1:
            seq = seqs.pop()
            mismatches.append({
                "group": group, "seq": seq, "kind": "different_collectives",
                "ops": {str(rk): c["op"] for rk, c in sorted(per.items())},
                "text": f"collective #{seq} of group {group} differs between ranks: "
                        + ", ".join(f"rank {rk} {c['op']}" for rk, c in sorted(per.items()))
                        + " (a rank-dependent collective order)"})
        elif len(seqs) > 1 or behind:
            ahead = sorted(rk for rk, c in per.items() if c["seq"] == top)
            late = sorted(set(behind) | {rk for rk, c in per.items() if c["seq"] < top})
            mismatches.append({
                "group": group, "seq": top, "kind": "waits_for_ranks", "ranks": ahead,
                "waits_for": late,
                "text": f"rank(s) {', '.join(map(str, ahead))} wait in collective #{top} of "
                        f"group {group} for rank(s) {', '.join(map(str, late))}, which did not "
                        "reach it"})
    return {"lines": lines, "mismatches": mismatches,
            "waiting": {g: {str(rk): c for rk, c in per.items()} for g, per in waiting.items()}}
