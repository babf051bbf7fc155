"""What the user's call of a ``torch.compile`` result returned: the eager check's outputs named
by it (``logits``, ``past_key_values.layers[0].keys``; ``compiler/output_paths.py``).

``torch.compile`` is wrapped while the capture runs (only with the eager check on): the result
(an ``OptimizedModule`` gets a forward hook; a compiled function is returned wrapped) hands
what each call returned to ``returned``. The outcome concern ``expect``s the outputs of each
checked graph's first call; a user call that returns any of them resolves them by identity
(an output the user never receives keeps the graph's own name). Installed before the whole
call's concern (``--profile``), whose timed calls come after the user's call has returned.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from tuidebug.compiler import compat
from tuidebug.compiler.capture.state import Concern
from tuidebug.compiler.output_paths import output_names

KEPT_FOR = 4  # user calls that may return before the one that holds a checked graph's outputs


def wrap_compile(orig: Callable[..., Any],
                 watch: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    """``torch.compile`` (``orig``) wrapped so that each result is handed to ``watch(model,
    result)``, which returns what the caller gets instead (None: the result itself); the
    decorator form (``@torch.compile(mode=…)``) too."""
    def compile(*args: Any, **kwargs: Any) -> Any:
        if not args and "model" not in kwargs:  # @torch.compile(mode=…): a decorator
            return lambda model: compile(model, **kwargs)
        result = orig(*args, **kwargs)
        watched = watch(args[0] if args else kwargs["model"], result)
        return result if watched is None else watched
    return functools.wraps(orig)(compile)


class Returned(Concern):
    def __init__(self, session: Any) -> None:
        super().__init__(session)
        # (a checked graph's outputs, what names them, user calls returned since)
        self._pending: list[tuple[list[Any], Callable[[dict[int, str]], None], int]] = []

    def install(self, p: compat.Patcher) -> None:
        if self.session.check_accuracy:
            p.wrap(compat.TORCH_COMPILE, self._wrap_compile)

    def expect(self, outputs: list[Any], apply: Callable[[dict[int, str]], None]) -> None:
        """``apply`` will be given ``{output index: path}`` for ``outputs`` (a checked graph's
        flat outputs) once the user's call that ran the graph returns."""
        self._pending.append((outputs, apply, 0))

    def returned(self, value: Any) -> None:
        """A user's call of a compiled callable returned ``value`` (not while Dynamo traces a
        compiled callable called inside another's region: the check never runs there, and
        nothing of the capture may enter the user's graph)."""
        if torch.compiler.is_compiling() or not self._pending:
            return
        pending, self._pending = self._pending, []
        for outputs, apply, seen in pending:
            names = output_names(outputs, value)
            if names:
                self.session.guarded("the outputs' names", lambda: apply(names))
            elif seen + 1 < KEPT_FOR:  # an inner call (a graph break's, a nested module's)
                self._pending.append((outputs, apply, seen + 1))

    def _wrap_compile(self, orig: Callable[..., Any]) -> Callable[..., Any]:
        return wrap_compile(orig, lambda model, result: self.session.guarded(
            "the outputs' names", lambda: self._watch(model, result)))

    def _watch(self, model: Any, result: Any) -> Any:
        if result is model or not callable(result):
            return result
        if isinstance(result, torch.nn.Module):
            self.session.forward_hook(result, lambda mod, args, out: self.returned(out))
            return result

        @functools.wraps(result)
        def call(*args: Any, **kwargs: Any) -> Any:
            if self.session.bare_calls:  # the whole call's timed calls: nothing of ours
                return result(*args, **kwargs)
            out = result(*args, **kwargs)
            self.returned(out)
            return out
        return call
