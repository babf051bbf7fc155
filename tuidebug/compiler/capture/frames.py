"""Frames Dynamo was handed and did not compile, with its reason (the manifest's
``skipped_frames``); and, when no graph reached Inductor, the warning that says what happened
instead (``trace.queries.frames.nothing_compiled``)."""

from __future__ import annotations

from typing import Any, Callable

from tuidebug.compiler import compat
from tuidebug.compiler.capture.state import Concern

MAX_FRAMES = 200  # distinct (function, file, line, reason) kept; the rest counted in the last


class Frames(Concern):
    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self.skipped: dict[tuple[str, str, Any, str], int] = {}

    def install(self, p: compat.Patcher) -> None:
        p.wrap(compat.FRAME_SKIP, self._wrap_skip)

    def _wrap_skip(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        s = self.session

        def handle_skip(*args: Any, **kwargs: Any) -> Any:
            def rec() -> None:
                f = compat.frame_skip(args, kwargs)
                if f is None:
                    return
                key = (f["function"], f["file"], f["line"], f["reason"][:2000])
                with s.lock:
                    if key in self.skipped or len(self.skipped) < MAX_FRAMES:
                        self.skipped[key] = self.skipped.get(key, 0) + 1
            s.guarded("a skipped frame", rec)
            return orig(*args, **kwargs)
        return handle_skip

    def records(self) -> list[dict[str, Any]]:
        return [{"function": fn, "file": file, "line": line, "reason": reason, "count": n}
                for (fn, file, line, reason), n in self.skipped.items()]

    def stopping(self) -> None:
        if self.skipped:
            assert self.session.writer is not None
            self.session.writer.update(skipped_frames=self.records())
