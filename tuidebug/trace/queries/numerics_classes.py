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

PRECISION_CASTS = "emulate_precision_casts"
RANDOM = "fallback_random"
FLAGS = (PRECISION_CASTS, RANDOM)
CONTROL = "control"  # the re-run with the same settings: run-to-run noise
RANDOM_CONTROL = f"{CONTROL}:{RANDOM}"  # the fallback_random re-run, once more: its own noise
NARROW_FLOATS = ("float16", "bfloat16", "float8")  # a dtype name starting with one of these

# verdicts
WRONG_KERNEL = "a wrong kernel"
CASTS_VERDICT = "precision casts"
RANDOM_VERDICT = "random numbers"
NONE_DIVERGES = "no kernel diverges"
NOT_JUDGED = "not judged"
NOT_REPRODUCED = "not reproduced"  # the control run did not show the same divergence
NOT_REACHED = "not reached"  # a re-run that had to judge the kernel never did
UNCONFIRMED = "not confirmed"  # no control run was made
AGREES = (NONE_DIVERGES, CASTS_VERDICT, RANDOM_VERDICT)  # compiled and eager agree, or differ
# for a reason that is not a bug

@dataclass
class Rerun:
    """One re-run, as it bears on one compile — a flag's, or the control run (``flag`` is
    ``CONTROL``: the same settings again): ``outcome`` is ``disappears`` (the re-run judged the
    first diverging kernel and no kernel diverges), ``stays`` (a kernel still diverges; for the
    control run: the same kernel call, first again), ``moves`` (the control run: another kernel
    diverges first), ``not run`` (the trace shows the re-run cannot matter; ``detail`` says
    why), ``not available`` (this torch has no such flag) or ``not reached`` (the re-run never
    judged the first diverging kernel: it wrote no trace, stopped earlier or took another
    path)."""

    flag: str
    outcome: str
    detail: str
    trace: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"flag": self.flag, "outcome": self.outcome, "detail": self.detail,
                "trace": self.trace}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Rerun":
        return cls(str(d.get("flag") or ""), str(d.get("outcome") or ""),
                   str(d.get("detail") or ""), str(d["trace"]) if d.get("trace") else None)


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


def _reports(trace: Trace) -> dict[str, dict[str, Any]]:
    """compile id -> its check's numerics report (the kernels judged), for each compile that
    has one."""
    out = {}
    for cid, check in (trace.runtime.get("checks") or {}).items():
        report = check.get("numerics") if isinstance(check, dict) else None
        if isinstance(report, dict):
            out[str(cid)] = report
    return out


def _graphs(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [g for g in report.get("graphs") or [] if isinstance(g, dict)]


def _first(report: dict[str, Any]) -> dict[str, Any] | None:
    first = report.get("first")
    return first if isinstance(first, dict) else None


def _key(first: dict[str, Any] | None) -> tuple[str, str, int] | None:
    """A kernel call as (graph, kernel, call): the same in a re-run that took the same path."""
    if first is None:
        return None
    call = first.get("call")
    return (str(first.get("graph")), str(first.get("kernel")),
            call if isinstance(call, int) and not isinstance(call, bool) else 0)


def _call(report: dict[str, Any], key: tuple[str, str, int]) -> dict[str, Any] | None:
    """The kernel call ``key`` as ``report`` judged it, None when it judged no such call."""
    for g in _graphs(report):
        if str(g.get("graph")) != key[0]:
            continue
        for k in g.get("kernels") or []:
            if isinstance(k, dict) and _key({"graph": key[0], **k}) == key:
                return k
    return None


def _random_key(report: dict[str, Any]) -> tuple[str, str, int] | None:
    """The first kernel call classified as random numbers (not judged): what a re-run with
    fallback_random must reach to say anything of it."""
    for g in _graphs(report):
        for k in g.get("kernels") or []:
            if isinstance(k, dict) and k.get("classified"):
                return _key({"graph": g.get("graph"), **k})
    return None


def random_control_needed(trace: Trace, random_run: Trace | None) -> str | None:
    """Why the fallback_random re-run must run once more: in a compile whose first run had no
    diverging kernel (random numbers hid it), that re-run names one — blamed only when it
    diverges again with the same settings. None when no such compile."""
    if random_run is None:
        return None
    again = _reports(random_run)
    for cid, report in _reports(trace).items():
        if _first(report) is None and _random_classified(report):
            key = _key(_first(again.get(cid) or {}))
            if key is not None:
                return f"compile {cid}: with {RANDOM}=True {_said(key)} diverges"
    return None


def _graph_judged(report: dict[str, Any], graph: str) -> bool:
    """Whether ``report`` judged kernel calls of ``graph`` with the eager run of its FX graph
    complete (a run stopped part-way judges what it reached only)."""
    return any(str(g.get("graph")) == graph and g.get("kernels") and not g.get("note")
               for g in _graphs(report))


def _said(key: tuple[str, str, int]) -> str:
    return f"{key[1]}" + (f" (call {key[2] + 1})" if key[2] else "") + f" in {key[0]}"


def _errs(k: dict[str, Any]) -> str:
    def n(x: Any) -> str:
        return f"{x:.3g}" if isinstance(x, (int, float)) and not isinstance(x, bool) else "—"
    return f"compiled↔fp64 {n(k.get('err_compiled'))}, eager↔fp64 {n(k.get('err_eager'))}"


def _judged(report: dict[str, Any]) -> int:
    return sum(len(g.get("kernels") or []) for g in _graphs(report))


def _random_classified(report: dict[str, Any]) -> int:
    """Kernel calls that differed and were classified as random numbers, not judged."""
    return sum(1 for g in _graphs(report) for k in g.get("kernels") or []
               if isinstance(k, dict) and k.get("classified"))


def _narrow(report: dict[str, Any], graph: str | None) -> list[str]:
    """The 16- and 8-bit float dtypes among the values the kernels of ``graph`` (every graph
    when None) wrote."""
    found = set()
    for g in _graphs(report):
        if graph is not None and g.get("graph") != graph:
            continue
        for k in g.get("kernels") or []:
            for b in (k.get("buffers") or []) if isinstance(k, dict) else []:
                dtype = str(b.get("dtype") or "") if isinstance(b, dict) else ""
                if dtype.startswith(NARROW_FLOATS):
                    found.add(dtype)
    return sorted(found)


def _random_ops(report: dict[str, Any], graph: str | None) -> list[str]:
    return sorted({str(op) for g in _graphs(report)
                   if graph is None or g.get("graph") == graph
                   for op in g.get("random_ops") or []})


def flag_set(trace: Trace, name: str) -> bool:
    """Whether the trace's Inductor config had ``name`` on."""
    changed = trace.config.get("changed") if isinstance(trace.config, dict) else None
    entry = (changed or {}).get(name)
    value = entry.get("value") if isinstance(entry, dict) else entry
    return bool(value) and value is not None


def reruns_needed(trace: Trace) -> dict[str, str]:
    """Which flags' re-runs could change a verdict of ``trace`` (made with ``--numerics``):
    {flag: why it could}, read from the kernels judged — ``emulate_precision_casts`` where a
    diverging kernel's graph wrote 16- or 8-bit floats, ``fallback_random`` where a diverging
    kernel's graph draws random numbers or kernels were classified as random numbers
    unjudged. A flag the trace already had on is not needed."""
    out: dict[str, str] = {}
    for cid, report in _reports(trace).items():
        first = _first(report)
        graph = str(first.get("graph")) if first else None
        if first is not None and not flag_set(trace, PRECISION_CASTS):
            narrow = _narrow(report, graph)
            if narrow:
                out.setdefault(PRECISION_CASTS, f"compile {cid}: {graph} computes in "
                                                f"{', '.join(narrow)}")
        random = _random_ops(report, graph) if first is not None else []
        if (random or _random_classified(report)) and not flag_set(trace, RANDOM):
            out.setdefault(RANDOM, f"compile {cid}: its graph draws random numbers "
                                   f"({', '.join(random or _random_ops(report, None))})")
    return out


def control_needed(trace: Trace) -> str | None:
    """Why the control run (the script again, same settings) is needed: a compile of ``trace``
    has a first diverging kernel, which must diverge again before it is blamed; None when no
    kernel diverges."""
    for cid, report in _reports(trace).items():
        key = _key(_first(report))
        if key is not None:
            return f"compile {cid}: {_said(key)} diverges"
    return None


def _not_run(trace: Trace, flag: str) -> str:
    """Why ``flag``'s re-run cannot change this compile's verdict (it was not run for it)."""
    if flag_set(trace, flag):
        return f"the trace already had {flag}=True"
    if flag == PRECISION_CASTS:
        return ("every value its kernels wrote is float32 or wider: there is no cast to a "
                "narrower float to elide")
    return "its graph draws no random numbers"


def _outcome(flag: str, ran: Trace | None, cid: str, unavailable: str | None,
             key: tuple[str, str, int] | None) -> Rerun:
    """What ``flag``'s re-run (``CONTROL``: the same settings) found of compile ``cid``, whose
    first diverging kernel call was ``key`` (None: none diverged)."""
    if unavailable is not None:
        return Rerun(flag, "not available", unavailable)
    if ran is None:
        return Rerun(flag, "not reached", "the re-run wrote no trace")
    report = _reports(ran).get(cid)
    where = str(ran.root)
    if report is None or not _judged(report):
        return Rerun(flag, "not reached", f"the re-run judged no kernel of compile {cid} (it "
                     "stopped before, or took another path)", where)
    control = flag.startswith(CONTROL)
    again = _call(report, key) if key is not None else None
    # the control run must judge the very kernel call; a flag may change the kernels (with
    # fallback_random a dropout is eager's op, not a kernel): there, the same graph judged
    # whole
    if key is not None and again is None and (control or not _graph_judged(report, key[0])):
        return Rerun(flag, "not reached", f"the re-run judged {_judged(report)} kernel calls of "
                     f"compile {cid}, not {_said(key)} (it stopped before, or took another "
                     "path)", where)
    first = _first(report)
    on = ("with the same settings" if flag == CONTROL else f"with {RANDOM}=True again"
          if control else f"with {flag}=True")
    if first is None:
        return Rerun(flag, "disappears", f"{on} no kernel diverges ({_judged(report)} kernel "
                     "calls judged" + (f"; {key[1]}: {_errs(again)}" if again else "") + ")",
                     where)
    got = _key(first)
    if control and got != key:
        return Rerun(flag, "moves", f"{on} {_said(got)} diverges first, not {_said(key)}"
                     if got else f"{on} another kernel diverges first", where)
    return Rerun(flag, "stays", f"{on} {_said(got) if got else first.get('kernel')} still "
                 f"diverges ({_errs(first)})", where)


def classify(trace: Trace, ran: dict[str, Trace | None],
             unavailable: dict[str, str] | None = None) -> list[Classified]:
    """Each compile of ``trace`` (made with ``--numerics``) classified with the re-runs
    ``ran`` ({flag: the trace of the script re-run with it on, None when that run wrote
    none}; ``CONTROL``: re-run with the same settings); a flag in ``unavailable`` ({flag:
    why}) could not be tried. A flag neither ran nor unavailable was not needed
    (``reruns_needed``)."""
    unavailable = unavailable or {}
    out = []
    for cid, report in _reports(trace).items():
        first = _first(report)
        key = _key(first)
        graph = str(first.get("graph")) if first else None
        kernel = str(first.get("kernel")) if first else None
        randomish = _random_classified(report)
        reach = key if key is not None else _random_key(report)  # what a re-run must judge
        reruns = []
        if key is not None:
            reruns.append(_outcome(CONTROL, ran.get(CONTROL), cid, None, key)
                          if CONTROL in ran else Rerun(CONTROL, "not run", "no control run"))
        for flag in FLAGS:
            relevant = (first is not None and bool(_narrow(report, graph))
                        if flag == PRECISION_CASTS
                        else bool(_random_ops(report, graph) if first else randomish))
            if flag_set(trace, flag) or not relevant:
                reruns.append(Rerun(flag, "not run", _not_run(trace, flag)))
            elif flag in ran or flag in unavailable:
                reruns.append(_outcome(flag, ran.get(flag), cid, unavailable.get(flag), reach))
                if flag == RANDOM and key is None and reruns[-1].outcome == "stays":
                    # random numbers hid a diverging kernel: blamed only if it comes back
                    found = _key(_first(_reports(ran[RANDOM]).get(cid) or {})) \
                        if ran.get(RANDOM) is not None else None
                    reruns.append(_outcome(RANDOM_CONTROL, ran.get(RANDOM_CONTROL), cid, None,
                                           found) if RANDOM_CONTROL in ran and found else
                                  Rerun(RANDOM_CONTROL, "not run", "no control run"))
            else:
                reruns.append(Rerun(flag, "not run", "not asked for"))
        out.append(_verdict(cid, report, kernel, randomish, reruns))
    return out


def _verdict(cid: str, report: dict[str, Any], kernel: str | None, randomish: int,
             reruns: list[Rerun]) -> Classified:
    by = {r.flag: r for r in reruns}
    if not _judged(report):
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
            f"; it came back with the same settings ({control.detail})"
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
    return Classified(cid, None, NONE_DIVERGES, f"{_judged(report)} kernel calls judged, "
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
