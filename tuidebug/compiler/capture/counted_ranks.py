"""Whether every rank of a job counts its collectives, asked before the ranks agree to time a
call together (``agreement``). A rank decides whether a call communicates from the collectives
counted while the user's call ran (``rank_progress.RankProgress.issued``); a rank whose counter
could not be installed (its progress log unwritable: a disk error, a full folder on one node)
times no call of a job (``agreement.uncounted``), and ranks that counted a collective in the
same call would wait forever for it in their agreement's all-reduce. So each rank says, once
per default process group, whether it counts, through that group's own store (the one its ranks
met through, reachable whatever the counter did); a rank about to agree with the others first
reads every rank's word (waiting for it no longer than the store waits: as long as the
agreement's all-reduce would), and where one does not count, no rank re-runs the call."""

from __future__ import annotations

from typing import Any

from tuidebug.compiler import compat
from tuidebug.compiler.capture.agreement import uncounted, uncounted_said, world_size

_KEY = "tuidebug/counts_collectives/"
_COUNTS = "yes"


class CountedRanks:
    """This rank's word (``mine``, at each call before anything is decided) and every rank's
    (``why_not``), read once per default group while every rank counts."""

    def __init__(self) -> None:
        self._said_to: Any = None  # the store this rank said its word to
        self._all_count: Any = None  # the store every rank said it counts to

    def mine(self, issued: int | None, failed: str | None) -> str | None:
        """Why this rank times no call (its collectives are not counted, on a job of several
        ranks: ``agreement.uncounted`` of the call's count ``issued`` and of why its counter
        ``failed``), said to the other ranks first; None where it may time the call."""
        cause = uncounted(issued, failed)
        self.say(cause)
        return None if cause is None else uncounted_said(cause)

    def say(self, why: str | None) -> None:
        """This rank's word (``why`` it does not count: ``agreement.uncounted``; None: it
        counts) in the default group's store, once per group, on a job of several ranks; a
        store this torch cannot reach is left unsaid (every rank of the job has the same torch:
        none reads a word either, and none re-runs a call that talks to the others)."""
        if world_size() < 2:
            return
        try:
            store = compat.default_store()
            if store is self._said_to:
                return
            rank = compat.this_rank()
            store.set(f"{_KEY}{rank}", _COUNTS if why is None else f"no: {why}"[:600])
            self._said_to = store
        except Exception:  # noqa: BLE001 - the others then read no word of this rank: not timed
            return

    def why_not(self) -> str | None:
        """Why a call that communicates cannot be timed by every rank: some rank does not count
        its collectives (it times no call, and the others would wait for it), or its word could
        not be read; None where every rank counts."""
        try:
            store = compat.default_store()
            if store is self._all_count:
                return None
            keys = [f"{_KEY}{r}" for r in range(world_size())]
            store.wait(keys)  # the store's own timeout: the process group's
            words = [bytes(store.get(k)).decode("utf-8", "replace") for k in keys]
        except Exception as e:  # noqa: BLE001 - a word not read: nothing re-runs
            return (f"whether every rank counts its collectives could not be read from the "
                    f"process group's store ({type(e).__name__}: {str(e)[:200]}): a rank that "
                    "does not count times no call, and the others would wait for it")
        short = [(r, w) for r, w in enumerate(words) if w != _COUNTS]
        if not short:
            self._all_count = store
            return None
        ranks = ", ".join(str(r) for r, _ in short)
        first = short[0][1].removeprefix("no: ")
        return (f"rank{'s' if len(short) > 1 else ''} {ranks} "
                f"do{'' if len(short) > 1 else 'es'} not count "
                f"{'their' if len(short) > 1 else 'its'} collectives ({first}): a rank that "
                "does not count times no call, so no rank re-runs one that talks to the others")
