"""Run a command and write its own CPU seconds, peak RSS and wall seconds to a file (the first
argument).

    python bench/_own_rusage.py OUT CMD [ARG…]

Linux keeps a process's RSS high-water mark across fork and exec (``signal->maxrss``), so a
command forked straight from a large bench reports the bench's own peak when its own is smaller:
every peak RSS ``bench/import_torch_trace.py`` printed before this read the bench's size. This
small process is that fork instead: it starts the command from its own (small) memory and
``wait4``'s the command alone, so the figures it writes (``CPU_SECONDS MAXRSS_KB``) are the
command's own (floored at this helper's ~10 MB, which the command's exec starts from: `/bin/true`
reads 10.6 MB, a command filling 200 MB 211 MB). The wall time is timed here, from spawn to
``wait4``: timed by the bench around this helper it held the helper's own Python start-up. Its
exit code is the command's; a command that cannot be started: 127, the reason on stderr, no
file written.
"""

from __future__ import annotations

import os
import sys
import time


def main() -> int:
    out, cmd = sys.argv[1], sys.argv[2:]
    t0 = time.perf_counter()
    try:
        pid = os.posix_spawnp(cmd[0], cmd, os.environ)
    except OSError as e:
        print(f"_own_rusage: cannot start {cmd[0]}: {e}", file=sys.stderr)
        return 127
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    with open(out, "w") as f:
        f.write(f"{ru.ru_utime + ru.ru_stime} {ru.ru_maxrss} {wall}\n")
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
