"""Frames Dynamo was handed and did not compile (skip files, tracing disabled, no operations
traced, …): the hook point where Dynamo says why, and what a call of it was about."""

from __future__ import annotations

from typing import Any, Mapping

# CatchErrorsWrapper._handle_skip(self, result, frame): every frame Dynamo's callback skips
# passes here with its ConvertFrameReturn (``skip_reason``) — torch 2.13; an older torch that
# decides skips elsewhere reports the hook point "not available"
FRAME_SKIP = "torch._dynamo.convert_frame.CatchErrorsWrapper._handle_skip"


def frame_skip(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any] | None:
    """FRAME_SKIP(self, result, frame): ``{function, file, line, reason}`` of the frame skipped;
    None when the call did not skip it (a compiled frame passes too)."""
    result = args[1] if len(args) > 1 else kwargs.get("result")
    frame = args[2] if len(args) > 2 else kwargs.get("frame")
    reason = getattr(result, "skip_reason", None)
    if reason is None or getattr(result, "guarded_code", None) is not None or frame is None:
        return None
    code = getattr(frame, "f_code", None)
    return {"function": str(getattr(code, "co_name", "?")),
            "file": str(getattr(code, "co_filename", "?")),
            "line": getattr(code, "co_firstlineno", None), "reason": str(reason)}
