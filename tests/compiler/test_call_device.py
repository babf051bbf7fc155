"""The device a call is measured on is the one its own tensors are on
(``compat.call_device``), not the current CUDA device: a rank that never called
``torch.cuda.set_device`` but put its model on ``cuda:1`` has ``cuda:0`` current, and its call
was timed on GPU 0 (tests/gpu/test_cuda_ranks_agree.py times one on 2 GPUs). Here, on the CPU:
the choice itself, and every measure taking that device, for a call on the CPU and on a device
with no clock of its own (``meta``)."""

from __future__ import annotations

import time

import torch

from tuidebug.compiler import compat, fair_timing

CPU, META = torch.device("cpu"), torch.device("meta")


def _where_no_tensor_is_off_the_cpu() -> torch.device:
    """The CPU, or the current CUDA device where CUDA is in use in this process."""
    if compat.device_kind() == "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    return CPU


def test_the_call_device_is_its_first_tensor_off_the_cpu() -> None:
    model = torch.nn.Linear(4, 4, device="meta")
    host = torch.ones(4)
    # the model's parameters on meta, the argument on the CPU: meta, wherever it is listed
    assert compat.call_device([host, *model.parameters()]) == META
    assert compat.call_device([*model.parameters(), host]) == META
    # not tensors (a step count, a name) are passed over
    assert compat.call_device([3, "x", None, host, model.weight]) == META
    assert compat.call_device([host, host]) == _where_no_tensor_is_off_the_cpu()
    assert compat.call_device([]) == _where_no_tensor_is_off_the_cpu()


def test_every_measure_takes_the_calls_device() -> None:
    """On the CPU and on meta (no device clock, no device memory): host marks, nothing to
    wait for, no free device memory or peak, the copies' budget unbounded by a device; the
    clocked calls of ``fair_timing`` measured on the host's clock."""
    from tuidebug.compiler.capture.copy_budget import over_budget

    for device in (CPU, META):
        clock = compat.CallClock(device)
        assert clock.device == device and not clock.cuda
        clock.reset()
        clock.mark()
        time.sleep(0.002)
        clock.mark()
        secs = clock.seconds()
        assert len(secs) == 2 and secs[0] == 0.0 and secs[1] >= 0.002, secs
        compat.synchronize(device)  # nothing queued: returns
        assert compat.free_device_bytes(device) is None
        assert compat.peak_memory(lambda: None, device) is None
        walls = compat.wall_times(lambda: time.sleep(0.001), 3, device)
        assert len(walls) == 3 and min(walls) >= 0.001, walls
        assert over_budget([torch.empty(2**20, device=device)], device) is None
        ta, tb = fair_timing.interleaved(lambda: time.sleep(0.002), lambda: None, device=device,
                                         min_rounds=2, max_rounds=2, warmup=0)
        assert len(ta) == len(tb) == 2 and min(ta) >= 0.002 > max(tb), (ta, tb)
