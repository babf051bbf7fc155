"""A compile failure as one typed record: ``graphs/<id>/error.json``, and the manifest's
``error`` (the failure the trace ended with).

Capture (``compiler/capture/outcome.py``) and the importers write the same keys; every reader
gets an :class:`ErrorRecord` (``GraphRecord.error``, ``Trace.error``, ``Manifest.error``), read
through the safe reader and checked against its shape (``shapes.py``) first. A key this
version does not name (``wrapper_type``, ``log_line``, ``user_frame`` of an imported log) is
kept in ``extra``; :meth:`ErrorRecord.to_json` gives back the keys the file had, in its order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tuidebug.trace.format.fields import opt_str

_NAMED = ("phase", "type", "message", "traceback", "graph", "compile_id")


@dataclass(frozen=True)
class ErrorRecord:
    """``phase``: the compile phase that failed (``schema.PHASES``, or ``accuracy`` /
    ``runtime``); ``type`` and ``message``: the exception; ``traceback``: its text (an
    imported log may give a list of lines); ``graph``: the graph it failed in (a folder under
    ``graphs/``); ``compile_id``: its Dynamo compile."""

    phase: str | None = None
    type: str | None = None
    message: str | None = None
    traceback: str | list[Any] | None = None
    graph: str | None = None
    compile_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # every key not named above
    keys: tuple[str, ...] = field(default=_NAMED, compare=False, repr=False)  # as read

    @classmethod
    def from_json(cls, value: Any) -> "ErrorRecord | None":
        """The error in ``value`` (parsed JSON, shape-checked: a field of the wrong type reads
        as absent); None when there is none (not an object, or an empty one)."""
        if not isinstance(value, dict) or not value:
            return None
        tb = value.get("traceback")
        return cls(
            phase=opt_str(value.get("phase")), type=opt_str(value.get("type")),
            message=opt_str(value.get("message")),
            traceback=tb if isinstance(tb, (str, list)) else None,
            graph=opt_str(value.get("graph")), compile_id=opt_str(value.get("compile_id")),
            extra={k: v for k, v in value.items() if k not in _NAMED},
            keys=tuple(str(k) for k in value))

    def to_json(self) -> dict[str, Any]:
        """The error as ``error.json`` holds it: the keys it was read with, in their order, then
        any other field set (a record made here: every named key, then ``extra``)."""
        named = {k: getattr(self, k) for k in _NAMED}
        order = list(self.keys) + [k for k in _NAMED if k not in self.keys and named[k] is not None]
        order += [k for k in self.extra if k not in order]
        return {k: named[k] if k in named else self.extra[k] for k in order
                if k in named or k in self.extra}

    @property
    def traceback_text(self) -> str:
        """The traceback as one text ('' when none was recorded)."""
        return str(self.traceback or "")

    def text(self) -> str:
        """The message and the traceback, as a reader searches them for a kernel or a line."""
        return f"{self.message or ''}\n{self.traceback_text}"

    def brief(self) -> dict[str, Any]:
        """``{phase, type, message, graph}``: what a summary or a comparison says of it."""
        return {"phase": self.phase, "type": self.type, "message": self.message,
                "graph": self.graph}
