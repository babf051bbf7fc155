"""What the user's call of a ``torch.compile`` result returned: the eager check's outputs named
by it (``logits``, ``past_key_values.layers[0].keys``; ``compiler/output_paths.py``).

A listener of ``compiled_calls`` (the user's calls of what torch.compile returned, with the
eager check on): the outcome concern ``expect``s the outputs of each checked graph's first
call; a user call that returns any of them resolves them by identity (an output the user never
receives keeps the graph's own name). The outputs are held weakly: an output the script drops
(a graph break's intermediate) is freed as without tuidebug, and is in no later return. Listens
before the whole call's concern (``--profile``), whose timed calls come after the user's call
has returned.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable

import torch

from tuidebug.compiler import compat
from tuidebug.compiler.capture.compiled_calls import CompiledCalls
from tuidebug.compiler.capture.state import Concern
from tuidebug.compiler.output_paths import output_names

KEPT_FOR = 4  # user calls that may return before the one that holds a checked graph's outputs

_Refs = list["weakref.ref[torch.Tensor] | None"]  # a graph's flat outputs: tensors, weakly


class Returned(Concern):
    def __init__(self, session: Any) -> None:
        super().__init__(session)
        # (a checked graph's outputs, what names them, user calls returned since)
        self._pending: list[tuple[_Refs, Callable[[dict[int, str]], None], int]] = []

    def install(self, p: compat.Patcher) -> None:
        if self.session.check_accuracy:
            self.session.concern(CompiledCalls).listen(
                "the outputs' names", lambda call: self.returned(call.out))

    def _calls(self) -> CompiledCalls:
        return self.session.concern(CompiledCalls)

    def expect(self, outputs: list[Any], apply: Callable[[dict[int, str]], None]) -> None:
        """``apply`` will be given ``{output index: path}`` for ``outputs`` (a checked graph's
        flat outputs) once the user's call that ran the graph returns."""
        refs: _Refs = [weakref.ref(o) if isinstance(o, torch.Tensor) else None
                       for o in outputs]
        self._pending.append((refs, apply, 0))
        self._calls().wake()  # the user's calls that may return them: told again

    def returned(self, value: Any) -> bool:
        """A user's call of a compiled callable returned ``value`` (not while Dynamo traces a
        compiled callable called inside another's region: the check never runs there, and
        nothing of the capture may enter the user's graph). True when no output waits for
        its name (no further call needed until ``expect``)."""
        if torch.compiler.is_compiling() or not self._pending:
            return not self._pending
        pending, self._pending = self._pending, []
        for refs, apply, seen in pending:
            outputs = [r() if r is not None else None for r in refs]
            names = output_names(outputs, value)
            if names:
                self.session.guarded("the outputs' names", lambda: apply(names))
            elif seen + 1 < KEPT_FOR and any(o is not None for o in outputs):
                # an inner call (a graph break's, a nested module's) returned first
                self._pending.append((refs, apply, seen + 1))
        return not self._pending
