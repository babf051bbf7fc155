"""One call of the user's compiled callable, or of its eager original, as the whole call's
timing makes it (``whole_call``): under the grad mode the user's call had, and, for a training
step, ``autograd.grad`` of its outputs; a failure of the user's own code is ``RunRaised``."""

from __future__ import annotations

from typing import Any, Callable

import torch

from tuidebug.compiler.gradients import seeded, tensors


class RunRaised(Exception):
    """The user's call raised when run again (``error``): not tuidebug's own failure."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class Step:
    """One call as the user's ran: under the grad mode it had; a training call (outputs that
    require grad) also runs ``autograd.grad`` of them with respect to ``wrt``."""

    def __init__(self, forward: Callable[[], Any], wrt: list[torch.Tensor], grad_on: bool,
                 grads: list[torch.Tensor] | None = None, training: bool | None = None):
        """``training``: whether the call is a training step, where it is known (the same call
        as another step's: no forward of its own to ask); ``grads``: the seeded output
        gradients."""
        self.forward = forward
        self.wrt = wrt
        self.grad_on = grad_on
        self.grads = grads
        self._training = training

    def training(self) -> bool:
        if self._training is None:
            with torch.set_grad_enabled(self.grad_on):
                outs = [o for o in tensors(self._forward()) if o.requires_grad]
            self._training = bool(outs and self.wrt and self.grad_on)
            if self._training:
                self.grads = seeded(outs)
        return self._training

    def run(self) -> Any:
        with torch.set_grad_enabled(self.grad_on):
            out = self._forward()
            if self.training():
                return self._backward(out)
            return out

    def run_split(self, clock: Any) -> tuple[int, int]:
        """One run, as ``run``, with ``clock`` marked (``compat.CallClock``: nothing waits for
        the device) where the forward ended and where the call ended (one mark when no
        backward runs)."""
        with torch.set_grad_enabled(self.grad_on):
            out = self._forward()
            fwd_end = clock.mark()
            if not self.training():
                return fwd_end, fwd_end
            self._backward(out)
            return fwd_end, clock.mark()

    def _forward(self) -> Any:
        try:
            return self.forward()
        except Exception as e:  # the user's call: said as its own (``RunRaised``)
            raise RunRaised(e) from e

    def _backward(self, out: Any) -> Any:
        outs = [o for o in tensors(out) if o.requires_grad]
        try:
            return torch.autograd.grad(outs, self.wrt, grad_outputs=self.grads,
                                       allow_unused=True)
        except Exception as e:
            raise RunRaised(e) from e
