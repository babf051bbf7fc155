"""The capture child of ``tuidebug trace``: run with its stderr passed through, and what the
script said last (its last lines there that are not tuidebug's own), which a rank's record
keeps (``last_words``: a process the NCCL watchdog aborted raised no Python exception)."""

from __future__ import annotations

import collections
import re
import subprocess
import sys
from typing import Callable

from tuidebug import proc
from tuidebug.trace.jobs.ends import collective_timeout_text

# C++ stack lines a fatal error prints after its message (c10's ``Exception raised from
# checkTimeout at …`` then ``frame #0: …``): never what the script said last
_CPP_FRAMES = re.compile(r"\s*(?:frame #\d+:|Exception raised from )")


def run_child(cmd: list[str], env: dict[str, str],
              on_start: Callable[[int], None] | None = None) -> tuple[int, list[str]]:
    """Run the capture child with its stderr passed through; returns its exit code and the
    last lines (5) it wrote there that are not tuidebug's own nor C++ stack frames (what the
    script said last), with the last line that says a collective timed out kept first when it
    is older (the NCCL watchdog's abort prints more lines after it). ``on_start``: called with
    the child's pid once it runs."""
    tail: collections.deque[str] = collections.deque(maxlen=5)
    timed_out: str | None = None
    # in the terminal's process group (not a session of its own): Ctrl-C reaches the script,
    # which may also read the terminal
    # which also gets Ctrl-C: this process goes on passing its output through until it ends
    with proc.spawn(cmd, env=env, own_group=False, stderr=subprocess.PIPE, text=True,
                    errors="replace") as child:
        assert child.stderr is not None
        if on_start is not None:
            on_start(child.pid)
        while True:
            try:
                for line in child.stderr:
                    sys.stderr.write(line)
                    sys.stderr.flush()
                    if line.strip() and not line.startswith("[tuidebug]") \
                            and not _CPP_FRAMES.match(line):
                        tail.append(line.rstrip())
                        if collective_timeout_text(line):
                            timed_out = line.rstrip()
                break
            except KeyboardInterrupt:
                continue
    said = list(tail)
    return child.returncode, ([timed_out] if timed_out and timed_out not in said else []) + said
