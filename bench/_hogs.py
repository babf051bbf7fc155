"""CPU hogs beside a measurement, and what shows they contended: one busy-loop process per core
this process may use (with the measured process beside them, more runnable threads than
cores), each one's CPU time (``os.wait4``) and the load average before and after.

Used by ``bench/profile_under_load.py`` and the recompile-under-load test
(tests/compiler/test_recompile.py): a run "under load" says so only where the hogs ran.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

from tuidebug.machine import cores, load1

HOG = "while True:\n    pass\n"
# a busy loop is always runnable: where it got less than this share of a core over the run, it
# did not run as a hog does (stopped, or not started): 2 cores would need ~100 runnable threads.
# (Measured here, 2 cores at load 10-12 from other work: 9-22% of a core each.)
MIN_SHARE = 0.02


@dataclass
class Contention:
    """What the hogs did: how many on how many cores, for how long (``wall_s``, from the first
    started to the last killed), each one's CPU seconds, whether every one ran to the end, and
    the 1-minute load average before and after."""

    hogs: int
    cores: int
    load_before: float
    wall_s: float = 0.0
    hog_cpu_s: list[float] = field(default_factory=list)
    alive: bool = False
    load_after: float = 0.0

    @property
    def contended(self) -> bool:
        """Every core had a hog that kept running beside the measured process: more runnable
        threads than cores throughout."""
        return (self.alive and self.hogs >= self.cores and len(self.hog_cpu_s) == self.hogs
                and self.wall_s > 0 and min(self.hog_cpu_s) >= MIN_SHARE * self.wall_s)

    def describe(self) -> str:
        shares = ", ".join(f"{c / self.wall_s:.0%}" for c in self.hog_cpu_s) if self.wall_s else "?"
        return (f"{self.hogs} hog(s) on {self.cores} core(s) for {self.wall_s:.1f} s: CPU "
                f"{sum(self.hog_cpu_s):.1f} s ({shares} of a core each), "
                f"{'all ran to the end' if self.alive else 'NOT all ran to the end'}; load "
                f"{self.load_before:.2f} -> {self.load_after:.2f}: "
                f"{'contended' if self.contended else 'NOT contended'}")


@contextmanager
def hogging(n: int | None = None) -> Iterator[Contention]:
    """``n`` busy-loop processes (default: one per core) while the block runs; killed after,
    by their ids, and reaped with their CPU time into the yielded ``Contention``."""
    c = Contention(hogs=n or cores(), cores=cores(), load_before=load1())
    t0 = time.perf_counter()
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(c.hogs)]
    try:
        yield c
    finally:
        c.alive = all(h.poll() is None for h in hogs)
        for h in hogs:
            if h.returncode is None:
                h.kill()
        for h in hogs:
            if h.returncode is None:
                _, status, usage = os.wait4(h.pid, 0)
                h.returncode = os.waitstatus_to_exitcode(status)
                c.hog_cpu_s.append(usage.ru_utime + usage.ru_stime)
        c.wall_s = time.perf_counter() - t0
        c.load_after = load1()
