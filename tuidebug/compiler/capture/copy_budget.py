"""Whether the copies the whole call's re-runs need fit in memory (``whole_call``): the call's
tensor arguments, the module's buffers, the program's tensors its graphs write (an Adam step's
parameters, ``exp_avg`` and ``exp_avg_sq``: three times the parameters' bytes) and the
gradients it accumulates into. Copies of device tensors over half the device's free memory
(``compat.free_device_bytes`` of the call's device; the re-runs need room for their own work) are not made: the call
is not timed (``not_measured``). On a job of several ranks the decision is every rank's
(``agreement.agreed``)."""

from __future__ import annotations

import os
from typing import Any, Iterable

import torch

from tuidebug.compiler import compat
from tuidebug.compiler.copies import copy_bytes, wide

SHARE = 0.5  # of the device's free memory, at most, for the copies
# a budget in bytes for the copies, whatever the device (a test's: set on one rank only)
BUDGET_ENV = "TUIDEBUG_TESTING_COPY_BUDGET"


def over_budget(tensors: Iterable[Any], device: torch.device, extra: int = 0) -> str | None:
    """Why copies of ``tensors`` (each once) and ``extra`` more bytes on ``device`` (the device
    the call runs on: ``compat.call_device``) do not fit, or None where they do. A copy keeps
    its tensor's strides (``copies.strided_copy``): counted as the span it allocates, and one
    whose span costs far more than its tensor (``copies.wide``) is not made."""
    seen: set[int] = set()
    on_device = every = extra
    for t in tensors:
        if isinstance(t, torch.Tensor) and id(t) not in seen:
            seen.add(id(t))
            why = wide(t)
            if why:
                return why
            need = copy_bytes(t)
            every += need
            on_device += need if t.device.type != "cpu" else 0
    told = os.environ.get(BUDGET_ENV)
    if told is not None and told.strip().isdigit():
        if every > int(told):
            return (f"copies of what the call writes would take {_size(every)}, over the "
                    f"budget of {_size(int(told))} ({BUDGET_ENV})")
        return None
    free = compat.free_device_bytes(device)
    if free is not None and on_device > SHARE * free:
        return (f"copies of what the call writes would take {_size(on_device)} of device "
                f"memory, {_size(free)} free (at most {SHARE:.0%} of it is taken)")
    return None


def _size(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"
