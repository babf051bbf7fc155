"""What the timed calls of ``--profile`` change of the module's buffers is put back
(``call_state.buffers`` / ``restore``), and only what they changed."""

from __future__ import annotations

import torch

from tuidebug.compiler.capture.call_state import buffers, restore


def test_an_eager_batchnorm_in_training_keeps_its_statistics() -> None:
    """Eager BatchNorm updates its running mean and variance in place without moving their
    version counter (1 → 1): told by the version, they were left as the timed calls made
    them."""
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm1d(4).train()
    bn(torch.randn(8, 4) + 3.0)  # the user's own call
    before = {n: b.clone() for n, b in bn.named_buffers()}
    saved = buffers(bn)
    for _ in range(5):  # the timed calls
        bn(torch.randn(8, 4) * 4.0 - 2.0)
    assert not torch.equal(bn.running_mean, before["running_mean"])
    restore(saved)
    names = list(before)
    assert names == ["running_mean", "running_var", "num_batches_tracked"], names
    for n, b in bn.named_buffers():
        assert torch.equal(b, before[n]), n


def test_a_buffer_the_calls_left_alone_is_not_written() -> None:
    """A buffer the user's call saved for its backward (Llama's rotary ``inv_freq``) is not
    written when unchanged (its version would move and their backward raise), a NaN in it
    included."""
    m = torch.nn.Module()
    m.register_buffer("inv_freq", torch.tensor([1.0, float("nan"), 0.5]))
    x = torch.ones(3, requires_grad=True)
    y = (x * m.inv_freq[0]).sum()  # saves inv_freq's view for the backward
    version = m.inv_freq._version
    restore(buffers(m))
    assert m.inv_freq._version == version
    y.backward()
    assert x.grad is not None and torch.equal(x.grad, torch.ones(3))
