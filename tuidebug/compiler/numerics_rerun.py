"""``tuidebug numerics TRACE``: the first diverging kernel found for an existing trace.

The trace's script is run again under capture with ``--numerics`` (every compile's kernels
judged one by one against eager and float64, ``compiler/localize.py``) into a new trace beside
it; where that run shows a difference that precision casts or random numbers could explain
(``trace.queries.numerics_classes.reruns_needed``), the script is run once more with
``emulate_precision_casts=True`` and with ``fallback_random=True``, and each compile is
classified (``classify``): a difference that disappears was that effect, one that stays is a
wrong kernel. The classification goes into the new trace's ``numerics.json``. Nothing runs
before the user said yes to the plan (``consent``), as for ``recompile`` and ``advise --try``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from tuidebug.compiler.advise import run_once, why_not_ran
from tuidebug.compiler.consent import Plan, origin_notes
from tuidebug.compiler.recompile import read_manifest, trace_source
from tuidebug.errors import NotJudged, RecompileError
from tuidebug.trace.format import schema
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.writer import write_numerics
from tuidebug.trace.queries.numerics_classes import CONTROL, FLAGS, RANDOM, RANDOM_CONTROL, \
    Classified, against, classify, control_needed, random_control_needed, reruns_needed


@dataclass
class NumericsRun:
    """What ``tuidebug numerics`` made: the new trace, and each compile classified."""

    out: Path
    code: int
    classified: list[Classified] = field(default_factory=list)
    reruns: dict[str, Path] = field(default_factory=dict)  # flag -> its re-run's trace


def plan(trace: Path, allowed: Mapping[str, Any] | None = None) -> Plan:
    """What ``numerics`` runs, as the user is shown it before saying yes."""
    src = trace_source(trace, allowed or {})
    m = read_manifest(trace)
    notes = origin_notes(m, trace)
    notes.append("it runs under capture with --numerics (every compile's kernels judged one "
                 "by one against eager and float64); where a kernel diverges, once more with the "
                 "same settings (a control run: is it run-to-run noise?); where a kernel's "
                 "difference could come from "
                 "precision casts or random numbers, once more with " + " and once with ".join(
                     f"{f}=True" for f in FLAGS) + " to classify it")
    if not m.check_accuracy:
        notes.append("the trace was made with --no-check; this run compares with eager")
    return Plan("numerics", sys.executable, [src["script"], *src["args"]], src["cwd"],
                dict(src["overrides"]), {}, notes, dict(src["confirm"]), dict(src["left_out"]))


def default_out(named: Path) -> Path:
    return Path(f"{str(named).rstrip('/')}-numerics")


def _options(trace: Path) -> tuple[str, ...]:
    tol = read_manifest(trace).accuracy_tol
    return ("--numerics",) + (("--accuracy-tol", repr(float(tol))) if tol is not None else ())


def _unavailable(flags: list[str]) -> dict[str, str]:
    """{flag: "not available in torch X"} for those of ``flags`` this torch does not have."""
    from tuidebug.compiler.flags import load_registry
    from tuidebug.compiler.torch_version import installed_torch

    registry = load_registry()
    out = {}
    for flag in flags:
        try:
            registry.get(flag)
        except LookupError:
            out[flag] = f"not available in torch {installed_torch() or '(unknown version)'}"
    return out


def _empty(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise RecompileError(f"{out} exists and is not empty; choose another with -o")


def run(trace: Path, out: Path, *, allowed: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        progress: Callable[[str], None] = lambda m: None) -> NumericsRun:
    """Run the numerics of ``trace`` into ``out`` (the consent asked before); raises
    NotJudged when the run records no eager check to judge kernels in."""
    options = _options(trace)
    flag_outs = {f: Path(f"{out}-{f}") for f in (CONTROL, *FLAGS)}
    flag_outs[RANDOM_CONTROL] = Path(f"{out}-{RANDOM}-{CONTROL}")
    for path in (out, *flag_outs.values()):
        _empty(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    progress(f"running the script with --numerics → {out}")
    first = run_once(trace, out, None, timeout, options=options, allowed=allowed)
    if not (out / schema.MANIFEST).is_file():
        raise RecompileError(f"the script's run wrote no trace (exit code {first.code}); its "
                             f"output is in {out.parent / (out.name + '.log')}")
    made = Trace(out)
    if not made.runtime.get("checks"):
        raise NotJudged(
            f"the run recorded no accuracy check in {out}: no compiled graph ran"
            f"{why_not_ran(trace, made)} (its output is in "
            f"{out.parent / (out.name + '.log')})")
    needed = reruns_needed(made)
    unavailable = _unavailable(sorted(needed))
    ran: dict[str, Trace | None] = {}
    reruns: dict[str, Path] = {}
    why_control = control_needed(made)
    if why_control is not None:
        progress(f"control: running it again with the same settings ({why_control}) → "
                 f"{flag_outs[CONTROL]}")
        again = run_once(trace, flag_outs[CONTROL], None, timeout, options=options,
                         allowed=allowed)
        reruns[CONTROL] = again.out
        ran[CONTROL] = Trace(again.out) if (again.out / schema.MANIFEST).is_file() else None
    for flag in FLAGS:
        if flag not in needed or flag in unavailable:
            continue
        progress(f"classifying: running it again with {flag}=True ({needed[flag]}) → "
                 f"{flag_outs[flag]}")
        again = run_once(trace, flag_outs[flag], None, timeout, options=options,
                         overrides={flag: True}, allowed=allowed)
        reruns[flag] = again.out
        ran[flag] = Trace(again.out) if (again.out / schema.MANIFEST).is_file() else None
    why_again = random_control_needed(made, ran.get(RANDOM))
    if why_again is not None:
        progress(f"control: running it again with {RANDOM}=True ({why_again}) → "
                 f"{flag_outs[RANDOM_CONTROL]}")
        again = run_once(trace, flag_outs[RANDOM_CONTROL], None, timeout, options=options,
                         overrides={RANDOM: True}, allowed=allowed)
        reruns[RANDOM_CONTROL] = again.out
        ran[RANDOM_CONTROL] = Trace(again.out) if (again.out / schema.MANIFEST).is_file() \
            else None
    classified = against(Trace(trace), classify(made, ran, unavailable))
    write_numerics(out, {"compiles": [c.to_json() for c in classified]})
    return NumericsRun(out, first.code, classified, reruns)
