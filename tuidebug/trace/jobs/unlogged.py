"""The ranks of a job whose collectives went to no progress log, and why. No torch.

A rank's capture child logs each collective it issues to its progress log (``progress.py``);
where that log could not be opened (a disk error on that rank alone) the rank runs on, its
collectives not logged, and its manifest says why (``collectives_not_logged``; older traces:
only the warning). Whatever the job's report judges from the logs (where each rank waits at a
hang, which rank was behind, which rank the others waited for) is then not known of that rank,
and the report says so rather than read its missing log as "no collective issued"."""

from __future__ import annotations

from typing import Any

from tuidebug.trace.format.manifest import Manifest

# the warning the capture writes (compiler/run_script.py), read where the field is absent
NOT_LOGGED_WARNING = "this rank's collectives are not logged to "
NOTE = "not_logged"  # the kind of the report's note naming those ranks


def not_logged(m: Manifest | None) -> str | None:
    """Why this rank's collectives were not logged (its error); None: they were, or the
    trace says nothing of it."""
    if m is None:
        return None
    if m.collectives_not_logged:
        return m.collectives_not_logged
    said = next((w for w in m.warnings if w.startswith(NOT_LOGGED_WARNING)), None)
    return said[len(NOT_LOGGED_WARNING):] if said else None


def unlogged(ranks: list[dict[str, Any]]) -> dict[int, str]:
    """Per rank whose collectives were not logged, why (``ranks``: ``analyze_job``'s rows):
    its manifest's word, else, for a rank whose ``progress`` was read (one that did not
    finish), why its log told nothing (no file, refused, empty: ``progress.read_log``)."""
    out = {}
    for r in ranks:
        why = r.get("collectives_not_logged")
        if not isinstance(why, str):
            why = (r.get("progress") or {}).get("unlogged")
        if isinstance(why, str):
            out[int(r["rank"])] = why
    return out


def note(ranks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The report's note naming them (none when every rank's collectives were logged)."""
    found = unlogged(ranks)
    return [{"kind": NOTE, "ranks": [{"rank": r, "why": why} for r, why in sorted(found.items())]}
            ] if found else []


def note_text(n: dict[str, Any]) -> str:
    """``rank 1's collectives were not logged (IsADirectoryError: …): where it waits …``."""
    rows = [r for r in n.get("ranks") or [] if isinstance(r, dict)]
    names = ", ".join(str(r.get("rank")) for r in rows)
    whys = "; ".join((f"rank {r.get('rank')}: " if len(rows) > 1 else "") + str(r.get("why"))
                     for r in rows)
    one = len(rows) == 1
    return (f"rank{'' if one else 's'} {names}'{'s' if one else ''} collectives were not logged "
            f"({whys}): where {'it waits' if one else 'they wait'} at a hang, and whether the "
            f"other ranks waited for {'it' if one else 'them'}, is not known")


def rank_line(rank: int, why: str, where: str) -> str:
    """Where an unfinished rank whose collectives were not logged was (``where``: its compile
    phase), never "in no collective": whether it waits in one is not known."""
    return (f"rank {rank}: {where}; its collectives were not logged ({why}): whether it "
            "waits in a collective is not known")
