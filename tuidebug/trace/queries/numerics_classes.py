"""Is a kernel's difference a bug? The first diverging kernel classified by re-runs.

Two of Inductor's ways of computing legitimately differ from eager: it keeps intermediate values
in float32 where eager rounds them to a 16-bit float (precision-cast elision; Inductor's
``emulate_precision_casts`` rounds as eager does), and its kernels draw other random numbers
than eager's ops (``fallback_random`` makes them draw eager's). ``tuidebug numerics`` re-runs
the traced script with each flag on when the trace shows it could matter (``reruns_needed``)
and compares each run's numerics with the first run's (``classify``): a difference that
disappears was that effect, one that stays is a wrong kernel. Before any kernel is blamed, the
script runs once more with the same settings (the control run, ``control_needed``): a difference
that does not come back there is run-to-run noise (a nondeterministic reduction, atomics), not a
wrong kernel. A re-run that never judged the first diverging kernel (it stopped earlier or
took another path) says "not reached", never a class. ``numerics.json`` keeps what was found
(docs/trace-format.md). Pure data: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.numerics_reruns import (  # noqa: F401 (some re-exported)
    CONTROL, FLAGS, PRECISION_CASTS, RANDOM, RANDOM_CONTROL, Rerun, call_key, control_needed,
    first_of, flag_set, judged_count, mismatches, narrow_dtypes, outcome, random_classified,
    random_control_needed, random_key, random_ops_of, reports, reruns_needed, why_not_run)


# verdicts
WRONG_KERNEL = "a wrong kernel"
CASTS_VERDICT = "precision casts"
RANDOM_VERDICT = "random numbers"
NONE_DIVERGES = "no kernel diverges"
NOT_JUDGED = "not judged"
NOT_REPRODUCED = "not reproduced"  # the control run did not show the same divergence
NOT_REACHED = "not reached"  # a re-run that had to judge the kernel never did
UNCONFIRMED = "not confirmed"  # no control run was made
NOT_LOCATED = "not located"  # the outputs differ, yet no generated kernel diverges
AGREES = (NONE_DIVERGES, CASTS_VERDICT, RANDOM_VERDICT)  # compiled and eager agree, or differ
# for a reason that is not a bug


@dataclass
class Classified:
    """A compile's numerics classified: the first diverging kernel (None: none diverged), what
    the control run and each flag's re-run did, and the verdict (``WRONG_KERNEL``,
    ``CASTS_VERDICT``, ``RANDOM_VERDICT``, ``NONE_DIVERGES``, ``NOT_JUDGED``,
    ``NOT_REPRODUCED``, ``NOT_REACHED``, ``UNCONFIRMED``) with the reason in words."""

    compile_id: str
    kernel: str | None
    verdict: str
    why: str
    reruns: list[Rerun] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"compile_id": self.compile_id, "kernel": self.kernel, "verdict": self.verdict,
                "why": self.why, "reruns": [r.to_json() for r in self.reruns]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Classified":
        return cls(str(d.get("compile_id") or ""), str(d["kernel"]) if d.get("kernel") else None,
                   str(d.get("verdict") or ""), str(d.get("why") or ""),
                   [Rerun.from_json(r) for r in d.get("reruns") or [] if isinstance(r, dict)])


def classify(trace: Trace, ran: dict[str, Trace | None],
             unavailable: dict[str, str] | None = None) -> list[Classified]:
    """Each compile of ``trace`` (made with ``--numerics``) classified with the re-runs
    ``ran`` ({flag: the trace of the script re-run with it on, None when that run wrote
    none}; ``CONTROL``: re-run with the same settings); a flag in ``unavailable`` ({flag:
    why}) could not be tried. A flag neither ran nor unavailable was not needed
    (``reruns_needed``)."""
    unavailable = unavailable or {}
    out = []
    wrong_of = mismatches(trace)  # read once, not per compile
    random_run = ran.get(RANDOM)
    random_reports = reports(random_run) if random_run is not None else {}
    for cid, report in reports(trace).items():
        first = first_of(report)
        key = call_key(first)
        graph = str(first.get("graph")) if first else None
        kernel = str(first.get("kernel")) if first else None
        randomish = random_classified(report)
        reach = key if key is not None else random_key(report)  # what a re-run must judge
        reruns = []
        if key is not None:
            reruns.append(outcome(CONTROL, ran.get(CONTROL), cid, None, key)
                          if CONTROL in ran else Rerun(CONTROL, "not run", "no control run"))
        for flag in FLAGS:
            relevant = (first is not None and bool(narrow_dtypes(report, graph))
                        if flag == PRECISION_CASTS
                        else bool(random_ops_of(report, graph) if first else randomish))
            if flag_set(trace, flag) or not relevant:
                reruns.append(Rerun(flag, "not run", why_not_run(trace, flag, report)))
            elif flag in ran or flag in unavailable:
                reruns.append(outcome(flag, ran.get(flag), cid, unavailable.get(flag), reach))
                if flag == RANDOM and key is None and reruns[-1].outcome == "stays":
                    # random numbers hid a diverging kernel: blamed only if it comes back
                    found = call_key(first_of(random_reports.get(cid) or {})) \
                        if random_run is not None else None
                    reruns.append(outcome(RANDOM_CONTROL, ran.get(RANDOM_CONTROL), cid, None,
                                           found) if RANDOM_CONTROL in ran and found else
                                  Rerun(RANDOM_CONTROL, "not run", "no control run"))
            else:
                reruns.append(Rerun(flag, "not run", "not asked for"))
        found = _verdict(cid, report, kernel, randomish, reruns)
        wrong = wrong_of.get(cid)
        if found.verdict == NONE_DIVERGES and wrong is not None:
            found = Classified(cid, None, NOT_LOCATED, f"the outputs differ from eager ({wrong}) "
                               f"but none of the {judged_count(report)} generated kernel calls "
                               "diverges: the difference comes from code not judged kernel by "
                               "kernel (an extern kernel such as a matmul, or eager code)",
                               reruns)
        out.append(found)
    return out


def against(given: Trace, classes: list[Classified]) -> list[Classified]:
    """``classes`` (the numerics run's) checked against the trace the user gave: a compile
    whose check there found a mismatch must have been judged here — "not reached" when the
    numerics run judged no kernel of it, "not reproduced" when its kernels and outputs all
    agree now (the mismatch did not come back: run-to-run noise)."""
    out = list(classes)
    by = {c.compile_id: i for i, c in enumerate(out)}
    for cid, wrong in mismatches(given).items():
        at = by.get(cid)
        if at is None:
            out.append(Classified(cid, None, NOT_REACHED, f"the trace's eager check of compile "
                                  f"{cid} found a mismatch ({wrong}); the numerics run judged no "
                                  "kernel of that compile (it stopped before it, or took another "
                                  "path)"))
        elif out[at].verdict == NONE_DIVERGES:
            out[at] = Classified(cid, None, NOT_REPRODUCED, f"the trace's eager check of compile "
                                 f"{cid} found a mismatch ({wrong}); in the numerics run its "
                                 f"outputs match and {out[at].why} — run-to-run noise, not a "
                                 "kernel judged wrong", out[at].reruns)
    return out


def _shared(report: dict[str, Any]) -> str:
    """What the first diverging kernel's wrong buffers say of the calls that wrote them before
    (a buffer judged after the last of several writers: the wrong value may be an earlier
    one's), as a clause of the verdict's why."""
    first = report.get("first") if isinstance(report.get("first"), dict) else {}
    said = [f"{b.get('buffer')} was written before by "
            f"{', '.join(map(str, b['also_written_by']))}"
            for b in first.get("buffers") or [] if isinstance(b, dict)
            and b.get("ok") is False and isinstance(b.get("also_written_by"), list)
            and b["also_written_by"]]
    return (f"; {'; '.join(said)} (judged only after this kernel: the wrong value may come "
            "from there)") if said else ""


def _verdict(cid: str, report: dict[str, Any], kernel: str | None, randomish: int,
             reruns: list[Rerun]) -> Classified:
    by = {r.flag: r for r in reruns}
    if not judged_count(report):
        return Classified(cid, kernel, NOT_JUDGED, str(report.get("skipped") or report.get("note")
                                                       or "no kernel was judged"), reruns)
    if kernel is not None:
        control = by.get(CONTROL)
        if control is None or control.outcome == "not run":
            return Classified(cid, kernel, UNCONFIRMED, f"{kernel} diverges, but no control "
                              "run (the same settings again) measured the run-to-run noise",
                              reruns)
        if control.outcome in ("disappears", "moves"):
            return Classified(cid, kernel, NOT_REPRODUCED, f"{kernel} diverged once, not again "
                              f"when the script ran once more: {control.detail} — run-to-run "
                              "noise (a nondeterministic kernel), not a kernel judged wrong",
                              reruns)
        if control.outcome != "stays":
            return Classified(cid, kernel, NOT_REACHED, f"the control run did not reach "
                              f"{kernel}: {control.detail}", reruns)
        if by[PRECISION_CASTS].outcome == "disappears":
            return Classified(cid, kernel, CASTS_VERDICT, f"{kernel} differs because Inductor "
                              "keeps values eager rounds to a narrower float: "
                              + by[PRECISION_CASTS].detail, reruns)
        if by[RANDOM].outcome == "disappears":
            return Classified(cid, kernel, RANDOM_VERDICT, f"{kernel} differs because it draws "
                              "other random numbers than eager: " + by[RANDOM].detail, reruns)
        missed = [r for r in reruns if r.outcome == "not reached"]
        if missed:
            return Classified(cid, kernel, NOT_REACHED, "; ".join(
                f"with {r.flag}=True, {r.detail}" for r in missed), reruns)
        stays = [f"{r.flag}=True" for r in reruns if r.outcome == "stays" and r.flag != CONTROL]
        unknown = [r for r in reruns if r.outcome == "not available"]
        why = (f"the difference stays with {' and with '.join(stays)}" if stays else
               "neither precision casts nor random numbers can explain it") + \
            f"; the control run saw it again: {control.detail}" + _shared(report)
        if unknown:
            return Classified(cid, kernel, WRONG_KERNEL + " (unless " + " or ".join(
                r.flag.replace("_", " ") for r in unknown) + ", which could not be tried)",
                why, reruns)
        return Classified(cid, kernel, WRONG_KERNEL, why, reruns)
    if randomish:
        r = by[RANDOM]
        if r.outcome == "disappears":
            return Classified(cid, None, RANDOM_VERDICT, f"{randomish} kernel calls differed "
                              "because they draw other random numbers than eager: "
                              + r.detail, reruns)
        if r.outcome == "stays":
            c = by.get(RANDOM_CONTROL)
            if c is not None and c.outcome == "stays":
                return Classified(cid, None, WRONG_KERNEL, "hidden by random numbers: "
                                  + r.detail + f"; it came back ({c.detail})", reruns)
            if c is not None and c.outcome in ("disappears", "moves"):
                return Classified(cid, None, NOT_REPRODUCED, f"with {RANDOM}=True a kernel "
                                  f"diverged once, not again: {c.detail} — run-to-run noise",
                                  reruns)
            if c is not None and c.outcome == "not reached":
                return Classified(cid, None, NOT_REACHED, f"the control run with {RANDOM}=True "
                                  f"did not reach it: {c.detail}", reruns)
            return Classified(cid, None, UNCONFIRMED, "with " + r.detail + "; no control run "
                              "measured the run-to-run noise", reruns)
        if r.outcome == "not reached":
            return Classified(cid, None, NOT_REACHED, f"with {r.flag}=True, {r.detail}", reruns)
        return Classified(cid, None, RANDOM_VERDICT + " (not confirmed)",
                          f"{randomish} kernel calls differ where the graph draws random "
                          f"numbers; {r.flag}: {r.detail}", reruns)
    return Classified(cid, None, NONE_DIVERGES, f"{judged_count(report)} kernel calls judged, "
                      "none diverging", reruns)


def classified(trace: Trace) -> dict[str, Classified]:
    """``numerics.json``'s classifications (``tuidebug numerics``), by compile id; {} when the
    trace has none."""
    out = {}
    for d in trace.numerics_classified.get("compiles") or []:
        if isinstance(d, dict) and d.get("compile_id"):
            c = Classified.from_json(d)
            out[c.compile_id] = c
    return out


def judged_wrong(classes: list[Classified]) -> bool:
    """Whether a compile's kernel was judged wrong: the difference came back in the control
    run, and no re-run explained it or failed to reach it."""
    return any(c.verdict == WRONG_KERNEL for c in classes)


def all_agree(classes: list[Classified]) -> bool:
    """Whether every compile was judged and agrees (no kernel diverges, or the difference is
    precision casts or random numbers)."""
    return bool(classes) and all(c.verdict in AGREES for c in classes)
