"""Whether the copies the whole call's re-runs need fit in memory (``whole_call``): the call's
tensor arguments, the module's buffers, the program's tensors its graphs write (an Adam step's
parameters, ``exp_avg`` and ``exp_avg_sq``: three times the parameters' bytes) and the
gradients it accumulates into. Copies of device tensors over half the device's free memory
(``compat.free_device_bytes``; the re-runs need room for their own work) are not made: the call
is not timed (``not_measured``). On a job of several ranks the decision is every rank's
(``agreed``): the timed calls run a fixed number of rounds on every rank so that their
collectives pair up, and a rank that skipped them while the others entered them left those
waiting forever."""

from __future__ import annotations

import os
from typing import Any, Iterable

import torch

from tuidebug.compiler import compat

SHARE = 0.5  # of the device's free memory, at most, for the copies
# a budget in bytes for the copies, whatever the device (a test's: set on one rank only)
BUDGET_ENV = "TUIDEBUG_TESTING_COPY_BUDGET"


def over_budget(tensors: Iterable[Any], extra: int = 0) -> str | None:
    """Why copies of ``tensors`` (each once) and ``extra`` more bytes on the device do not fit,
    or None where they do."""
    seen: set[int] = set()
    device = every = extra
    for t in tensors:
        if isinstance(t, torch.Tensor) and id(t) not in seen:
            seen.add(id(t))
            every += t.nbytes
            device += t.nbytes if t.device.type != "cpu" else 0
    told = os.environ.get(BUDGET_ENV)
    if told is not None and told.strip().isdigit():
        if every > int(told):
            return (f"copies of what the call writes would take {_size(every)}, over the "
                    f"budget of {_size(int(told))} ({BUDGET_ENV})")
        return None
    free = compat.free_device_bytes()
    if free is not None and device > SHARE * free:
        return (f"copies of what the call writes would take {_size(device)} of device memory, "
                f"{_size(free)} free (at most {SHARE:.0%} of it is taken)")
    return None


def communicates(issuing: bool, modules: list[Any]) -> bool:
    """Whether the timed calls of a call communicate with other ranks: its compiled graphs
    issue collectives (``issuing``), or it runs a DistributedDataParallel or FSDP module
    (their eager code broadcasts buffers, reduces gradients). Only then does every rank make
    the call, and only then must the ranks agree (``agreed``): a callable only rank 0 calls
    (an evaluation, a sample) is timed by rank 0 alone."""
    if issuing:
        return True
    kinds = [torch.nn.parallel.DistributedDataParallel]
    fsdp = getattr(torch.distributed, "fsdp", None) if torch.distributed.is_available() else None
    kinds += [k for k in (getattr(fsdp, "FullyShardedDataParallel", None),
                          getattr(fsdp, "FSDPModule", None)) if isinstance(k, type)]
    return any(isinstance(m, tuple(kinds)) for m in modules)


def agreed(reason: str | None, what: str, together: bool) -> str | None:
    """``reason`` where this rank cannot time the call; where the call communicates
    (``together``: ``communicates``) on a job of several ranks, also where another rank cannot
    (``what`` says why such a rank cannot; every rank asks at the same point of the same
    callable's measure: one all-reduce of the default group), so that all skip the timed
    calls or none does."""
    dist = torch.distributed
    if not together or not (dist.is_available() and dist.is_initialized()) \
            or dist.get_world_size() < 2:
        return reason
    backend = str(dist.get_backend())
    device = (torch.device("cuda", torch.cuda.current_device())
              if "nccl" in backend and "gloo" not in backend else torch.device("cpu"))
    flags = torch.zeros(dist.get_world_size(), dtype=torch.int32, device=device)
    flags[dist.get_rank()] = 1 if reason else 0
    dist.all_reduce(flags)
    short = [r for r, f in enumerate(flags.tolist()) if f]
    if reason or not short:
        return reason
    return (f"rank{'s' if len(short) > 1 else ''} {', '.join(map(str, short))} could not time "
            f"the call ({what}); every rank skips the timed calls, whose collectives pair up")


def _size(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"
