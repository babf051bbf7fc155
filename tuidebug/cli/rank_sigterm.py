"""A rank's SIGTERM under a launcher (``tuidebug trace`` tracing one rank of a job): its record
written ``killed``, the rank waiting for its script to end as the script would have ended
untraced. Nothing here imports torch."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from tuidebug import proc


class RankSigterm:
    """This rank's SIGTERM handler (a launcher stopping every rank when one ended: torchrun's
    ``os.killpg``, which reaches the script's process too, then SIGKILL 30 s later). While the
    script runs: write the record ``killed`` (``ended_by`` SIGTERM; pending: how the script
    ends is written when it has), pass SIGTERM on to the script's process where it is in
    another process group (``os.killpg`` on this one did not reach it), and return: the rank
    waits for the script as torchrun would (its own SIGTERM handler saving a checkpoint, say)
    and ends as it ended. Before the script started: die of SIGTERM at once. Once the script
    has ended (``ended``): nothing — its end is the rank's, the record keeps it. Without a
    handler the record stayed ``running``; ending at once orphaned the script. A SIGTERM after the
    script's process ended but before ``end``: nothing either (it read ``killed`` for a script
    that exited 0)."""

    def __init__(self, root: Path, record: dict[str, Any]) -> None:
        self.root, self.record = root, record
        self.child: int | None = None
        self.received = False
        self.ended = False
        signal.signal(signal.SIGTERM, self)

    def started(self, pid: int) -> None:
        self.child = pid

    def __call__(self, signum: int, frame: Any) -> None:
        if self.ended or self.received:
            return
        if self.child is not None and proc.exited(self.child):
            return  # the script ended before its end was taken: its end is the rank's
        self.received = True
        from tuidebug.trace.jobs import job

        waiting = self.child is not None
        try:
            job.write_record(self.root, {
                **self.record, "status": "killed",
                # no script to wait for: the rank dies of it now, its end known
                "exit_code": None if waiting else -signum,
                "ended_by": proc.signal_name(signum), "finished_at": time.time(),
                "note": "sent SIGTERM before it finished (a launcher stops every rank when one "
                        "ends); " + ("waiting for the script to end" if waiting else
                                     "it ended before its script started")})
        except OSError:  # the record cannot be written: the rank still ends as asked
            pass
        if not waiting:
            proc.die_of(signum)
        try:
            if os.getpgid(self.child) != os.getpgrp():
                os.kill(self.child, signum)
        except OSError:  # it has ended
            pass

    def end(self, code: int) -> dict[str, Any]:
        """The script ended with ``code``: the record's end (SIGTERM handled from now on by
        doing nothing), from the script's code alone."""
        self.ended = True
        end: dict[str, Any] = {"status": "unknown", "exit_code": code,
                               "finished_at": time.time()}
        if self.received:
            end.update(status="killed", ended_by="SIGTERM", note=(
                "ended by SIGTERM before it finished (a launcher stops every rank when one "
                "ends)" if code == -signal.SIGTERM else
                "sent SIGTERM before it finished (a launcher stops every rank when one ends); "
                f"the script then ended: {proc.exit_description(code)}"))
        return end
