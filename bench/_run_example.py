"""Harness for bench/capture_overhead.py: time one run of an example, with or without capture.

torch and Inductor are imported before the clock starts in both modes, so the time measured is
the example's run: dominated by compiling. Each run has a fresh, empty Inductor cache directory
(set by the caller), so both modes do the same compile work. Besides the wall time it reports
the CPU seconds of the run: this process's and those of the children it waited for (the C++
compiler), which hold on a loaded machine where the wall time does not.
"""

from __future__ import annotations

import json
import resource
import runpy
import sys
import time

mode, script, out = sys.argv[1], sys.argv[2], sys.argv[3]
import torch  # noqa: E402
import torch._inductor.compile_fx  # noqa: E402,F401
sys.argv = [script]


def cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


t0, c0 = time.perf_counter(), cpu()
if mode == "plain":
    runpy.run_path(script, run_name="__main__")
elif mode == "plain-samecaches":  # plain compile with the caches capture turns off, off
    from tuidebug.compiler.compat import caches_off_patch

    with caches_off_patch():
        runpy.run_path(script, run_name="__main__")
else:
    from tuidebug.compiler.capture import capture

    with capture(out, check_accuracy=(mode == "capture")):
        runpy.run_path(script, run_name="__main__")
print(json.dumps({"seconds": time.perf_counter() - t0, "cpu_seconds": cpu() - c0}))
