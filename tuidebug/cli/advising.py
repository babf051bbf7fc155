"""``tuidebug advise TRACE [--try]``: what to do about a trace's graph breaks and recompiles,
and, with ``--try``, each suggestion tried on the traced script (after the usual consent)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tuidebug.cli.output import console, note
from tuidebug.cli.viewing import RANK_HELP, TRACE_HELP
from tuidebug.errors import CliError
from tuidebug.trace.open import archive_stem, trace_dir


def advise_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help=TRACE_HELP + " (--try: a trace made by `tuidebug trace "
                                             "SCRIPT`, whose script it runs again)")
    p.add_argument("--rank", type=int, help=RANK_HELP)
    p.add_argument("--try", dest="try_", action="store_true",
                   help="re-run the script once as traced and once per suggestion with it "
                        "applied (config knobs, dynamic=True through the compile call, an input "
                        "marked dynamic; your files are not edited) and report compiles, "
                        "recompiles and graph breaks before → after")
    p.add_argument("-o", "--output", default=None,
                   help="where the tries' traces go (default: TRACE-advise beside the trace)")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="stop a run that takes longer")
    p.add_argument("--yes", action="store_true", help="run without asking (the plan is shown)")
    p.add_argument("--json", action="store_true", help="print the suggestions (and tries) as JSON")


def cmd_advise(ns: argparse.Namespace) -> int:
    from tuidebug.trace.format.reader import Trace
    from tuidebug.trace.queries.advice import suggestions
    from tuidebug.viewers.advice_view import render_advice

    path = trace_dir(ns.trace, ns.rank, on_note=note)  # the one door: any form of trace
    if ns.rank is None:
        _compiled_elsewhere(ns.trace, path)
    trace = Trace(path)
    found = suggestions(trace)
    tried = [t for t in trace.advice.get("tried") or [] if isinstance(t, dict)]
    if ns.try_:
        from tuidebug.compiler import advise
        from tuidebug.compiler.consent import ask

        tries = [s for s in found if s.apply is not None]
        if not tries:
            raise CliError("no suggestion here can be tried without editing the script")
        ask(advise.plan(path, found), yes=ns.yes)
        named = archive_stem(Path(ns.trace)) if path != Path(ns.trace) else path
        out = Path(ns.output) if ns.output else Path(f"{str(named).rstrip('/')}-advise")
        if out.exists() and any(out.iterdir()):
            raise CliError(f"{out} is not empty; choose another with -o")
        ranked = advise.try_all(path, found, out, timeout=ns.timeout, progress=lambda m:
                                print(f"[tuidebug] {m}", file=sys.stderr, flush=True))
        tried = [t.to_json() for t in ranked]
    if ns.json:
        print(json.dumps({"suggestions": [s.to_json() for s in found], "tried": tried},
                         indent=2))
        return 0
    render_advice([s.to_json() for s in found], tried, console())
    return 0


def _compiled_elsewhere(named: str, path: Path) -> None:
    """A job named without ``--rank``: the advice is its lowest rank's; where the job's ranks
    first diverge at a compile that rank did not make (a recompile on another rank only), say
    which ranks made it and how to read their advice."""
    import shlex

    from tuidebug.trace.jobs.divergence import first_divergence
    from tuidebug.trace.jobs.job import rank_of
    from tuidebug.trace.open import job_of
    from tuidebug.viewers.ranks_view import compiled_elsewhere_line

    job = job_of(path)
    rank = rank_of(job, path) if job is not None and job == Path(named).resolve() else None
    if job is None or rank is None:
        return
    # the divergence alone: not the job's progress logs, collectives and run times
    line = compiled_elsewhere_line(first_divergence(job), rank,
                                   f"tuidebug advise {shlex.quote(named)}")
    if line:
        note(line)
