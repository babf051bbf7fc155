"""What the code screen shows in its code view: the wrapper, a kernel's file, an extern call
(the wrapper at the call's line) or the user's source lines the trace captured, with a title
(``CodeDoc``). Read in the screen's worker: no Textual here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuidebug.trace.format.reader import GraphRecord, Trace
from tuidebug.trace.queries import kernel_sizes, provenance, source_lines
from tuidebug.tui.widgets.highlight import Highlighted

WRAPPER = "__wrapper__"  # the wrapper's item in the kernel list


@dataclass
class CodeDoc:
    code: str | None
    path: str  # decides the highlighter
    cursor: int
    title: str
    highlighted: Highlighted | None = None  # highlighted: shown at once, painted once


def read_code(g: GraphRecord, item: str, kernels: dict[str, provenance.KernelInfo]) -> CodeDoc:
    """The wrapper, a kernel's file, or (an extern call) the wrapper at the call."""
    if item == WRAPPER:
        code = g.wrapper_code()
        if code is None:
            return CodeDoc(None, "", 0, "wrapper: not recorded (compilation stopped before "
                                        "code generation)")
        return CodeDoc(code, "wrapper.py", 0, f"wrapper.py  {code.count(chr(10))} lines")
    k = kernels.get(item)
    if k is None:
        return CodeDoc(None, "", 0, f"{item}: unknown kernel")
    if k.file:
        code = g.code(k.file)
        if code is None:
            return CodeDoc(None, "", 0, f"{k.name}: {k.file} is missing from the trace")
        sizes = kernel_sizes.sizes_text(kernel_sizes.symbolic_sizes(
            code, k.kind, g.wrapper_code(), k.name))
        return CodeDoc(code, k.file, 0,
                       f"{k.file}  ({k.kind}, {code.count(chr(10))} lines)  sizes: {sizes}")
    return extern_call(k, g.wrapper_code())


def extern_call(k: provenance.KernelInfo, wrapper: str | None,
                highlighted: Highlighted | None = None) -> CodeDoc:
    """An extern call: the wrapper (``highlighted``, where its lines are made already) at the
    call's line."""
    if wrapper is None:
        return CodeDoc(None, "", 0, f"{k.name}: extern call; the wrapper was not recorded")
    line = max(0, (k.wrapper_line or 1) - 1)
    return CodeDoc(wrapper, "wrapper.py", line, f"{k.name}: extern call, wrapper.py line {line + 1}",
                   highlighted)


def read_source(trace: Trace, path: str, line: int,
                prefer: list[dict[str, Any]] | None = None) -> CodeDoc:
    """The lines of ``path`` the trace captured (never the file at that path on this machine:
    a trace names files of the machine it was made on, or any file it likes); ``prefer``: the
    selected kernel's frames, whose code is shown at their lines."""
    captured = source_lines.captured_source(trace, path, prefer or [])
    text, where = captured.text()
    if not text:
        return CodeDoc(f"the trace captured no line of {path}\n", "", 0,
                       f"source: {path}:{line}")
    return CodeDoc(text, path, where.get(line, 0),
                   f"source: {path}:{line}  ({len(captured.lines)} lines captured by the trace)")
