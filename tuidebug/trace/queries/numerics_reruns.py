"""The re-runs of ``tuidebug numerics`` as they bear on one compile: which are needed (the
control run, the flags' re-runs), and what each found of the first diverging kernel — reached
it or not, the difference gone, still there or moved. ``numerics_classes`` turns them into a
verdict. Pure data: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuidebug.trace.format.reader import Trace

PRECISION_CASTS = "emulate_precision_casts"
RANDOM = "fallback_random"
FLAGS = (PRECISION_CASTS, RANDOM)
CONTROL = "control"  # the re-run with the same settings: run-to-run noise
RANDOM_CONTROL = f"{CONTROL}:{RANDOM}"  # the fallback_random re-run, once more: its own noise
NARROW_FLOATS = ("float16", "bfloat16", "float8")  # a dtype name starting with one of these


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


def reports(trace: Trace) -> dict[str, dict[str, Any]]:
    """compile id -> its check's numerics report (the kernels judged), for each compile that
    has one."""
    out = {}
    for cid, check in (trace.runtime.get("checks") or {}).items():
        report = check.get("numerics") if isinstance(check, dict) else None
        if isinstance(report, dict):
            out[str(cid)] = report
    return out


def mismatches(trace: Trace) -> dict[str, str]:
    """compile id -> what its eager check found wrong, for each check whose outputs (or
    gradients) differ from eager's beyond the judge's rule."""
    out = {}
    for cid, check in (trace.runtime.get("checks") or {}).items():
        if isinstance(check, dict) and check.get("close") is False:
            out[str(cid)] = str(check.get("detail") or "the outputs differ")[:300]
    return out


def graphs_of(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [g for g in report.get("graphs") or [] if isinstance(g, dict)]


def first_of(report: dict[str, Any]) -> dict[str, Any] | None:
    first = report.get("first")
    return first if isinstance(first, dict) else None


def call_key(first: dict[str, Any] | None) -> tuple[str, str, int] | None:
    """A kernel call as (graph, kernel, call): the same in a re-run that took the same path."""
    if first is None:
        return None
    call = first.get("call")
    return (str(first.get("graph")), str(first.get("kernel")),
            call if isinstance(call, int) and not isinstance(call, bool) else 0)


def kernel_call(report: dict[str, Any], key: tuple[str, str, int]) -> dict[str, Any] | None:
    """The kernel call ``key`` as ``report`` judged it, None when it judged no such call."""
    for g in graphs_of(report):
        if str(g.get("graph")) != key[0]:
            continue
        for k in g.get("kernels") or []:
            if isinstance(k, dict) and call_key({"graph": key[0], **k}) == key:
                return k
    return None


def random_key(report: dict[str, Any]) -> tuple[str, str, int] | None:
    """The first kernel call classified as random numbers (not judged): what a re-run with
    fallback_random must reach to say anything of it."""
    for g in graphs_of(report):
        for k in g.get("kernels") or []:
            if isinstance(k, dict) and k.get("classified"):
                return call_key({"graph": g.get("graph"), **k})
    return None


def random_control_needed(trace: Trace, random_run: Trace | None) -> str | None:
    """Why the fallback_random re-run must run once more: in a compile whose first run had no
    diverging kernel (random numbers hid it), that re-run names one — blamed only when it
    diverges again with the same settings. None when no such compile."""
    if random_run is None:
        return None
    again = reports(random_run)
    for cid, report in reports(trace).items():
        if first_of(report) is None and random_classified(report):
            key = call_key(first_of(again.get(cid) or {}))
            if key is not None:
                return f"compile {cid}: with {RANDOM}=True {said(key)} diverges"
    return None


def graph_judged(report: dict[str, Any], graph: str) -> bool:
    """Whether ``report`` judged kernel calls of ``graph`` with the eager run of its FX graph
    complete (a run stopped part-way judges what it reached only)."""
    return any(str(g.get("graph")) == graph and g.get("kernels") and not g.get("note")
               for g in graphs_of(report))


def said(key: tuple[str, str, int]) -> str:
    return f"{key[1]}" + (f" (call {key[2] + 1})" if key[2] else "") + f" in {key[0]}"


def errs(k: dict[str, Any]) -> str:
    def n(x: Any) -> str:
        return f"{x:.3g}" if isinstance(x, (int, float)) and not isinstance(x, bool) else "—"
    return f"compiled↔fp64 {n(k.get('err_compiled'))}, eager↔fp64 {n(k.get('err_eager'))}"


def unjudged(k: dict[str, Any]) -> bool:
    """A kernel call whose buffers hold no FX node's value (a layout copy before a convolution:
    ViT's patch embedding): nothing of it was compared, so it has no verdict ("ok" was said)."""
    return isinstance(k.get("buffers"), list) and not k["buffers"]


def judged_count(report: dict[str, Any]) -> int:
    """The kernel calls of ``report`` whose values were compared (``unjudged`` left out)."""
    return sum(1 for g in graphs_of(report) for k in g.get("kernels") or []
               if not (isinstance(k, dict) and unjudged(k)))


def random_classified(report: dict[str, Any]) -> int:
    """Kernel calls that differed and were classified as random numbers, not judged."""
    return sum(1 for g in graphs_of(report) for k in g.get("kernels") or []
               if isinstance(k, dict) and k.get("classified"))


def narrow_dtypes(report: dict[str, Any], graph: str | None) -> list[str]:
    """The 16- and 8-bit float dtypes among the values the kernels of ``graph`` (every graph
    when None) wrote."""
    found = set()
    for g in graphs_of(report):
        if graph is not None and g.get("graph") != graph:
            continue
        for k in g.get("kernels") or []:
            for b in (k.get("buffers") or []) if isinstance(k, dict) else []:
                dtype = str(b.get("dtype") or "") if isinstance(b, dict) else ""
                if dtype.startswith(NARROW_FLOATS):
                    found.add(dtype)
    return sorted(found)


def random_ops_of(report: dict[str, Any], graph: str | None) -> list[str]:
    return sorted({str(op) for g in graphs_of(report)
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
    for cid, report in reports(trace).items():
        first = first_of(report)
        graph = str(first.get("graph")) if first else None
        if first is not None and not flag_set(trace, PRECISION_CASTS):
            narrow = narrow_dtypes(report, graph)
            if narrow:
                out.setdefault(PRECISION_CASTS, f"compile {cid}: {graph} computes in "
                                                f"{', '.join(narrow)}")
        random = random_ops_of(report, graph) if first is not None else []
        if (random or random_classified(report)) and not flag_set(trace, RANDOM):
            out.setdefault(RANDOM, f"compile {cid}: its graph draws random numbers "
                                   f"({', '.join(random or random_ops_of(report, None))})")
    return out


def control_needed(trace: Trace) -> str | None:
    """Why the control run (the script again, same settings) is needed: a compile of ``trace``
    has a first diverging kernel, which must diverge again before it is blamed; None when no
    kernel diverges."""
    for cid, report in reports(trace).items():
        key = call_key(first_of(report))
        if key is not None:
            return f"compile {cid}: {said(key)} diverges"
    return None


def why_not_run(trace: Trace, flag: str, report: dict[str, Any] | None = None) -> str:
    """Why ``flag``'s re-run cannot change the verdict of the compile whose numerics report is
    ``report`` (it was not run for it): said from what the report holds — a bfloat16 model
    whose kernels all agree was told "every value its kernels wrote is float32 or wider"."""
    if flag_set(trace, flag):
        return f"the trace already had {flag}=True"
    first = first_of(report) if report is not None else None
    graph = str(first.get("graph")) if first else None
    # kernel calls that differed but were set aside as random numbers (not judged): "no
    # kernel diverges" would hide them
    aside = random_classified(report) if report is not None else 0
    set_aside = (f"its differing kernels were set aside as random numbers ({aside} kernel "
                 f"call{'s' if aside != 1 else ''})")
    if flag == PRECISION_CASTS:
        narrow = narrow_dtypes(report, graph) if report is not None else []
        if not narrow:
            return ("every value its kernels wrote is float32 or wider: there is no cast to a "
                    "narrower float to elide")
        return ((f"{set_aside} and no other kernel diverges" if aside else "no kernel diverges")
                + f", so there is no difference to classify (its kernels write "
                  f"{', '.join(narrow)})")
    random = random_ops_of(report, graph) if report is not None else []
    if random and first is None:
        return (f"no judged kernel diverges: {set_aside} (its graph draws "
                f"{', '.join(random)})" if aside else
                f"no kernel diverges and none was set aside as random numbers (its graph "
                f"draws {', '.join(random)})")
    return "its graph draws no random numbers"


def outcome(flag: str, ran: Trace | None, cid: str, unavailable: str | None,
             key: tuple[str, str, int] | None) -> Rerun:
    """What ``flag``'s re-run (``CONTROL``: the same settings) found of compile ``cid``, whose
    first diverging kernel call was ``key`` (None: none diverged)."""
    if unavailable is not None:
        return Rerun(flag, "not available", unavailable)
    if ran is None:
        return Rerun(flag, "not reached", "the re-run wrote no trace")
    report = reports(ran).get(cid)
    where = str(ran.root)
    if report is None or not judged_count(report):
        return Rerun(flag, "not reached", f"the re-run judged no kernel of compile {cid} (it "
                     "stopped before, or took another path)", where)
    control = flag.startswith(CONTROL)
    again = kernel_call(report, key) if key is not None else None
    # the control run must judge the very kernel call; a flag may change the kernels (with
    # fallback_random a dropout is eager's op, not a kernel): there, the same graph judged
    # whole
    if key is not None and again is None and (control or not graph_judged(report, key[0])):
        return Rerun(flag, "not reached", f"the re-run judged {judged_count(report)} kernel calls of "
                     f"compile {cid}, not {said(key)} (it stopped before, or took another "
                     "path)", where)
    first = first_of(report)
    on = ("with the same settings" if flag == CONTROL else f"with {RANDOM}=True again"
          if control else f"with {flag}=True")
    if first is None:
        return Rerun(flag, "disappears", f"{on} no kernel diverges ({judged_count(report)} kernel "
                     "calls judged" + (f"; {key[1]}: {errs(again)}" if again else "") + ")",
                     where)
    got = call_key(first)
    if control and got != key:
        return Rerun(flag, "moves", f"{on} {said(got)} diverges first, not {said(key)}"
                     if got else f"{on} another kernel diverges first", where)
    return Rerun(flag, "stays", f"{on} {said(got) if got else first.get('kernel')} still "
                 f"diverges ({errs(first)})", where)
