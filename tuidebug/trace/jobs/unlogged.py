"""The ranks of a job whose collectives went to no progress log, and why. No torch.

A rank's capture child logs each collective it issues to its progress log (``progress.py``);
where that log could not be opened (a disk error on that rank alone) the rank runs on, its
collectives not logged, and its manifest says why (``collectives_not_logged``; older traces:
only the warning). Whatever the job's report judges from the logs (where each rank waits at a
hang, which rank was behind, which rank the others waited for) is then not known of that rank,
and the report says so rather than read its missing log as "no collective issued".

A log that is there but was not read (refused by the safe reader: a link, not a regular file,
too large; or the job folder a link) is told apart: that rank may well have logged, tuidebug
did not read it ("its progress log was not read"); "not logged" is kept for the manifest's word,
a missing log and an empty one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuidebug.trace.format.manifest import Manifest

# the warning the capture writes (compiler/run_script.py), read where the field is absent
NOT_LOGGED_WARNING = "this rank's collectives are not logged to "
NOTE = "not_logged"  # the kind of the report's note naming those ranks


@dataclass(frozen=True)
class Untold:
    """Why a rank's progress log tells nothing: ``why``; ``unread``: the log was not read
    (refused), not missing or empty — the rank may have logged."""

    why: str
    unread: bool = False

    def said(self) -> str:
        """``its collectives were not logged (…)`` or ``its progress log was not read (…)``."""
        return (f"its progress log was not read ({self.why})" if self.unread else
                f"its collectives were not logged ({self.why})")


def not_logged(m: Manifest | None) -> str | None:
    """Why this rank's collectives were not logged (its error); None: they were, or the
    trace says nothing of it."""
    if m is None:
        return None
    if m.collectives_not_logged:
        return m.collectives_not_logged
    said = next((w for w in m.warnings if w.startswith(NOT_LOGGED_WARNING)), None)
    return said[len(NOT_LOGGED_WARNING):] if said else None


def unlogged(ranks: list[dict[str, Any]]) -> dict[int, Untold]:
    """Per rank whose progress log tells nothing, why (``ranks``: ``analyze_job``'s rows): its
    manifest's word, else, for a rank whose ``progress`` was read (one that did not finish),
    why its log told nothing: ``progress.unlogged`` (no file, empty) or ``progress.unread``
    (refused: ``progress.read_log``)."""
    out = {}
    for r in ranks:
        why, p = r.get("collectives_not_logged"), r.get("progress") or {}
        if isinstance(why, str):
            out[int(r["rank"])] = Untold(why)
        elif isinstance(p.get("unlogged"), str):
            out[int(r["rank"])] = Untold(p["unlogged"])
        elif isinstance(p.get("unread"), str):
            out[int(r["rank"])] = Untold(p["unread"], unread=True)
    return out


def note(ranks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The report's note naming them (none when every rank's log told something); a rank
    whose log was not read has ``not_read``."""
    found = unlogged(ranks)
    return [{"kind": NOTE, "ranks": [{"rank": r, "why": u.why, **({"not_read": True} if u.unread
                                                                   else {})}
                                     for r, u in sorted(found.items())]}] if found else []


def _ranks_said(rows: list[dict[str, Any]], unread: bool) -> str | None:
    """``rank 1's collectives were not logged (…)`` or ``ranks 2, 3' progress logs were not
    read (rank 2: …; rank 3: …)``; None when no row is of that kind."""
    rows = [r for r in rows if bool(r.get("not_read")) == unread]
    if not rows:
        return None
    one = len(rows) == 1
    names = ", ".join(str(r.get("rank")) for r in rows)
    whys = "; ".join(("" if one else f"rank {r.get('rank')}: ") + str(r.get("why")) for r in rows)
    what = ("progress log was not read" if one else "progress logs were not read") if unread \
        else "collectives were not logged"
    return f"rank{'' if one else 's'} {names}'{'s' if one else ''} {what} ({whys})"


def note_text(n: dict[str, Any]) -> str:
    """``rank 1's collectives were not logged (IsADirectoryError: …): where it waits …``; a
    rank whose log was not read: ``rank 2's progress log was not read (…)``."""
    rows = [r for r in n.get("ranks") or [] if isinstance(r, dict)]
    one = len(rows) == 1
    said = "; ".join(s for s in (_ranks_said(rows, False), _ranks_said(rows, True)) if s)
    return (f"{said}: where {'it waits' if one else 'they wait'} at a hang, and whether the "
            f"other ranks waited for {'it' if one else 'them'}, is not known")


def rank_line(rank: int, untold: Untold, where: str) -> str:
    """Where an unfinished rank whose progress log told nothing was (``where``: its compile
    phase), never "in no collective": whether it waits in one is not known."""
    return (f"rank {rank}: {where}; {untold.said()}: whether it waits in a collective is not "
            "known")
