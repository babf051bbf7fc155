"""Autotuning (max-autotune): every op's choices with their times, the winner, and why a choice
failed (``autotune.jsonl``)."""

from __future__ import annotations

from typing import Any, Callable

from tuidebug.compiler import compat
from tuidebug.compiler.capture import outcome
from tuidebug.compiler.capture.state import Concern


class Autotune(Concern):
    def __init__(self, session: Any) -> None:
        super().__init__(session)
        self._choice_errors: dict[int, tuple[Any, str]] = {}  # id(choice) -> (choice, why)
        self._remove_feedback: Callable[[], None] | None = None

    def install(self, p: compat.Patcher) -> None:
        p.wrap(compat.BENCHMARK_CHOICE, self._wrap_choice_step)
        if compat.triton_available():
            p.wrap(compat.TEMPLATE_PRECOMPILE, self._wrap_choice_step)
        try:
            self._remove_feedback = compat.add_autotune_feedback(self._on_autotune)
        except compat.NotAvailable as e:
            assert self.session.writer is not None
            self.session.writer.not_available(f"autotune choices: {e}")

    def uninstall(self) -> None:
        if self._remove_feedback:
            self._remove_feedback()

    def _on_autotune(self, *args: Any, **kwargs: Any) -> None:
        """Inductor's feedback after benchmarking the choices of one op."""
        gs = self.session.current()
        if gs is None:
            return

        def rec() -> None:
            op, inputs, choices = compat.autotune_feedback(args, kwargs)
            entries = []
            for choice, info, time_ms in choices:
                failed = self._choice_errors.pop(id(choice), None)
                if time_ms is None:
                    info["error"] = failed[1] if failed else "failed or skipped (no timing)"
                info["time_ms"] = time_ms
                entries.append(info)
            timed = [e for e in entries if e["time_ms"] is not None]
            winner = min(timed, key=lambda e: e["time_ms"])["name"] if timed else None
            gs.out.append_autotune({"op": op, "inputs": inputs, "choices": entries,
                                    "winner": winner})
        self.session.guarded("autotune choices", rec)

    def _wrap_choice_step(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        """Wrap a step that raises when one choice fails (benchmarking it; compiling a Triton
        template ahead of benchmarking): keep why, for the feedback that reports its time."""
        def step(*args: Any, **kwargs: Any) -> Any:
            try:
                return orig(*args, **kwargs)
            except Exception as e:
                self._choice_failed(compat.autotune_step_choice(args, kwargs), e)
                raise
        return step

    def _choice_failed(self, choice: Any, e: BaseException) -> None:
        msg = str(e).strip() or type(e).__name__
        with self.session.lock:  # templates precompile in a thread pool
            self._choice_errors[id(choice)] = (choice, outcome.clip_message(
                f"{type(e).__name__}: {msg}", 1000, 1000))
