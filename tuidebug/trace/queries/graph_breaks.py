"""Every graph break of a trace explained: Dynamo's graph-break type, its explanation and hints
(where the torch version records them), the line that broke and its text, the frame being
compiled, what ran eagerly because of it and where compiling resumed; and the breaks grouped by
cause ("5 graph breaks from 4 causes").

Read from the graph-break reasons a trace keeps per compile (``compiles/<id>.json``:
``dynamo_graph_break_reason``, Dynamo's own text). Plain text matching: nothing from the trace
is evaluated, no file it names is opened."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.attempts import first_attempt
from tuidebug.trace.queries.resumes import base_fn, entered_at_break, resumed_in
from tuidebug.trace.queries.torchs_own import skipped_torch, torchs_own_advice

MAX_BREAKS = 500  # per trace: a longer list is cut (its count is kept)
MAX_TEXT = 600  # characters kept of an explanation or a hint
MAX_STACK = 8  # user frames kept per break, innermost last

_AT = re.compile(r"Graph break (?:in user code )?at (?P<file>.+?):(?P<line>\d+)\s*$", re.M)
# a frame and its code line, if it has one: the indent is taken whole before the look for the
# next frame (a frame without code, ``<frozen runpy>``, took the frame after it as its code)
_FRAME = re.compile(r'^\s*File "(?P<file>[^"\n]+)", line (?P<line>\d+), in (?P<fn>[^\n]+)\n'
                    r'(?:(?P<code>[ \t]+(?=[^ \t\n])(?!File ")[^\n]*\S[^\n]*)(?:\n|$))?', re.M)
_GB_ID = re.compile(r"/gb/(?P<id>gb\d+)\.html")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+\b")  # in an object's repr: <function f at 0x7f…>
# DistributedDataParallel's forward; FSDP's hooks (FSDP2 wraps each in torch._dynamo.disable,
# _fsdp_common.py: a module's call breaks there, whatever the user's code)
_DATA_PARALLEL = ("/torch/nn/parallel/", "/torch/distributed/fsdp/")


def in_data_parallel(file: str) -> bool:
    """``file`` is DDP's or FSDP's own code: a graph break there is torch's (DDP's forward logs
    through its C++ logger; FSDP2's hooks are disabled for Dynamo), no change of the user's."""
    file = file.replace("\\", "/")
    return any(d in file for d in _DATA_PARALLEL)


# Dynamo's preamble before the graph-break type: the instruction it was tracing, that the
# break cannot be resumed from (then the rest of the function runs eagerly), or that it gave up
# on the frame (torch 2.13: the whole function runs eagerly)
_CONTEXT = re.compile(r"^(?:Encountered graph break (?:when attempting to trace .*|that we "
                      r"cannot resume from\..*)|Failed to handle graph break gracefully\..*)$")
_NO_RESUME = "Encountered graph break that we cannot resume from"
_SKIPPED = "Failed to handle graph break gracefully. Skipping the function"
# a break Dynamo met while handling the first (the loop around it): the first is the cause
_ANOTHER = re.compile(r"\n\s*\*\*\* While handling this graph break, another graph break "
                      r"occurred")
# frames that are not the user's: the Python runtime, torch, tuidebug's own script runner
_NOT_USER = ("<frozen ", "/torch/", "/tuidebug/compiler/", "/runpy.py")
_LIBRARY = ("/site-packages/", "/dist-packages/")


@dataclass(frozen=True)
class SourceLine:
    """A place in the code: ``file:line`` in function ``fn``, with the line's ``code``."""

    file: str
    line: int
    fn: str
    code: str

    @property
    def where(self) -> str:
        """``model.py:42``: the file's name (not its folders) and the line."""
        return _short(self)


@dataclass(frozen=True)
class GraphBreak:
    """One graph break: the compile whose frame broke (``compile_id``, its function
    ``frame``), why (``cause``: Dynamo's graph-break type; ``explanation``, ``hints``;
    ``reason``: the raw reason's first line when the torch version gives no type), where
    (``site``: the line Dynamo stopped at; ``user_line``: the innermost frame of the user's own
    code, outside installed libraries; ``frame_line``: the line of the compiled frame that ran
    eagerly), ``resumed_in`` (the compile of the code after the break) and ``eager`` (what ran
    without compiling, in words)."""

    compile_id: str
    frame: str | None
    cause: str
    explanation: str | None
    hints: list[str]
    gb_id: str | None
    site: SourceLine | None
    user_line: SourceLine | None
    frame_line: SourceLine | None
    stack: list[SourceLine]
    resumed_in: str | None
    eager: str
    advice: str | None = None
    # compiles of frames the call at the break entered, run eagerly (``resumes.entered_at_break``;
    # for a call of a function torch skips, those of any of its calls): kept for such a call only
    entered: tuple[str, ...] = ()

    @property
    def torchs_own(self) -> bool:
        """A break torch makes on purpose, no change of the user's: a
        ``torch._dynamo.graph_break()`` that torch's own code calls (around every optimizer
        step, ``torch/optim/optimizer.py``), or a call of a function whose file in torch Dynamo
        skips where the trace shows the frames it called compiled of their own (``Adam.step``
        as an LR scheduler wraps it, ``torch/optim/lr_scheduler.py``, calling the optimizer's):
        out of the compiled function, those would run eagerly. A skipped torch helper that
        entered no compiled frame keeps the advice to call it outside."""
        return torchs_own_advice(self.cause, self.explanation, self.site, self.entered) is not None

    @property
    def key(self) -> str:
        """The cause a break is grouped by: its type and the first sentence of its explanation
        (a data-dependent branch's explanation goes on with the branch's own code), without
        the addresses it names objects by (``<function log at 0x7f…>``: another in each
        process, so two runs or two ranks of one job would not match)."""
        first = re.split(r"(?<=[.:])\s+(?=[A-Z])", self.explanation or "", 1)[0]
        first = _ADDRESS.sub("", first)
        return self.cause + (f": {first}" if first else "")

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "key": self.key}


@dataclass(frozen=True)
class Cause:
    """Breaks of one cause: how many, and their lines."""

    cause: str
    explanation: str | None
    hints: list[str]
    advice: str | None
    count: int
    compiles: list[str]
    lines: list[str] = field(default_factory=list)  # file:line of each user line


@dataclass(frozen=True)
class BreakSummary:
    """All graph breaks of a trace, and grouped by cause."""

    breaks: list[GraphBreak]
    causes: list[Cause]
    count: int

    @property
    def headline(self) -> str:
        """``5 graph breaks from 4 causes`` (``no graph breaks``)."""
        if not self.count:
            return "no graph breaks"
        n, m = self.count, len(self.causes)
        return (f"{n} graph break{'s' if n != 1 else ''} from {m} "
                f"cause{'s' if m != 1 else ''}")

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "headline": self.headline,
                "causes": [asdict(c) for c in self.causes]}


def _frames(text: str) -> list[SourceLine]:
    out = []
    for m in _FRAME.finditer(text):
        out.append(SourceLine(file=m["file"], line=int(m["line"]), fn=m["fn"].strip(),
                              code=(m["code"] or "").strip()))
    return out


def _is_user(f: SourceLine) -> bool:
    path = f.file.replace("\\", "/")
    return not any(p in path for p in _NOT_USER) and not path.startswith("<")


def _sections(reason: str) -> tuple[str, str | None, list[str], str | None]:
    """(cause, explanation, hints, gb id) of the part between ``Graph Break Reason:`` and the
    user code traceback."""
    body = reason.split("Graph Break Reason:", 1)[1] if "Graph Break Reason:" in reason \
        else reason
    body = re.split(r"\n\s*(?:User code traceback:|Traceback \(most recent)", body, 1)[0]
    body = _ANOTHER.split(body, 1)[0]
    gb = _GB_ID.search(body)
    cause, explanation, hints = "", None, []
    current: list[str] | None = None
    for raw in body.splitlines():
        line = raw.strip()
        if not line or _CONTEXT.match(line):
            continue
        if line.startswith("Explanation:"):
            explanation = line[len("Explanation:"):].strip()
            current = None
        elif line.startswith("Hint:"):
            hints.append(line[len("Hint:"):].strip())
            current = None
        elif line.startswith(("Developer debug context:", "For more details",
                              "Stack variable source attribution")):
            current = []  # swallowed
        elif not cause:
            cause = line
        elif explanation is not None and not hints and current is None and raw.startswith("    "):
            explanation += " " + line  # a wrapped explanation (the branch condition's code)
    return (cause[:MAX_TEXT] or "graph break", (explanation or "")[:MAX_TEXT] or None,
            [h[:MAX_TEXT] for h in dict.fromkeys(hints)], gb["id"] if gb else None)


def dynamo_message(reason: str) -> str:
    """Dynamo's multi-line message (a graph break's, or a frame it gave up on) as one line: its
    cause and its explanation, each whole up to ``MAX_TEXT`` (hints and the debug context left
    out)."""
    cause, explanation, _, _ = _sections(reason)
    return f"{cause}: {explanation}" if explanation else cause


def _eager(site: SourceLine | None, frame_line: SourceLine | None, frame: str | None,
           resumed: str | None, resumable: bool = True, skipped: bool = False) -> str:
    def at(s: SourceLine) -> str:
        return f"line {s.line}" + (f" ({s.code})" if s.code else "")

    if frame_line is None and site is None:
        return "the code at the break ran eagerly (its line is not recorded)"
    here = frame_line or site
    assert here is not None
    text = f"{at(here)} ran eagerly, outside any graph"
    if site is not None and frame_line is not None and (site.file, site.line) != (
            frame_line.file, frame_line.line):
        text += f" (the whole call: the break is inside {site.fn}, at {_short(site)})"
    name = base_fn(frame) or "the function"
    if skipped:
        return (f"Dynamo skipped {name} at the break ({at(here)}): its code ran eagerly, all "
                "of it (the functions it calls may compile as frames of their own)")
    if not resumable:
        return (f"Dynamo could not resume after the break: it compiled {name} up to the last "
                f"point it could resume from and ran the rest of it eagerly (from {at(here)})")
    if resumed:
        text += f"; the rest of {name} resumed in compile {resumed}"
    else:
        text += f"; the rest of {name} after it was not compiled in this trace"
    return text


# What the user can change for a break of a known cause: (test on cause + explanation, advice)
_ADVICE = (
    (re.compile(r"capture_scalar_outputs=False"),
     "set torch._dynamo.config.capture_scalar_outputs = True (or the environment variable "
     "TORCHDYNAMO_CAPTURE_SCALAR_OUTPUTS=1): the scalar stays in the graph"),
    (re.compile(r"Data-dependent branching|data-dependent", re.I),
     "compute both sides and pick with torch.where(cond, a, b), or branch with "
     "torch.cond(pred, true_fn, false_fn): a Python if on a tensor's value cannot be traced"),
    (re.compile(r"builtin operator `print`"),
     "move the print out of the compiled function, or add print to "
     "torch._dynamo.config.reorderable_logging_functions"),
    (re.compile(r"builtin operator `sorted`.*Tensor"),
     "sort with torch.sort(t) (its values and indices stay tensors) instead of sorted(t)"),
    (re.compile(r"tolist\(\)"),
     "keep the values in a tensor (index it) instead of .tolist(); on an integer tensor, "
     "torch._dynamo.config.capture_scalar_outputs = True traces it"),
    (re.compile(r"logging|warning_once|Logger", re.I),
     "log outside the compiled function, or add the logging function to "
     "torch._dynamo.config.{knob}"),
    (re.compile(r"torch\._dynamo\.disable|skip function|marked as skipped", re.I),
     "the call goes to code that is not compiled (torch._dynamo.disable or a skipped "
     "library): call it outside the compiled function"),
)
# Dynamo's hints that name nothing the user can do
_NOT_ACTIONABLE = re.compile(r"report an issue|fundamental|Dynamo developer", re.I)


# a Logger method Dynamo cannot trace, and the method Dynamo names in its debug context
_LOGGER_METHOD = re.compile(r"logging\.Logger method")
_NAMED_METHOD = re.compile(r"Developer debug context:[^\n]*?\bmethod:\s*(?P<method>[A-Za-z_]\w*)")
# the public methods of logging.Logger (Python 3.9-3.13), and those transformers sets on it
# (``transformers.utils.logging``): an ignore_logging_functions entry is named only for these
LOGGER_METHODS = frozenset((
    "debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log",
    "setLevel", "getEffectiveLevel", "isEnabledFor", "getChild", "getChildren", "findCaller",
    "makeRecord", "handle", "addHandler", "removeHandler", "hasHandlers", "callHandlers",
    "addFilter", "removeFilter", "filter",
    "warning_once", "info_once", "warning_advice"))


def _logger_advice(cause: str, reason: str, site: SourceLine | None) -> str | None:
    """A Logger method's call (``logger.warning_once(`` in transformers' loss): the exact
    ``ignore_logging_functions`` entry that drops it (Dynamo matches the method's function,
    ``logging.Logger.warning_once``); a library's call is not the user's to move. The method is
    the one Dynamo names (``Developer debug context: method: warning_once``), never guessed
    from the line; one it does not name, or that is not logging.Logger's (a subclass's own):
    None, the generic advice."""
    m = _NAMED_METHOD.search(reason) if _LOGGER_METHOD.search(cause) else None
    if m is None or m["method"] not in LOGGER_METHODS:
        return None
    add = (f"torch._dynamo.config.ignore_logging_functions.add(logging.Logger.{m['method']}) "
           "before the first call (Dynamo then drops the log call)")
    if site is not None and any(p in site.file.replace("\\", "/") for p in _LIBRARY):
        return f"{add}: the log call is the library's ({_short(site)}), not yours to move"
    return f"log outside the compiled function, or {add}"


def _advice(cause: str, explanation: str | None, hints: list[str]) -> str | None:
    text = f"{cause} {explanation or ''}"
    # the logging knob Dynamo's hint names (ignore_logging_functions for a Logger method)
    knob = next((k for k in ("ignore_logging_functions", "reorderable_logging_functions")
                 if any(k in h for h in hints)), "reorderable_logging_functions")
    for pattern, advice in _ADVICE:
        if pattern.search(text):
            return advice.replace("{knob}", knob)
    useful = [h for h in hints if not _NOT_ACTIONABLE.search(h)]
    return useful[0] if useful else None


def _short(s: SourceLine) -> str:
    return f"{s.file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{s.line}"


def parse(cid: str, reason: str, place: dict[str, Any],
          places: dict[str, dict[str, Any]]) -> GraphBreak:
    """One break of compile ``cid`` from Dynamo's reason text; ``place``: the compile's
    ``{function, file, line}`` (``summary.compile_place``); ``places``: every compile's."""
    cause, explanation, hints, gb_id = _sections(reason)
    tb = reason.split("User code traceback:", 1)[1] if "User code traceback:" in reason else ""
    tb = re.split(r"\n\s*Traceback \(most recent call last\)", tb, 1)[0]
    frames = _frames(tb)
    at = _AT.search(reason)
    site = frames[-1] if frames else None
    if at and (site is None or (site.file, site.line) != (at["file"], int(at["line"]))):
        site = SourceLine(file=at["file"], line=int(at["line"]), fn=site.fn if site else "",
                          code="")
    user = [f for f in frames if _is_user(f)]
    own = [f for f in user if not any(p in f.file.replace("\\", "/") for p in _LIBRARY)]
    user_line = own[-1] if own else (user[-1] if user else site)
    frame = place.get("function")
    base = base_fn(frame)
    in_frame = [f for f in frames if f.fn == base or f.fn == frame]
    frame_line = in_frame[-1] if in_frame else None
    resumed = resumed_in(places, cid, frame_line.file, frame_line.line, base) if frame_line \
        else None
    entered = entered_at_break(places, cid, resumed) if skipped_torch(cause, explanation) \
        else ()
    return GraphBreak(compile_id=cid, frame=frame, cause=cause, explanation=explanation,
                      hints=hints, gb_id=gb_id, site=site, user_line=user_line,
                      frame_line=frame_line, stack=user[-MAX_STACK:], resumed_in=resumed,
                      eager=_eager(site, frame_line, frame, resumed, _NO_RESUME not in reason,
                                   _SKIPPED in reason),
                      entered=entered, advice=torchs_own_advice(cause, explanation, site, entered)
                      or _logger_advice(cause, reason, site) or _advice(cause, explanation, hints))


def compile_breaks(cid: str, reasons: list[str], places: dict[str, dict[str, Any]]
                   ) -> list[GraphBreak]:
    """The breaks of one compile (a reason logged twice for one line is one break)."""
    out: list[GraphBreak] = []
    seen = set()
    for r in reasons:
        b = parse(cid, str(r), places.get(cid) or {}, places)
        where = (b.site.file, b.site.line) if b.site else None
        if (where, b.key) in seen:
            continue
        seen.add((where, b.key))
        out.append(b)
    return out


def summarize(breaks: list[GraphBreak]) -> BreakSummary:
    """The breaks grouped by cause, the most frequent first."""
    groups: dict[str, list[GraphBreak]] = {}
    for b in breaks:
        groups.setdefault(b.key, []).append(b)
    causes = [Cause(cause=bs[0].cause, explanation=bs[0].explanation, hints=bs[0].hints,
                    advice=bs[0].advice, count=len(bs),
                    compiles=list(dict.fromkeys(b.compile_id for b in bs)),
                    lines=list(dict.fromkeys(_short(b.user_line) for b in bs if b.user_line)))
              for bs in groups.values()]
    causes.sort(key=lambda c: -c.count)
    return BreakSummary(breaks=breaks[:MAX_BREAKS], causes=causes, count=len(breaks))


def break_reasons(detail: dict[str, Any]) -> list[str]:
    """A compile's graph-break reasons as strings, as the trace keeps them."""
    return [str(r) for r in detail.get("dynamo_graph_break_reason") or []
            if isinstance(r, (str, int, float))]


def compile_places(compiles: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every compile's ``{function, file, line, restarted}`` (``summary.compile_place``)."""
    from tuidebug.trace.queries.summary import compile_place  # summary imports this module

    return {cid: compile_place(compiles, cid) for cid in compiles}


def trace_breaks(trace: Trace) -> dict[str, list[GraphBreak]]:
    """Each compile's graph breaks, by compile id (compiles without one left out). A break a
    restarted analysis of the same compile logs again (``0/0`` breaks and restarts, ``0/0_1``
    meets the same line and logs it once more) is one break, kept under the first attempt:
    ``torch._dynamo.explain`` counts it once."""
    compiles = trace.compiles
    places = compile_places(compiles)
    out: dict[str, list[GraphBreak]] = {}
    seen: set[tuple[str, Any, str]] = set()
    for cid, c in compiles.items():
        attempt = first_attempt(cid)  # 0/0_1 is an attempt of 0/0
        bs = []
        for b in compile_breaks(cid, break_reasons(c), places):
            ident = (attempt, (b.site.file, b.site.line) if b.site else None, b.key)
            if ident not in seen:
                seen.add(ident)
                bs.append(b)
        if bs:
            out[cid] = bs
    return _share_entered(out)


def _share_entered(breaks: dict[str, list[GraphBreak]]) -> dict[str, list[GraphBreak]]:
    """Every call of a skipped torch function shows the compiled frames one of its calls
    entered: a call met again (a recompile's) finds them compiled already, and enters none."""
    shown: dict[tuple[str, str], tuple[str, ...]] = {}
    for bs in breaks.values():
        for b in bs:
            if b.entered and (fn := skipped_torch(b.cause, b.explanation)):
                shown.setdefault(fn, b.entered)

    def share(b: GraphBreak) -> GraphBreak:
        entered = shown.get(skipped_torch(b.cause, b.explanation) or ("", ""), ())
        return b if b.entered or not entered else replace(
            b, entered=entered, advice=torchs_own_advice(b.cause, b.explanation, b.site, entered))
    return {cid: [share(b) for b in bs] for cid, bs in breaks.items()} if shown else breaks
