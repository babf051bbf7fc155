"""Whether every rank of a job counts its collectives, asked before the ranks agree to time a
call together (``agreement``). A rank decides whether a call communicates from the collectives
counted while the user's call ran (``rank_progress.RankProgress.issued``); a rank whose counter
could not be installed (its progress log unwritable: a disk error, a full folder on one node)
times no call of a job (``agreement.uncounted``), and ranks that counted a collective in the
same call would wait forever for it in their agreement's all-reduce. So each rank says, once
per default process group, whether it counts, through that group's own store (the one its ranks
met through, reachable whatever the counter did), at its first call of a compiled callable,
before anything of that call decides whether it is timed (a rank whose compile fell back to
eager, with no graph yet, says it all the same). A rank about to agree with the others first
reads every rank's word, waiting for it a bounded time (``WORD_WAIT_S``, at most half the
store's own timeout, which under ``init_process_group`` is the group's: the waiting rank must
not outlast the collectives of a rank that never calls a compiled callable and waits in its
next collective for this one); where one does not count, or did not say, no rank re-runs the
call. Ranks that waited different times must not decide differently (one left out of the
agreement's all-reduce leaves the others waiting there): the first rank to decide writes the
decision to the store (``compare_set``), and every rank takes the one written. The keys name
the default group's number in this process (``compat.default_groups``): a default group made
again after ``destroy_process_group`` on the same store (torchrun's agent's, the user's) has the
same key prefix there as the last, whose words and decision must not read as its own."""

from __future__ import annotations

import time
from typing import Any, Callable

from tuidebug.compiler import compat
from tuidebug.compiler.capture.agreement import uncounted, uncounted_said, world_size

_KEY = "tuidebug/counts_collectives/"  # then the default group's number, then rank or 'decided'
_COUNTS = "yes"
NO_GRAPH = "no graph"  # a rank that had compiled no graph by its first call that talks
WORD_WAIT_S = 60.0  # the longest a rank waits for the others' words (less: half the store's)
_POLL_S = 0.05


class CountedRanks:
    """This rank's word (``mine``, at each call before anything is decided) and every rank's
    (``why_not``), read once per default group while every rank counts."""

    def __init__(self, wait_s: float = WORD_WAIT_S) -> None:
        self._said_to: Any = None  # the store this rank said its word to
        self._decided: tuple[Any, str | None] | None = None  # (store, its decision)
        self.wait_s = wait_s

    def mine(self, issued: int | None, failed: str | None,
             talks: Callable[[], bool] = lambda: True, graphs: bool = True) -> str | None:
        """Why this rank times no call (its collectives are not counted, on a job of several
        ranks: ``agreement.uncounted`` of the call's count ``issued`` and of why its counter
        ``failed``), said to the other ranks first; None where it may time the call. A rank
        that counts says so at its first call that ``talks`` to the others (``communicates``),
        unless it had compiled no graph by then (``graphs``: its compile fell back to eager
        there): it then times no call that the others would time with it, and says that."""
        cause = uncounted(issued, failed)
        if cause is not None:
            self.say(cause)
            return uncounted_said(cause)
        if world_size() > 1 and not self._said() and talks():
            self.say(None if graphs else NO_GRAPH)
        return None

    def _said(self) -> bool:
        try:
            return self._said_to is not None and compat.default_store() is self._said_to
        except Exception:  # noqa: BLE001 - no store: nothing to say it to
            return True

    def say(self, why: str | None) -> None:
        """This rank's word (``why`` it does not count: ``agreement.uncounted``, or
        ``NO_GRAPH``; None: it counts) in the default group's store, once per group, on a job
        of several ranks; a store this torch cannot reach is left unsaid (every rank of the job
        has the same torch: none reads a word either, and none re-runs a call that talks to the
        others)."""
        if world_size() < 2:
            return
        try:
            store = compat.default_store()
            if store is self._said_to:
                return
            rank = compat.this_rank()
            word = _COUNTS if why is None else why if why == NO_GRAPH else f"no: {why}"[:600]
            store.set(_key(rank), word)
            self._said_to = store
        except Exception:  # noqa: BLE001 - the others then read no word of this rank: not timed
            return

    def why_not(self) -> str | None:
        """Why a call that communicates cannot be timed by every rank: some rank does not count
        its collectives (it times no call, and the others would wait for it), said no word in
        time, or its word could not be read; None where every rank counts. Decided once per
        default group, alike on every rank (the first rank's decision, from the store)."""
        try:
            store = compat.default_store()
        except Exception as e:  # noqa: BLE001 - a word not read: nothing re-runs
            return _unread(e)
        if self._decided is not None and self._decided[0] is store:
            return self._decided[1]
        try:
            mine = self._read(store)
            theirs = bytes(store.compare_set(_key("decided"), "", mine)).decode("utf-8", "replace")
        except Exception as e:  # noqa: BLE001 - the store failing: nothing re-runs here
            return _unread(e)
        said = None if theirs == _COUNTS else theirs.removeprefix("no: ")
        self._decided = (store, said)
        return said

    def _read(self, store: Any) -> str:
        """This rank's decision from every rank's word (``yes``, or ``no: why``), waiting for
        the words no longer than the bound."""
        keys = [_key(r) for r in range(world_size())]
        bound = min(self.wait_s, _seconds(getattr(store, "timeout", None)) / 2)
        end = time.monotonic() + bound
        while not store.check(keys):  # polled: a store's own timed wait logs each time out
            if time.monotonic() >= end:
                silent = [r for r, k in enumerate(keys) if not store.check([k])]
                if not silent:
                    break
                many = len(silent) > 1
                return (f"no: rank{'s' if many else ''} {', '.join(map(str, silent))} said no "
                        f"word in {bound:.0f} s of whether "
                        f"{'they count their' if many else 'it counts its'} collectives (no "
                        "call of a compiled callable had returned there): no rank re-runs a "
                        f"call that talks to the others, which would wait for "
                        f"{'them' if many else 'it'}")
            time.sleep(_POLL_S)
        words = [bytes(store.get(k)).decode("utf-8", "replace") for k in keys]
        short = [(r, w) for r, w in enumerate(words) if w not in (_COUNTS, NO_GRAPH)]
        if short:
            ranks = ", ".join(str(r) for r, _ in short)
            first = short[0][1].removeprefix("no: ")
            return (f"no: rank{'s' if len(short) > 1 else ''} {ranks} "
                    f"do{'' if len(short) > 1 else 'es'} not count "
                    f"{'their' if len(short) > 1 else 'its'} collectives ({first}): a rank "
                    "that does not count times no call, so no rank re-runs one that talks to "
                    "the others")
        bare = [r for r, w in enumerate(words) if w == NO_GRAPH]
        if bare:
            many = len(bare) > 1
            return (f"no: rank{'s' if many else ''} {', '.join(map(str, bare))} had compiled no "
                    f"graph by {'their' if many else 'its'} first call that talks to the "
                    "others (its compile fell back to eager, or made none): "
                    f"{'they time' if many else 'it times'} no call with the others, so no "
                    "rank re-runs one that talks to them")
        return _COUNTS


def _key(name: object) -> str:
    """A key of this default group's words: ``name`` a rank, or 'decided'."""
    return f"{_KEY}{compat.default_groups()}/{name}"


def _seconds(timeout: Any) -> float:
    """A store's timeout (a ``timedelta``) in seconds; none given: no bound of its own."""
    try:
        return float(timeout.total_seconds())
    except Exception:  # noqa: BLE001
        return float("inf")


def _unread(e: Exception) -> str:
    return (f"whether every rank counts its collectives could not be read from the "
            f"process group's store ({type(e).__name__}: {str(e)[:200]}): a rank that "
            "does not count times no call, and the others would wait for it")
