"""One row of ``graphs/<id>/code/kernels.json`` as a typed record: a generated kernel (C++ or
Triton, its code in ``code/``) or an extern call the wrapper makes.

The writer makes them (``layout.write_output_code``, from Inductor's output code) and the reader
hands them out (``GraphRecord.kernels``), read through the safe reader and checked against the
file's shape (``shapes.py``) first; a key this version does not name is kept in ``extra``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tuidebug.trace.format.fields import opt_int, opt_str, strs

EXTERN = "extern"  # the kind of an extern call (the wrapper calls a library op, no code of ours)


@dataclass
class KernelEntry:
    """``name``: the kernel (``cpp_fused_relu_0``) or, for an extern call, its first provenance
    handle (``extern_kernels.addmm:3``). ``kind``: ``cpp``, ``triton``, ``extern`` …; ``file``:
    its code, relative to the graph directory (None for an extern call); ``wrapper_line``: where
    the wrapper defines or calls it; ``handles``: Inductor's provenance handles;
    ``source_nodes``: the FX nodes its code comment names; ``original_aten``: the ATen ops it
    came from; ``calls``: how often the wrapper calls it; ``lines``: its code's line count;
    ``call``: an extern call's target (``extern_kernels.addmm``)."""

    name: str
    kind: str | None = None
    file: str | None = None
    wrapper_line: int | None = None
    handles: list[str] = field(default_factory=list)
    source_nodes: list[str] = field(default_factory=list)
    original_aten: list[Any] | None = None
    calls: int | None = None
    lines: int | None = None
    call: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # every key not named above

    _NAMED = ("name", "kind", "file", "wrapper_line", "handles", "source_nodes", "original_aten",
              "calls", "lines", "call")

    @property
    def extern(self) -> bool:
        return self.kind == EXTERN

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "KernelEntry":
        """The row in ``d`` (an object of ``kernels.json``, shape-checked: a field of the wrong
        type reads as absent)."""
        aten = d.get("original_aten")
        return cls(
            name=str(d.get("name")), kind=opt_str(d.get("kind")), file=opt_str(d.get("file")),
            wrapper_line=opt_int(d.get("wrapper_line")), handles=strs(d.get("handles")),
            source_nodes=strs(d.get("source_nodes")),
            original_aten=list(aten) if isinstance(aten, list) else None,
            calls=opt_int(d.get("calls")), lines=opt_int(d.get("lines")),
            call=opt_str(d.get("call")),
            extra={k: v for k, v in d.items() if k not in cls._NAMED})

    def to_json(self) -> dict[str, Any]:
        """The row as ``kernels.json`` holds it: a generated kernel with ``calls`` and
        ``lines``, an extern call with ``call``."""
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "file": self.file}
        if self.extern:
            out["call"] = self.call
        out.update(wrapper_line=self.wrapper_line, handles=self.handles,
                   source_nodes=self.source_nodes, original_aten=self.original_aten)
        if not self.extern:
            out.update(calls=self.calls, lines=self.lines)
        return {**out, **self.extra}
