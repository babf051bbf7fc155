"""Why a trace failed, answered once: the error report (status, phase, how far compilation got,
what to do next), the generated kernel line a compiler error points into (``error_site``) and
the last stage a crashed capture recorded (``crash_site``). Pure data: no torch, no Textual.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tuidebug.trace.format import schema
from tuidebug.trace.format.error_record import ErrorRecord
from tuidebug.trace.format.reader import Trace


def died_text(phase: str | None) -> str:
    """How a crashed trace ended: ``the capturing process died during phase 'lowering'``."""
    return "the capturing process died " + (
        f"during phase {phase!r}" if phase else "before compiling started")


ACCURACY = "accuracy"  # the phase of an accuracy failure (not a compile phase: schema.PHASES)


@dataclass
class ErrorReport:
    status: str
    phase: str | None
    graph: str | None
    type: str | None
    message: str
    traceback: str
    phases_done: list[str]
    hints: list[str]
    site: "ErrorSite | None" = None
    # the compiler's first error line (a C++ or Triton compiler's ``error:`` line), if any
    first_error: str | None = None
    # the phases "how far compilation got" shows: schema.PHASES, and "accuracy" after them when
    # the compiled code ran and its outputs differed from eager
    phases: list[str] = field(default_factory=lambda: list(schema.PHASES))


COMPILED = "kernel_compile"  # the last phase a compile that succeeds records


def _made_graphs(trace: Trace) -> bool:
    """Whether the trace holds a graph (the manifest's list, else its folders)."""
    listed = trace.manifest.graphs
    return bool(listed) if listed is not None else bool(trace.graphs)


def error_report(trace: Trace) -> ErrorReport:
    status = trace.status
    top = trace.error or ErrorRecord()
    graph_id = top.graph
    err = top
    if graph_id:
        try:
            gerr = trace.graph(graph_id).error
        except KeyError:
            gerr = None
        if gerr is not None:  # the graph's own record has the whole message and traceback
            err = ErrorRecord(phase=top.phase or gerr.phase, type=top.type or gerr.type,
                              message=gerr.message or top.message,
                              traceback=gerr.traceback or top.traceback, graph=graph_id,
                              compile_id=top.compile_id or gerr.compile_id)
    phase = err.phase or trace.phase
    phases = list(schema.PHASES)
    if status == schema.STATUS_OK and not err.phase and phase in phases \
            and phases.index(phase) < phases.index(COMPILED) and _made_graphs(trace):
        # the manifest's phase is the last compile's: a resume function with nothing to
        # compile (transformers' GPT-2 step, a break after opt.step()) left it at dynamo; every
        # graph of an ok trace went through to its kernels
        phase = COMPILED
    if phase == ACCURACY:
        # every compile phase ran, and so did the compiled code: its outputs differ from eager
        done = list(phases)
        phases.append(ACCURACY)
    else:
        done = phases[:phases.index(phase)] if phase in phases else []
    path = str(trace.root)
    hints: list[str] = []
    message = err.message or ""
    site = None
    if status == schema.STATUS_FAILED:
        site = error_site(trace, message + "\n" + err.traceback_text)
        hints.append(f"tuidebug minify {path}   shrink this failure into a small repro.py")
        if phase == "kernel_compile" and site is None:
            hints.append("the generated kernel did not compile: open the code screen (4) to "
                         "read the kernel source")
        hints.append(f"tuidebug info {path}   the summary as text")
    elif status == schema.STATUS_CRASHED:
        hints.append(f"{died_text(phase)}{crash_site(trace)}; "
                     "the trace holds everything written before")
        command = " ".join(trace.manifest.command or [])
        hints.append((f"{command}   " if command else "")
                     + "run it again: a crash may not recur, or may end as an error the trace "
                       "records")
        hints.append("minify needs a failed trace (a compile, runtime or accuracy error): a "
                     "crash recorded no error to reproduce")
    elif status == schema.STATUS_RUNNING:
        hints.append("the capture is still running; reopen the trace when it has finished")
    if status == schema.STATUS_CRASHED and not message:
        message = f"{died_text(phase)} (no exception was recorded)"
    first = key_error_lines(message, limit=1)
    return ErrorReport(status=status, phase=phase, graph=graph_id, type=err.type,
                       message=message, traceback=err.traceback_text,
                       phases_done=done, hints=hints, site=site, phases=phases,
                       first_error=first[0] if first else None)


def crash_site(trace: Trace) -> str:
    """``, graph 0_0-inference, after [13] remove_noop_ops``: the last stage a crashed
    capture recorded (what was running when it died comes after it)."""
    for g in reversed(trace.graphs):
        if g.status in (schema.STATUS_OK, schema.STATUS_FAILED):
            continue
        stages = g.stages
        last = f", after [{stages[-1].index}] {stages[-1].name}" if stages else ""
        return f", graph {g.id}{last}"
    return ""


_SNIPPET_RE = re.compile(r"^\s*(\d+)\s*\|\s?(.*\S.*)$")


@dataclass
class ErrorSite:
    graph: str
    kernel: str
    line: int  # 1-based, in the kernel's file
    code: str


def error_site(trace: Trace, message: str) -> ErrorSite | None:
    """The generated kernel a compiler error points into: the source line the compiler quotes
    (``  105 |   auto tmp17 = …;``) looked up in the kernels the trace kept."""
    snippets: list[str] = []
    lines = message.splitlines()
    for i, line in enumerate(lines):
        low = line.lower()
        if "error" in low and "warning" not in low:
            for nxt in lines[i + 1:i + 3]:
                m = _SNIPPET_RE.match(nxt)
                if m and len(m.group(2).strip()) > 3:
                    snippets.append(m.group(2).strip())
                    break
    if not snippets:
        return None
    for g in trace.graphs:
        for k in g.kernels:
            if not k.file:
                continue
            code = g.code(k.file) or ""
            for snippet in snippets:
                at = code.find(snippet)
                if at != -1:
                    return ErrorSite(g.id, k.name, code.count("\n", 0, at) + 1, snippet)
    return None


def key_error_lines(message: str, limit: int = 6) -> list[str]:
    """The lines of a long compiler message that say what went wrong (``error:`` lines)."""
    out = []
    for line in message.splitlines():
        low = line.lower()
        if ("error:" in low or low.startswith("error")) and "warning" not in low:
            out.append(line.strip())
        if len(out) >= limit:
            break
    return out
