"""The machine a measurement runs on: the cores this process may use and the 1-minute load
average. The one place tuidebug, its tests and its benches count cores. No torch."""

from __future__ import annotations

import os


def cores() -> int:
    """The cores this process may run on (its CPU affinity), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def load1() -> float:
    """The 1-minute load average (0.0 where the system does not say)."""
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return 0.0
