"""``tuidebug numerics TRACE``: which kernel made it wrong, found for an existing trace — its
script re-run with ``--numerics`` after the usual consent (``compiler/numerics_rerun.py``)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tuidebug.cli.consent_args import allow_flag_argument, allowed_flags
from tuidebug.cli.output import console, err, note
from tuidebug.cli.viewing import RANK_HELP
from tuidebug.trace.open import archive_stem, trace_dir

DESCRIPTION = (
    "Run a trace's script again under capture with --numerics: every compile's kernels are "
    "judged one by one against eager and a float64 reference, and the first kernel whose "
    "output departs from float64 by more than eager's does is named, with its FX nodes and "
    "source line. Where precision casts or random numbers could explain the difference, the "
    "script runs once more with emulate_precision_casts=True and with fallback_random=True, "
    "and the difference is classified. Before a kernel is blamed, the script runs once more "
    "with the same settings (a control run): a difference that does not come back is "
    "run-to-run noise. The report goes into a new trace beside the given one "
    "(numerics.json); the given trace is not modified. Exit codes: 0 every compile's kernels "
    "agree with eager (or differ by precision casts or random numbers); 1 a kernel is judged "
    "wrong; 3 it could not judge (no check recorded, a difference not reproduced by the "
    "control run, a re-run that did not reach the kernel, outputs that differ with no "
    "generated kernel diverging); 2 bad input.")

EXIT_AGREE, EXIT_WRONG, EXIT_NOT_JUDGED = 0, 1, 3


def numerics_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help="a trace made by `tuidebug trace SCRIPT` (a folder or a "
                                 ".tar.gz), whose script it runs again")
    p.add_argument("--rank", type=int, help=RANK_HELP)
    p.add_argument("-o", "--output", default=None,
                   help="the new trace (default: TRACE-numerics beside the trace; the "
                        "classifying runs go to OUTPUT-<flag>)")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="stop a run that takes longer")
    p.add_argument("--json", action="store_true",
                   help="print the report as JSON (info --json's numerics, and the "
                        "classification)")
    p.add_argument("-y", "--yes", action="store_true",
                   help="run without asking (what will run is still printed); without it, "
                        "tuidebug asks on the terminal and refuses when there is none")
    allow_flag_argument(p)


def cmd_numerics(ns: argparse.Namespace) -> int:
    from tuidebug.compiler import numerics_rerun
    from tuidebug.compiler.consent import ask
    from tuidebug.trace.format.reader import Trace

    path = trace_dir(ns.trace, ns.rank, on_note=note)  # the one door: any form of trace
    allowed = allowed_flags(ns)
    allowed.update(ask(numerics_rerun.plan(path, allowed), yes=ns.yes))  # NotConfirmed: main
    named = archive_stem(Path(ns.trace)) if path != Path(ns.trace) else path
    out = Path(ns.output) if ns.output else numerics_rerun.default_out(named)
    from tuidebug.errors import NotJudged
    from tuidebug.trace.queries.numerics_classes import all_agree, judged_wrong

    try:
        done = numerics_rerun.run(path, out, allowed=allowed, timeout=ns.timeout,
                                  progress=lambda m: print(f"[tuidebug] {m}", file=sys.stderr,
                                                           flush=True))
    except NotJudged as e:
        err(str(e))
        return EXIT_NOT_JUDGED
    trace = Trace(done.out)
    code = EXIT_WRONG if judged_wrong(done.classified) else \
        EXIT_AGREE if all_agree(done.classified) else EXIT_NOT_JUDGED
    if ns.json:
        from tuidebug.trace.format.safefile import strict_dumps
        from tuidebug.trace.queries.numerics import numerics_summary

        print(strict_dumps({"trace": str(done.out), "numerics": numerics_summary(trace),
                            "classified": [c.to_json() for c in done.classified]}, indent=1))
        return code
    from tuidebug.viewers.numerics_report import numerics_report

    out_console = console()
    for line in numerics_report(trace):
        out_console.print(line)
    print(f"[tuidebug] the numerics are in the new trace {done.out} (tuidebug info "
          f"{done.out}); {Path(ns.trace)} is unchanged", file=sys.stderr)
    return code
