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


def test_the_devices_of_a_call_are_every_one_off_the_cpu_cuda_first() -> None:
    """A meta tensor met before a call's CUDA tensors made the call timed on the host's clock,
    and a call over several devices was waited for on one only: every device off the CPU is
    found, each once, CUDA first in the order met (here, on the CPU: meta among CPU tensors in
    every order; tests/gpu/test_cuda_call_devices.py with CUDA)."""
    host, meta = torch.ones(2), torch.empty(2, device="meta")
    for order in ([host, meta], [meta, host], [host, meta, host, meta]):
        assert compat.call_devices(order) == [META], order
        assert compat.call_device(order) == META
    assert compat.call_devices([host, 3, None]) == []


def test_every_clocked_call_waits_for_each_of_the_calls_devices(monkeypatch) -> None:
    """The timing waits for the devices it is given, every one of them, around each clocked
    call (fair_timing's rounds, wall_times): recorded by wrapping compat's own synchronize
    (on the CPU and meta it waits for nothing; the GPU tests time real kernels)."""
    from tuidebug.compiler.compat import device as device_mod

    seen: list[object] = []
    real = device_mod.synchronize

    def recording(device):
        seen.append(device)
        real(device)

    monkeypatch.setattr(compat, "synchronize", recording)
    monkeypatch.setattr(device_mod, "synchronize", recording)
    both = [META, CPU]
    ta, tb = fair_timing.interleaved(lambda: time.sleep(0.002), lambda: None, device=both,
                                     min_rounds=2, max_rounds=2, warmup=0)
    assert len(ta) == len(tb) == 2 and min(ta) >= 0.002 > max(tb), (ta, tb)
    assert seen == [both] * 8, seen  # before and after each of the 4 clocked calls
    seen.clear()
    walls = compat.wall_times(lambda: time.sleep(0.001), 3, META)
    assert len(walls) == 3 and min(walls) >= 0.001 and seen == [META] * 6, (walls, seen)
    real(both)  # a list of devices: each waited for (none of these queues work)
    clock = compat.CallClock(META)
    assert clock.device == META and not clock.cuda
    assert compat.free_device_bytes(META) is None and compat.peak_memory(lambda: None, META) is None
