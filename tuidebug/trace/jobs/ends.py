"""How the ranks of a job that did not finish ended, as far as their records and traces tell.
No torch.

A job stops for one of a few reasons, and each is said as what is known, never as another:

- ``timed_out``: ``tuidebug trace --timeout`` stopped it (a hang);
- ``collective_timeout``: a rank's own error says a collective timed out — the NCCL watchdog
  (``Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, …)``),
  gloo's ``Timed out waiting 5000ms for recv operation`` — a hang that the process group's
  timeout ended (the launcher then stops the other ranks);
- ``raised``: a rank failed on an error of another kind (the launcher stops the others);
- ``killed``: stopped by the launcher when another rank ended (its record says so), or its
  script died of a signal (its exit code: SIGTERM, SIGKILL, SIGABRT…);
- ``interrupted``: ended on SIGINT (Ctrl-C: its exit code -2, or a KeyboardInterrupt), or its
  record was left ``running`` with no end (a rank blocked where SIGINT cannot reach Python is
  killed by the launcher before it writes one) — or, its trace's writer alive on this host,
  ``running``: it still runs;
- ``unknown``: no record of the rank (a world size larger than the records, or a trace
  folder without a record): nothing is known of how it ended;
- ``other``: a record with another status (``crashed``, ``unreadable``): said as it is.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

# a rank's error that says a collective ran out of time (the process group's timeout)
_TIMEOUT_RE = re.compile(r"Watchdog caught collective operation timeout|collective operation "
                         r"timeout|Timed out waiting \d+ ?ms for \w+ operation", re.I)
_WORK_RE = re.compile(r"SeqNum=(\d+), OpType=(\w+)")
ENDED = ("ok", "failed", "script_failed")


@dataclass
class RankError:
    """A rank's error, as its trace records it (the script's, else the compile's)."""

    type: str | None = None
    message: str | None = None

    def text(self) -> str:
        first = (self.message or "").strip().splitlines()[:1]
        return ": ".join(x for x in (self.type, first[0][:300] if first else "") if x) or "?"

    def collective_timeout(self) -> bool:
        return collective_timeout_text(f"{self.type or ''}: {self.message or ''}")

    def watchdog(self) -> bool:
        return "watchdog" in (self.message or "").lower()

    def work(self) -> str | None:
        """The timed-out collective as the NCCL watchdog names it: ``ALLREDUCE #5``."""
        m = _WORK_RE.search(self.message or "")
        return f"{m.group(2)} #{m.group(1)}" if m else None


@dataclass
class End:
    """One way ranks ended: ``kind`` (see the module), its ``ranks``, what is known
    (``text``)."""

    kind: str
    ranks: list[int] = field(default_factory=list)
    text: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def rank_error(row: dict[str, Any]) -> RankError | None:
    e = row.get("error")
    if not isinstance(e, dict):
        return None
    return RankError(e.get("type") if isinstance(e.get("type"), str) else None,
                     e.get("message") if isinstance(e.get("message"), str) else None)


def collective_timeout_text(text: str) -> bool:
    """Does ``text`` (an error, a line the rank wrote) say a collective timed out?"""
    return bool(_TIMEOUT_RE.search(text))


def timed_out_collective(row: dict[str, Any]) -> bool:
    """A rank that ended because one of its collectives timed out: its error says so (the
    exception its trace recorded, or — a process the NCCL watchdog aborted raises none — the
    last lines it wrote, its record's ``last_words``)."""
    err = rank_error(row)
    ended = row.get("status") in ("failed", "script_failed") or row.get("exit_code") not in (
        None, 0)
    return ended and err is not None and err.collective_timeout()


def interrupted(row: dict[str, Any]) -> bool:
    """A rank that ended on SIGINT (Ctrl-C, or its launcher passing one on): its exit code
    says so, or its error is a KeyboardInterrupt."""
    err = rank_error(row)
    return row.get("exit_code") == -2 or (err is not None and err.type == "KeyboardInterrupt")


_SIGNALS = {9: "SIGKILL", 15: "SIGTERM", 6: "SIGABRT", 11: "SIGSEGV", 1: "SIGHUP"}


def _signal(row: dict[str, Any]) -> int | None:
    """The signal a rank's script died of (its exit code, negative), SIGINT aside."""
    code = row.get("exit_code")
    return -code if type(code) is int and code < 0 and code != -2 else None


def where_it_was(row: dict[str, Any]) -> bool:
    """Whether where the rank was when it ended is worth saying: it did not finish, or it
    failed because a collective timed out, or it was interrupted or died of a signal."""
    return (row.get("status") not in ENDED or timed_out_collective(row) or interrupted(row)
            or _signal(row) is not None)


def _r(ranks: list[int]) -> str:
    return ", ".join(map(str, sorted(ranks)))


def ends(ranks: list[dict[str, Any]], missing: list[int]) -> list[End]:
    """How the ranks (``analyze_job``'s rows) that did not finish ended, and the ranks with no
    record (``missing``): one :class:`End` per kind found, in the order of the module's list."""
    by: dict[str, list[dict[str, Any]]] = {}
    for row in ranks:
        st = row.get("status")
        kind = ("unknown" if row.get("no_record") else
                "timed_out" if st in ("timed_out", "stopped") else
                "collective_timeout" if timed_out_collective(row) else
                "sigint" if interrupted(row) else
                "signal" if _signal(row) else
                "raised" if st in ("failed", "script_failed") else
                "killed" if st == "killed" else
                "interrupted" if st == "running" else
                None if st == "ok" else "other")
        if kind:
            by.setdefault(kind, []).append(row)
    out: list[End] = []
    if "timed_out" in by:
        rs = [r["rank"] for r in by["timed_out"]]
        out.append(End("timed_out", rs, f"rank(s) {_r(rs)} stopped by tuidebug trace --timeout "
                                        "(the job ran too long)"))
    for row in by.get("collective_timeout", []):
        err = rank_error(row) or RankError()
        work = err.work()
        by_whom = "the NCCL watchdog" if err.watchdog() else "the process group's timeout"
        out.append(End("collective_timeout", [row["rank"]],
                       f"rank {row['rank']}'s collective{' ' + work if work else ''} timed out "
                       f"({by_whom}): {err.text()}"))
    for row in by.get("raised", []):
        err = rank_error(row)
        out.append(End("raised", [row["rank"]], f"rank {row['rank']} {row['status']}"
                       + (f": {err.text()}" if err else "")))
    if "sigint" in by:
        rs = [r["rank"] for r in by["sigint"]]
        out.append(End("interrupted", rs, f"rank(s) {_r(rs)} interrupted (SIGINT: Ctrl-C, or "
                                          "the launcher passing it on)"))
    for row in by.get("signal", []):
        n = _signal(row)
        name = _SIGNALS.get(n or 0, f"signal {n}")
        out.append(End("killed", [row["rank"]], f"rank {row['rank']} ended by {name}"
                       + (" (the launcher stops every rank when one ends)"
                          if n in (9, 15) else "")))
    if "killed" in by:
        rs = [r["rank"] for r in by["killed"]]
        out.append(End("killed", rs, f"rank(s) {_r(rs)} stopped by the launcher when another "
                                     "rank ended"))
    if "interrupted" in by:
        live = [r["rank"] for r in by["interrupted"] if r.get("trace_status") == "running"]
        gone = [r["rank"] for r in by["interrupted"] if r["rank"] not in live]
        if gone:
            out.append(End("interrupted", gone, f"rank(s) {_r(gone)} left their records "
                           "running, with no end: the job was interrupted (Ctrl-C) or killed "
                           "before it could say how it ended"))
        if live:
            out.append(End("running", live, f"rank(s) {_r(live)} still running (each trace's "
                                            "writer is alive)"))
    for row in by.get("other", []):
        out.append(End("other", [row["rank"]], f"rank {row['rank']} ended "
                                               f"{row.get('status') or 'unknown'}"))
    unknown = sorted([r["rank"] for r in by.get("unknown", [])] + list(missing))
    if unknown:
        out.append(End("unknown", unknown, f"nothing is known of how rank(s) {_r(unknown)} "
                                           "ended (no record)"))
    return out
