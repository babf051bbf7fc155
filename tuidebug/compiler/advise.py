"""``tuidebug advise --try``: the traced script re-run once as it was traced and once per
suggestion with that suggestion applied (``trace.queries.advice.Apply``: config knobs, an
argument of the compile call, inputs marked dynamic — never an edit of the user's files), each
under capture into a trace of its own; the compiles, recompiles and graph breaks each run made,
before → after, kept in the trace's ``advice.json``. What runs is shown first and needs the
user's yes (``consent``)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from tuidebug import proc
from tuidebug.compiler.consent import Plan, origin_notes
from tuidebug.compiler.recompile import read_manifest, trace_source
from tuidebug.errors import RecompileError
from tuidebug.trace.format import schema
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.writer import write_advice
from tuidebug.trace.jobs.job import rank_of
from tuidebug.trace.open import job_of
from tuidebug.trace.queries.advice import counts, rank
from tuidebug.trace.queries.advice_records import Apply, Counts, Suggestion, Tried


@dataclass(frozen=True)
class Run:
    """One run of the script: its trace, its exit code, its wall time."""

    out: Path
    code: int
    wall_s: float


def plan(trace: Path, suggestions: list[Suggestion]) -> Plan:
    """What ``--try`` runs, as the user is shown it before saying yes: the suggestions it can
    apply, and those it cannot (a change to the user's code: named, not run)."""
    src = trace_source(trace)
    notes = origin_notes(read_manifest(trace), trace)
    tries = [s for s in suggestions if s.apply is not None]
    notes.append(f"it runs {len(tries) + 1} times: once as traced, then once per suggestion: "
                 + "; ".join(f"{s.id} ({s.apply.describe()})" for s in tries
                             if s.apply is not None))
    left = [s.id for s in suggestions if s.apply is None]
    if left:
        notes.append("not run, a change to your code that --try cannot make (it runs your "
                     f"script unchanged): {'; '.join(left)}")
    return Plan("advise --try", sys.executable, [src["script"], *src["args"]], src["cwd"],
                dict(src["overrides"]), {}, notes)


def run_once(trace: Path, out: Path, apply: Apply | None, timeout: float | None = None, *,
             options: tuple[str, ...] = ("--no-check",), overrides: dict[str, Any] | None = None,
             allowed: Mapping[str, Any] | None = None) -> Run:
    """The traced script run once more under capture into ``out`` (with the capture's
    ``options``: ``--no-check`` for ``advise --try``), with ``apply`` in force and the trace's
    config overrides (those ``allowed`` by name too) plus ``overrides``; its output goes to
    ``out``.log."""
    src = trace_source(trace, allowed or {})
    cmd = [sys.executable, "-m", "tuidebug.compiler.run_script", "--out", str(out), *options]
    config = {**src["overrides"], **(overrides or {})}
    if config:
        cmd += ["--overrides", json.dumps(config)]
    if apply is not None:
        cmd += ["--apply", json.dumps(apply.to_json())]
    cmd += [src["script"], *src["args"]]
    log = out.parent / f"{out.name}.log"
    started = time.perf_counter()
    with open(log, "wb") as fh:
        child = proc.spawn(cmd, env=proc.child_env(), cwd=src["cwd"], stdout=fh,
                           stderr=subprocess.STDOUT)
        code = proc.wait(child, timeout)
    return Run(out=out, code=code if isinstance(code, int) else -9,
               wall_s=time.perf_counter() - started)


def why_not_ran(trace: Path, made: Trace) -> str:
    """What a re-run's own trace (``made``) says of why it ran no compiled graph: the script's
    error, and that ``trace`` is a rank of a distributed job (re-run alone, as one process);
    "" when it says nothing."""
    se = made.manifest.script_error
    said = ""
    if se is not None:
        first = (str(se.message or "").strip().splitlines() or [""])[0][:300]
        said = f": the script raised {se.type}: {first}"
    root = job_of(trace)
    rank = rank_of(root, trace) if root is not None else None
    if rank is not None:
        said += (f" — {trace} is rank {rank} of a distributed job, and tuidebug re-runs its "
                 "script alone, as one process, without torchrun")
    return said


def _counts(run: Run) -> Counts:
    if not (run.out / schema.MANIFEST).is_file():
        return Counts(0, 0, 0, run.wall_s, f"wrote no trace (exit code {run.code})")
    return counts(Trace(run.out), run.wall_s)


def try_all(trace: Path, suggestions: list[Suggestion], out_root: Path, *,
            progress: Callable[[str], None] = lambda m: None,
            timeout: float | None = None) -> list[Tried]:
    """Run the script as traced, then once per tryable suggestion; the tries ranked (the ones
    that helped first) and written to the trace's ``advice.json``."""
    tries = [s for s in suggestions if s.apply is not None]
    if not tries:
        raise RecompileError("no suggestion here can be tried without editing the script")
    out_root.mkdir(parents=True, exist_ok=True)
    progress("running the script as traced")
    first = run_once(trace, out_root / "as-traced", None, timeout)
    base = _counts(first)
    if base.status != "ok" and not base.compiles:  # nothing to compare the tries with
        said = (why_not_ran(trace, Trace(first.out)) if (first.out / schema.MANIFEST).is_file()
                else f" (exit code {first.code})")
        raise RecompileError(f"the script, run again as traced, compiled nothing{said}; no "
                             f"suggestion was tried (its output is in {first.out}.log)")
    tried = []
    for i, s in enumerate(tries, 1):
        progress(f"trying {s.id} ({i} of {len(tries)})")
        out = out_root / f"try-{i}"
        tried.append(Tried(id=s.id, before=base, after=_counts(run_once(trace, out, s.apply,
                                                                          timeout)),
                           trace=str(out)))
    ranked = rank(tried)
    write_advice(trace, {"suggestions": [s.to_json() for s in suggestions],
                         "baseline": base.to_json(), "tried": [t.to_json() for t in ranked]})
    return ranked
