"""What the timed calls of ``--profile`` change of the module's buffers is put back
(``call_state.buffers`` / ``restore``), and only what they changed; what a re-run of the call
writes in place is put back before each run (``call_state.rewound``), and a call that cannot
be re-run says why (``raised_again``)."""

from __future__ import annotations

import weakref

import pytest
import torch

from tuidebug.compiler.capture.call_state import (
    buffers, leaf, program_tensors, raised_again, restore, rewound, written_state)
from tuidebug.compiler.capture.agreement import (
    Contained, agreed, agreement_device, communicates)
from tuidebug.compiler.capture.call_step import RunRaised
from tuidebug.compiler.capture.copy_budget import BUDGET_ENV, over_budget
from tuidebug.compiler.capture.reach import reach
from tuidebug.compiler.capture.side_state import SideState, optimizer_tensors, parameters

CPU = torch.device("cpu")


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


def _step(x: torch.Tensor, cache: torch.Tensor, pos: torch.Tensor, bn: torch.nn.Module,
          seen: torch.Tensor) -> torch.Tensor:
    """A step that advances a position into a 4-row cache, through a BatchNorm in training,
    and counts its calls in ``seen`` (the program's own: no argument)."""
    cache.index_copy_(0, pos, x.view(1, 4))
    pos.add_(1)
    seen.add_(1)
    return bn(cache).sum()


def test_what_a_re_run_writes_is_put_back_before_each_run() -> None:
    """The copies of the call's arguments, the module's buffers and the program's tensors
    its graphs write that one re-run wrote (told by the version counter, or by what they hold:
    eager BatchNorm's statistics keep theirs) are put back, from what they held when the
    user's call returned; what no run writes is not written; the program's own tensors are as
    the user's call left them after. Without it the fourth re-run indexed the cache past its
    end, and ``seen`` counted every re-run."""
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm1d(4).train()
    x, cache, pos = torch.randn(4), torch.zeros(4, 4), torch.zeros(1, dtype=torch.long)
    seen = torch.zeros(1)
    _step(x, cache, pos, bn, seen)  # the user's call: pos 1, seen 1
    args = (x, cache, pos)
    saved = buffers(bn)
    # what the graphs wrote at their first call: the cache is an argument (re-run as a copy)
    state = written_state(program_tensors(
        [("cache", weakref.ref(cache)), ("seen", weakref.ref(seen))], args, {}, bn))
    assert [name for name, _, _ in state] == ["seen"]
    copies: dict = {}
    leaves = [leaf(a, copies) for a in args]
    put = rewound(args, {}, copies, bn, saved, state)
    _step(*leaves, bn, seen)
    put.learn()
    assert put.names() == ["argument 1", "argument 2", "buffer running_mean",
                           "buffer running_var", "buffer num_batches_tracked", "seen"]
    x_version = leaves[0]._version
    for _ in range(6):
        put.restore()
        assert int(leaves[2]) == 1 and torch.equal(leaves[1], cache) and int(seen) == 1
        _step(*leaves, bn, seen)
    assert leaves[0]._version == x_version  # read, never written: left alone
    assert int(pos) == 1 and torch.equal(cache[1:], torch.zeros(3, 4))  # the user's own
    restore(saved + [(t, copy) for _, t, copy in state])
    assert int(seen) == 1


def test_a_call_that_cannot_run_again_says_why() -> None:
    """At the first re-run (from where the user's call left its state), and at a later one
    with what it writes put back (state outside its arguments): each a reason, not a bare
    IndexError."""
    cache, pos = torch.zeros(4, 4), torch.zeros(1, dtype=torch.long)
    copies: dict = {}
    leaves = [leaf(a, copies) for a in (cache, pos)]
    state = rewound((cache, pos), {}, copies, None, [], [])
    error = IndexError("index_copy_(): index 4 is out of bounds for dimension 0 with size 4\n"
                       "second line")
    first = raised_again(error, state)
    assert first.startswith("run once more on copies of its arguments as the user's call left "
                            "them, the call raised IndexError: index_copy_(): index 4 is out of "
                            "bounds for dimension 0 with size 4 (a call that advances state")
    assert "second line" not in first
    leaves[1].add_(1)
    state.learn()
    later = raised_again(error, state)
    assert later.startswith("run again on copies of its arguments (what it writes in place "
                            "(argument 1) put back before each), the call raised IndexError")
    assert "depends on state the timing does not put back" in later


class Counting(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(3, 1)
        self.calls = 0
        self.note = "fresh"


COUNTED = Counting()
OPT = torch.optim.SGD(COUNTED.parameters(), lr=0.1)
STEPS = 0


def _train_step(x: torch.Tensor) -> torch.Tensor:
    """A training step whose backward, inside the callable, accumulates into ``.grad``, that
    counts its calls in a module attribute and a global: what the compiled graphs do not tell."""
    global STEPS
    STEPS += 1
    COUNTED.calls += 1
    COUNTED.note = "stepped"
    loss = COUNTED.fc(x).sum()
    loss.backward()
    return loss.detach()


def test_attributes_and_gradients_a_re_run_changes_are_put_back() -> None:
    """``self.calls += 1`` (Dynamo applies it at every call), a global counter and the ``.grad``
    a ``loss.backward()`` inside the callable accumulates into were changed by every re-run:
    the traced job ended with other counts and gradients than untraced. Taken before the
    first re-run, learnt after it, put back before each later one and after."""
    x = torch.ones(2, 3)
    _train_step(x)  # the user's call: calls 1, grad of one step
    grad = COUNTED.fc.weight.grad.clone()
    assert COUNTED.fc.bias.grad is not None
    COUNTED.fc.bias.grad = None  # the bias without a gradient: put back as None
    COUNTED.note = "fresh"
    reached = reach(_train_step, None, (x,), {})
    assert COUNTED in reached.modules and COUNTED.fc in reached.modules
    params = parameters(reached.modules, reached.optimizers)
    assert len(params) == 2, params
    side = SideState(reached.spaces, params, set())
    put = rewound((x,), {}, {}, None, [], [], side)
    before = (COUNTED.calls, STEPS)
    _train_step(x)  # the learning re-run
    put.learn()
    assert sorted(put.names()) == ["Counting.calls", "Counting.note", "Linear.bias.grad",
                                   "Linear.weight.grad", "global.STEPS"], put.names()
    assert put.writes() and side.unrestorable == []
    for _ in range(3):
        put.restore()
        assert (COUNTED.calls, STEPS, COUNTED.note) == (*before, "fresh")
        assert torch.equal(COUNTED.fc.weight.grad, grad) and COUNTED.fc.bias.grad is None
        _train_step(x)
    side.learn()
    side.restore()
    assert (COUNTED.calls, STEPS) == before and torch.equal(COUNTED.fc.weight.grad, grad)


def test_a_parameter_written_outside_the_graphs_cannot_be_put_back() -> None:
    """An eager ``opt.step()`` (a graph break, disabled code) writes the parameters, of which
    no copy is kept: told, by name; a parameter the graphs write (tracked) is not."""
    params = parameters(reach(_train_step, None, (), {}).modules, [])
    tracked = {id(COUNTED.fc.bias)}
    side = SideState([], params, tracked)
    _train_step(torch.ones(2, 3))
    OPT.step()
    side.learn()
    assert side.unrestorable == ["Linear.weight"], side.unrestorable


def test_the_copies_are_made_only_within_the_budget(monkeypatch) -> None:
    """Copies of every tensor the graphs of the session wrote were made before knowing what a
    re-run writes, with no limit (Adam: three times the parameters' bytes). Over the budget,
    the reason; one process agrees with itself."""
    t = torch.zeros(256)  # 1 KiB
    assert over_budget([t, t], CPU) is None  # the CPU: no device budget
    monkeypatch.setenv(BUDGET_ENV, "1024")
    assert over_budget([t, t], CPU) is None  # one tensor twice is one copy
    said = over_budget([t, torch.zeros(1)], CPU)
    assert said is not None and "over the budget of 0.0 MiB" in said, said
    assert over_budget([t], CPU, extra=1) is not None
    assert agreed(said, "why", True, CPU) == said and agreed(None, "why", True, CPU) is None
    # only a call that communicates is every rank's: one only rank 0 makes is its own
    # one process: no rank to agree with, whatever the call issued
    assert not communicates(3, True, None) and not communicates(None, False, None)


class Trainer:
    """A plain object holding what its step changes: the model, heads in a dict, the
    optimizer and a count, as attributes."""

    def __init__(self) -> None:
        self.model = torch.nn.Linear(3, 2)
        self.heads = {"out": torch.nn.Linear(2, 1)}
        self.opt = torch.optim.SGD([*self.model.parameters(),
                                    *self.heads["out"].parameters()], lr=0.5, momentum=0.9)
        self.steps = 0

    def step(self, x: torch.Tensor) -> torch.Tensor:
        self.steps += 1
        loss = self.heads["out"](self.model(x)).sum()
        loss.backward()
        self.opt.step()
        return loss.detach()


def test_what_a_bound_method_reaches_is_found_through_its_object() -> None:
    """``torch.compile(trainer.step)``: the modules, optimizer and count live in a plain
    object's attributes and a dict. Looked for only in the owner, the arguments, the closure
    and the named globals, none was found: each re-run accumulated into ``.grad``, stepped the
    optimizer and counted. The walk goes through the method's ``__self__``, its attributes
    and containers; each gradient, count and the optimizer's parameters and momentum are put
    back."""
    trainer = Trainer()
    x = torch.ones(4, 3)
    trainer.step(x)  # the user's call
    reached = reach(trainer.step, None, (x,), {})
    assert reached.cut is None
    assert trainer.model in reached.modules and trainer.heads["out"] in reached.modules
    assert reached.optimizers == [trainer.opt]
    params = parameters(reached.modules, reached.optimizers)
    assert len(params) == 4, params
    written = optimizer_tensors(reached.optimizers, params)
    names = [n for n, _ in written]
    assert names[:4] == ["Linear.weight", "Linear.bias", "Linear.weight", "Linear.bias"], names
    assert names[4:] == [f"SGD momentum_buffer of {n}" for n in names[:4]], names
    before = {n: t.clone() for n, t in [*trainer.model.named_parameters()]}
    grad = trainer.model.weight.grad.clone()
    momentum = trainer.opt.state[trainer.model.weight]["momentum_buffer"].clone()
    state = written_state(program_tensors(
        [(n, weakref.ref(t)) for n, t in written], (x,), {}, None))
    side = SideState(reached.spaces, params, {id(t) for _, t, _ in state})
    put = rewound((x,), {}, {}, None, [], state, side)
    trainer.step(x)  # the learning re-run
    put.learn()
    assert "Trainer.steps" in put.names() and "Linear.weight.grad" in put.names(), put.names()
    assert side.unrestorable == [] and side.why() is None
    for _ in range(3):
        put.restore()
        trainer.step(x)
    put.restore()
    assert trainer.steps == 1
    assert torch.equal(trainer.model.weight.grad, grad)
    assert torch.equal(trainer.opt.state[trainer.model.weight]["momentum_buffer"], momentum)
    for n, p in trainer.model.named_parameters():  # as the user's one step left them
        assert torch.equal(p, before[n]), n


def test_a_walk_cut_short_by_its_bound_says_so() -> None:
    """What the call reaches is walked at most ``limit`` objects deep: cut short, the reason
    (the whole call is then not timed); within it, none."""
    data = [[i] for i in range(100)]  # 101 containers (their numbers are not counted)

    def step(x: torch.Tensor) -> torch.Tensor:
        return x + len(data)

    assert reach(step, None, (torch.ones(1),), {}).cut is None
    cut = reach(step, None, (torch.ones(1),), {}, limit=50).cut
    assert cut is not None and "more than 50 objects" in cut, cut


def test_the_agreement_is_on_the_calls_device_and_a_raising_call_is_kept() -> None:
    """``torch.cuda.current_device()`` is device 0 in a rank that never called set_device:
    NCCL's flags go on the device of the call's own tensors; gloo's on the CPU. On a job whose
    ranks time a call together, a call raising on one rank is kept and the rounds go on (the
    others would wait forever in its collectives); alone, it raises."""
    cpu, dev1 = torch.device("cpu"), torch.device("cuda", 1)
    assert agreement_device("nccl", dev1) == dev1
    assert agreement_device("cpu:gloo,cuda:nccl", dev1) == cpu
    assert agreement_device("gloo", dev1) == cpu
    calls: list[int] = []

    def flaky() -> None:
        calls.append(1)
        if len(calls) == 2:
            raise RunRaised(ValueError("the second call"))

    keep = Contained(True)
    for _ in range(4):
        keep(flaky)()
    assert len(calls) == 4 and isinstance(keep.error, RunRaised)
    why = keep.why(rewound((), {}, {}, None, [], []))
    assert why is not None and "ValueError: the second call" in why, why
    alone = Contained(False)
    calls.clear()
    with pytest.raises(RunRaised):
        for _ in range(4):
            alone(flaky)()
    assert len(calls) == 2 and alone.why(rewound((), {}, {}, None, [], [])) is None
