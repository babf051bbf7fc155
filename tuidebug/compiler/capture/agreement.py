"""Every rank's decision on the whole call's timing (``whole_call``), where the call
communicates with the other ranks: the timed calls run a fixed number of rounds on every rank
so that their collectives pair up, and a rank that skipped them, or left them early, while the
others entered them left those waiting forever. The ranks agree whether to time the call
(what the call reaches could be walked, the copies fit: ``agreed``), whether its learning
re-run went through, and, after the fixed rounds, whether every call of them did: a call that
raises on one rank is kept (``Contained``), that rank makes the rest of its calls as the others
do, and then every rank says not measured, with the reason."""

from __future__ import annotations

from typing import Any, Callable

import torch

from tuidebug.compiler.capture.call_state import Rewound, raised_again
from tuidebug.compiler.capture.call_step import RunRaised


def communicates(issued: int | None, issuing: bool, owner: Any) -> bool:
    """Whether the timed calls of a call communicate with other ranks, so that every rank
    makes them and must agree (``agreed``), decided alike on every rank whose call is alike:
    on a job of several ranks, the user's call issued a collective (``issued``: counted by
    ``rank_progress.RankProgress`` while it ran: an eager ``all_reduce`` of gradients, a
    logging one after a graph break, a compiled graph's), or its compiled graphs issue some
    (``issuing``), or the compiled module is a DistributedDataParallel or FSDP module (their
    eager code broadcasts buffers). A callable only rank 0 calls with no collective (an
    evaluation, a sample) is timed by rank 0 alone. Not from the walk of what the call
    reaches: a walk cut short on one rank would make that rank alone skip the agreement.
    Where nothing counted the call's collectives (``issued`` None) the caller does not time
    the call at all (``uncounted``): agreeing in doubt would leave a rank that alone makes a
    call (rank 0's evaluation) waiting for the others, and not agreeing would leave the others
    waiting in the re-runs' collectives; nor do the others where such a rank is one of theirs
    (``counted_ranks``: every rank's word, before they agree)."""
    if world_size() < 2:
        return False
    if issued is None or issued > 0 or issuing:
        return True
    kinds = [torch.nn.parallel.DistributedDataParallel]
    fsdp = getattr(torch.distributed, "fsdp", None) if torch.distributed.is_available() else None
    kinds += [k for k in (getattr(fsdp, "FullyShardedDataParallel", None),
                          getattr(fsdp, "FSDPModule", None)) if isinstance(k, type)]
    if not issubclass(type(owner), torch.nn.Module):
        return False
    return any(issubclass(type(m), tuple(kinds)) for m in torch.nn.Module.modules(owner))


NOT_LAUNCHED = "the job was not started by tuidebug trace --nproc-per-node N, which counts them"


def uncounted(issued: int | None, failed: str | None = None) -> str | None:
    """Why this rank's collectives are not counted, on a job of several ranks (``issued``
    None): ``failed``, why its counter could not be installed, else ``NOT_LAUNCHED`` (the
    capture started in the script itself, or each rank traced on its own). None where they are
    counted, or in one process. Such a rank times no call (``uncounted_said``), and says so to
    the others (``counted_ranks``)."""
    if issued is not None or world_size() < 2:
        return None
    return failed or NOT_LAUNCHED


def uncounted_said(cause: str) -> str:
    """Why a call of a rank whose collectives are not counted (``cause``) is not timed."""
    return (f"this rank's collectives are not counted ({cause}), so whether the call talks to "
            "the other ranks is not known: re-running it here could leave this rank or the "
            "others waiting")


def world_size() -> int:
    """The world size of an initialized process group (1 without one)."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return int(dist.get_world_size())
    return 1


def agreement_device(backend: str, device: torch.device) -> torch.device:
    """Where the agreement's flags live: the CPU where the default group's backend takes CPU
    tensors (gloo, a ``cpu:gloo,cuda:nccl`` group), else ``device``, the one the call runs on
    (``compat.call_device`` of its own tensors): NCCL reduces on the device a tensor is on,
    and ``torch.cuda.current_device()`` is device 0 in a rank that never called
    ``set_device`` while its tensors are on ``cuda:LOCAL_RANK``."""
    if "gloo" in backend or "mpi" in backend:
        return torch.device("cpu")
    return device


def agreed(reason: str | None, what: str, together: bool,
           device: torch.device) -> str | None:
    """``reason`` where this rank cannot time the call; where the call communicates
    (``together``: ``communicates``) on a job of several ranks, also where another rank cannot
    (``what`` says why such a rank cannot; every rank asks at the same point of the same
    callable's measure: one all-reduce of the default group, on the ``agreement_device`` of
    the call's ``device``), so that all skip the timed calls or none does."""
    dist = torch.distributed
    if not together or world_size() < 2:
        return reason
    flags = torch.zeros(dist.get_world_size(), dtype=torch.int32,
                        device=agreement_device(str(dist.get_backend()), device))
    flags[dist.get_rank()] = 1 if reason else 0
    dist.all_reduce(flags)
    short = [r for r, f in enumerate(flags.tolist()) if f]
    if reason or not short:
        return reason
    return (f"rank{'s' if len(short) > 1 else ''} {', '.join(map(str, short))} could not time "
            f"the call ({what}); every rank skips the timed calls, whose collectives pair up")


class Agreement:
    """The ranks' agreement points of one call's measure, every one of them made on every
    rank (``POINTS``: whether to time it, whether its learning re-run went through, whether the
    timed rounds did, whether the clocked ones did), in order. A rank whose measure fails
    between them (tuidebug's own error, a walk or a copy that raises) makes the next point
    with that reason (``settle``): every rank stops there, none waits alone in a later one."""

    POINTS = 4

    def __init__(self, together: bool, device: torch.device) -> None:
        self.together = together
        self.device = device  # the call's (its flags' on NCCL: ``agreement_device``)
        self.devices: list[torch.device] = [device]  # every one the call runs on
        self.made = 0
        self.short: str | None = None  # the first reason any point agreed on

    def __call__(self, reason: str | None, what: str) -> str | None:
        self.made += 1
        said = agreed(reason, what, self.together, self.device)
        if said and self.short is None:
            self.short = said
        return said

    def settle(self, reason: str) -> None:
        """The next point made with ``reason`` (after a failure on this rank), where no point
        has stopped the ranks yet."""
        if self.short is None and self.made < self.POINTS:
            self(reason, "timing it failed")


class Contained:
    """The calls of a fixed number of rounds made on every rank alike (``on``: the call
    communicates on a job of several ranks): a call that raises is kept (the first error),
    not raised, and the rank goes on with the rest of its calls, whose collectives pair with
    the other ranks' (a call that raises before its own collectives leaves them unpaired all
    the same: nothing can pair those). Off, a call raises as it does."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self.error: Exception | None = None

    def __call__(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        if not self.on:
            return fn

        def run() -> Any:
            try:
                return fn()
            except Exception as e:  # kept until every rank has made its calls
                if self.error is None:
                    self.error = e
                return None
        return run

    def why(self, rewound: Rewound) -> str | None:
        """Why the calls kept cannot be timed: the first that raised, said as
        ``raised_again`` says it (tuidebug's own failure, as its type and message)."""
        e = self.error
        if e is None:
            return None
        if isinstance(e, RunRaised):
            return raised_again(e.error, rewound)
        return f"timing the call failed: {type(e).__name__}: {str(e)[:300]}"
