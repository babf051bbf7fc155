"""How the ranks of a job that did not finish ended, as far as their records and traces tell.
No torch.

A job stops for one of a few reasons, and each is said as what is known, never as another:

- ``timed_out``: ``tuidebug trace --timeout`` stopped it (a hang);
- ``collective_timeout``: a rank's own error says a collective timed out — the NCCL watchdog
  (``Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, …)``,
  said as ``ALLREDUCE, NCCL SeqNum=5``: NCCL counts collectives tuidebug never logs, so its
  number is not tuidebug's), gloo's ``Timed out waiting 5000ms for recv operation`` — a hang
  that the process group's timeout ended (the launcher then stops the other ranks);
- ``raised``: a rank failed on an error of another kind (the launcher stops the others);
- ``timeout_after_raise``: a rank's collective timed out while another rank had raised an
  error of another kind: it was left waiting for a rank that had ended (no hang). Said so only
  where the raise can have come first: its error is not one a dead peer causes (``Connection
  closed by peer``…) and, both ranks' records on one host (one clock), it ended first;
- ``killed``: stopped by the launcher when another rank ended (its record says so: the rank's
  ``tuidebug trace`` writes ``killed`` on SIGTERM), or its script died of a signal (its exit
  code: SIGTERM, SIGKILL, SIGABRT…), or its record was left ``running`` while another rank
  ended (SIGKILL leaves no end);
- ``interrupted``: ended on SIGINT (Ctrl-C: its exit code -2, or a KeyboardInterrupt), or its
  record was left ``running`` with no end and no other rank's end explains it — or, its trace's
  writer alive on this host, ``running``: it still runs;
- ``not_known_here``: a record left ``running`` on another host: whether that rank runs on or
  how it ended cannot be told from this one;
- ``unknown``: no record of the rank (a world size larger than the records, or a trace
  folder without a record): nothing is known of how it ended;
- ``other``: a record with another status (``crashed``, ``unreadable``): said as it is.
"""

from __future__ import annotations

import re
import socket
from dataclasses import asdict, dataclass, field
from typing import Any

# a rank's error that says a collective ran out of time (the process group's timeout)
_TIMEOUT_RE = re.compile(r"Watchdog caught collective operation timeout|collective operation "
                         r"timeout|Timed out waiting \d+ ?ms for \w+ operation", re.I)
_WORK_RE = re.compile(r"SeqNum=(\d+), OpType=(\w+)")
# an error a rank raises because a peer went away (it ended): a consequence, never a first cause
_PEER_GONE_RE = re.compile(r"Connection (closed|reset) by peer|Broken pipe|communicator was "
                           r"aborted|ProcessGroup\w* is aborted|peer (closed|went away)", re.I)
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
        """The timed-out collective as the NCCL watchdog names it: ``ALLREDUCE, NCCL
        SeqNum=5`` (NCCL's own count, which includes collectives tuidebug never logs: not the
        ``#n`` of the progress log)."""
        m = _WORK_RE.search(self.message or "")
        return f"{m.group(2)}, NCCL SeqNum={m.group(1)}" if m else None

    def peer_gone(self) -> bool:
        return bool(_PEER_GONE_RE.search(f"{self.type or ''}: {self.message or ''}"))


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


def _raised_first(raised: list[dict[str, Any]], timeouts: list[dict[str, Any]]) -> bool:
    """Whether the ranks whose collectives timed out can have been left waiting for ranks that
    raised (``timeout_after_raise``): some raise is not one a dead peer causes, and where every
    record is of one host (one clock) and says when it ended, such a raise ended first. Records
    of several hosts are never ordered by their times."""
    first = [r for r in raised if not (rank_error(r) or RankError()).peer_gone()]
    if not first or not timeouts:
        return False
    rows = first + timeouts
    ends_at = [r.get("finished_at") for r in rows]
    if len({r.get("hostname") for r in rows}) != 1 or not all(
            type(t) in (int, float) for t in ends_at):
        return True  # no one clock: the times tell nothing either way
    return min(r["finished_at"] for r in first) <= min(r["finished_at"] for r in timeouts)


def _kind(row: dict[str, Any], host: str) -> str | None:
    st = row.get("status")
    return ("unknown" if row.get("no_record") else
            "timed_out" if st in ("timed_out", "stopped") else
            "collective_timeout" if timed_out_collective(row) else
            "sigint" if interrupted(row) else
            "signal" if _signal(row) else
            "raised" if st in ("failed", "script_failed") else
            "killed" if st == "killed" else
            ("running" if row.get("trace_status") == "running" else
             "not_known_here" if isinstance(row.get("hostname"), str)
             and row["hostname"] != host else "left_running") if st == "running" else
            None if st == "ok" else "other")


def ends(ranks: list[dict[str, Any]], missing: list[int],
         host: str | None = None) -> list[End]:
    """How the ranks (``analyze_job``'s rows) that did not finish ended, and the ranks with no
    record (``missing``): one :class:`End` per kind found, in the order of the module's list
    (a rank that raised first when the others' collectives timed out after it). ``host``: the
    host reading (a record left ``running`` elsewhere is not known from here)."""
    host = socket.gethostname() if host is None else host
    by: dict[str, list[dict[str, Any]]] = {}
    for row in ranks:
        kind = _kind(row, host)
        if kind:
            by.setdefault(kind, []).append(row)
    out: list[End] = []
    if "timed_out" in by:
        rs = [r["rank"] for r in by["timed_out"]]
        out.append(End("timed_out", rs, f"rank(s) {_r(rs)} stopped by tuidebug trace --timeout "
                                        "(the job ran too long)"))
    after = _raised_first(by.get("raised", []), by.get("collective_timeout", []))
    raisers = _r([r["rank"] for r in by.get("raised", [])
                  if not (rank_error(r) or RankError()).peer_gone()])
    timeouts = []
    for row in by.get("collective_timeout", []):
        err = rank_error(row) or RankError()
        work = err.work()
        by_whom = "the NCCL watchdog" if err.watchdog() else "the process group's timeout"
        if after:
            timeouts.append(End("timeout_after_raise", [row["rank"]],
                                f"rank {row['rank']}'s collective then timed out "
                                f"({work + '; ' if work else ''}{by_whom}), waiting for rank(s) "
                                f"{raisers}, which had ended: {err.text()}"))
        else:
            timeouts.append(End("collective_timeout", [row["rank"]],
                                f"rank {row['rank']}'s collective timed out "
                                f"({work + '; ' if work else ''}{by_whom}): {err.text()}"))
    if not after:
        out += timeouts
    for row in by.get("raised", []):
        err = rank_error(row)
        out.append(End("raised", [row["rank"]], f"rank {row['rank']} {row['status']}"
                       + (f": {err.text()}" if err else "")))
    if after:
        out += timeouts
    if "sigint" in by:
        rs = [r["rank"] for r in by["sigint"]]
        out.append(End("interrupted", rs, f"rank(s) {_r(rs)} interrupted (SIGINT: Ctrl-C, or "
                                          "the launcher passing it on)"))
    # another rank's end is why the launcher stopped the rest; with none, it came from outside
    other_end = any(k in by for k in ("timed_out", "collective_timeout", "raised", "other"))
    for row in by.get("signal", []):
        n = _signal(row)
        name = _SIGNALS.get(n or 0, f"signal {n}")
        why = ("the launcher stops every rank when one ends" if other_end else
               "no rank ended otherwise: the job was stopped from outside, such as its "
               "launcher or a scheduler")
        out.append(End("killed", [row["rank"]], f"rank {row['rank']} ended by {name}"
                       + (f" ({why})" if n in (9, 15) else "")))
    if "killed" in by:
        rs = [r["rank"] for r in by["killed"]]
        out.append(End("killed", rs, f"rank(s) {_r(rs)} stopped by the launcher when another "
                                     "rank ended"))
    if "left_running" in by:
        gone = [r["rank"] for r in by["left_running"]]
        # another rank's end (a raise, a timeout, a signal) is why the launcher stopped these
        if other_end or "signal" in by or "killed" in by:
            out.append(End("killed", gone, f"rank(s) {_r(gone)} left their records running, "
                           "with no end: stopped before they could say how (the launcher "
                           "stops every rank when one ends)"))
        else:
            out.append(End("interrupted", gone, f"rank(s) {_r(gone)} left their records "
                           "running, with no end: the job was interrupted (Ctrl-C) or killed "
                           "before it could say how it ended"))
    if "running" in by:
        live = [r["rank"] for r in by["running"]]
        out.append(End("running", live, f"rank(s) {_r(live)} still running (each trace's "
                                        "writer is alive)"))
    if "not_known_here" in by:
        rs = [r["rank"] for r in by["not_known_here"]]
        hosts = ", ".join(sorted({str(r["hostname"])[:100] for r in by["not_known_here"]}))
        out.append(End("not_known_here", rs, f"rank(s) {_r(rs)} on another host ({hosts}): "
                       "their records say running; whether they still run, or how they ended, "
                       "is not known from this host"))
    for row in by.get("other", []):
        out.append(End("other", [row["rank"]], f"rank {row['rank']} ended "
                                               f"{row.get('status') or 'unknown'}"))
    unknown = sorted([r["rank"] for r in by.get("unknown", [])] + list(missing))
    if unknown:
        out.append(End("unknown", unknown, f"nothing is known of how rank(s) {_r(unknown)} "
                                           "ended (no record)"))
    return out
