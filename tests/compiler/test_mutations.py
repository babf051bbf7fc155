"""A graph that writes in place into its inputs or its attribute tensors (an optimizer step) is
not re-run by the eager check, and the check says why instead of "match" (issue 30: the
compiled AdamW step was called a match with no output compared, while the float64 re-run had
failed — and the re-run had stepped the optimizer's state a second time)."""

from __future__ import annotations

import pytest
import torch
from torch import fx, nn

from tuidebug.compiler import accuracy
from tuidebug.compiler.mutations import mutated_state


class StateStep(nn.Module):
    """An optimizer-like step: state held as a buffer, updated in place; returns nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("exp_avg", torch.zeros(4))

    def forward(self, p: torch.Tensor, g: torch.Tensor) -> None:
        self.exp_avg.lerp_(g, 0.1)
        p.view(-1).add_(self.exp_avg, alpha=-0.5)


class InPlaceInside(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        y.relu_()  # a tensor the graph made: re-running is harmless, outputs are compared
        return y


class WritesInput(nn.Module):
    def forward(self, x: torch.Tensor) -> None:
        x.copy_(torch.ones_like(x))


def test_writes_into_attributes_and_inputs_are_found() -> None:
    m = mutated_state(fx.symbolic_trace(StateStep()))
    assert m.attributes == ["exp_avg.lerp_"]
    assert m.inputs == ["p.add_"]  # through the view
    inside = mutated_state(fx.symbolic_trace(InPlaceInside()))
    assert inside.attributes == [] and inside.inputs == []
    assert mutated_state(fx.symbolic_trace(WritesInput())).inputs == ["x.copy_"]
    # the same walk gives what re-runs put back: the input positions and attribute targets
    assert (m.positions, m.targets) == ([0], ["exp_avg"])
    assert (inside.positions, inside.targets) == ([], [])


def test_a_step_on_state_runs_once_and_is_not_called_a_match() -> None:
    gm = fx.symbolic_trace(StateStep())
    records: list[dict] = []
    run = accuracy.checked(gm, gm, records.append)
    p, g = torch.ones(4), torch.full((4,), 2.0)
    run(p, g)
    (r,) = records
    assert "close" not in r and r["skipped"].startswith("not compared: the graph writes in place")
    assert "exp_avg.lerp_" in r["skipped"] and r["mutated"] == ["exp_avg.lerp_", "p.add_"]
    # the program's state was stepped once, as without the check
    assert torch.allclose(gm.exp_avg, torch.full((4,), 0.2))
    assert torch.allclose(p, torch.full((4,), 0.9))


def test_the_tensors_a_first_call_writes_are_told_as_the_callers_own() -> None:
    """``wrote``: at the graph's first call, the call's own tensors it writes in place (an
    input through a view, an attribute: an optimizer's state), named — what a re-run of the
    user's whole call must put back; a graph writing only what it made tells none."""
    gm = fx.symbolic_trace(StateStep())
    told: list[list] = []
    run = accuracy.checked(gm, gm, lambda r: None, wrote=told.append)
    p, g = torch.ones(4), torch.full((4,), 2.0)
    run(p, g)
    run(p, g)  # told once
    assert len(told) == 1 and [n for n, _ in told[0]] == ["p", "exp_avg"], told
    assert told[0][0][1] is p and told[0][1][1] is gm.exp_avg
    inside = fx.symbolic_trace(InPlaceInside())
    accuracy.checked(inside, inside, lambda r: None, wrote=told.append)(torch.ones(3))
    assert told[1:] == [[]]


def test_a_graph_whose_effect_is_writing_its_inputs_says_so() -> None:
    gm = fx.symbolic_trace(WritesInput())
    records: list[dict] = []
    accuracy.checked(gm, gm, records.append)(torch.zeros(3))
    assert records[0]["skipped"].startswith("not compared: the graph returns nothing")


def test_a_graph_writing_only_what_it_made_is_still_judged() -> None:
    gm = fx.symbolic_trace(InPlaceInside())
    records: list[dict] = []
    accuracy.checked(gm, gm, records.append)(torch.randn(8))
    assert records[0]["close"] is True and records[0]["reference"] == "float64"


class CacheLength(nn.Module):
    """transformers' StaticLayer.update: the cache's length, a 0-d int64 tensor, moved to the
    input's device (``.to`` of its own device: the same tensor) and advanced in place; the
    graph returns it (Dynamo: the attribute the user's cache then holds)."""

    def forward(self, x: torch.Tensor, length: torch.Tensor):
        length = length.to(x.device)
        pos = torch.arange(x.shape[0]) + length
        length.add_(x.shape[0])
        return x * 2 + pos, length


def test_a_graph_advancing_an_input_in_place_is_judged_from_the_same_state() -> None:
    """Qwen2 generate(cache_implementation="static"): "MISMATCH past_key_values.layers[0].
    cumulative_length: integer/bool values differ" on a run whose tokens equal the untraced
    run's. The float64 reference re-ran the graph on the eager run's copies, whose length the
    eager run had advanced (an int64 tensor is not upcast: the same copy), and the eager output
    aliases it: the reference moved what it was compared by. Every re-run starts from the state
    the user's call started from; the user's length is advanced once."""
    gm = fx.symbolic_trace(CacheLength())
    assert mutated_state(gm).inputs, "the write through .to() is the input's"
    records: list[dict] = []
    length = torch.tensor(3)
    out, returned = accuracy.checked(gm, gm, records.append)(torch.ones(4), length)
    (r,) = records
    assert r["close"] is True and r["reference"] == "float64", r
    assert length.item() == 7 and returned is length
    assert out.tolist() == [5.0, 6.0, 7.0, 8.0]


# -- which op writes what: its schema, not its name (issue: `mutations.py` judged by a trailing _)


@torch.library.custom_op("tuidebug_test::scale_", mutates_args=())
def scale_(x: torch.Tensor) -> torch.Tensor:
    """Ends in ``_`` and writes nothing: a new tensor."""
    return x * 2


@scale_.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


@torch.library.custom_op("tuidebug_test::fill_into", mutates_args=("dst",))
def fill_into(src: torch.Tensor, dst: torch.Tensor) -> None:
    """Writes its second argument (``mutates_args``), with no ``_`` in its name."""
    dst.copy_(src)


class CustomOps(nn.Module):
    def forward(self, x: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        y = torch.ops.tuidebug_test.scale_(x)
        torch.ops.tuidebug_test.fill_into(y, dst)
        return y


class OutAndIndexPut(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor,
                i: torch.Tensor) -> torch.Tensor:
        torch.add(a, 1, out=c)  # writes c, not a
        b.index_put_((i,), torch.zeros(1))
        return a * 2


def _dynamo_graph(model: nn.Module, *args: torch.Tensor) -> fx.GraphModule:
    """The graph Dynamo makes of ``model`` (a backend that keeps it and runs it eagerly)."""
    graphs: list[fx.GraphModule] = []

    def keep(gm: fx.GraphModule, example_inputs: list) -> fx.GraphModule:
        graphs.append(gm)
        return gm

    torch._dynamo.reset()
    torch.compile(model, backend=keep, fullgraph=True)(*args)
    (gm,) = graphs
    return gm


def _custom_ops_checked(gm: fx.GraphModule) -> None:
    m = mutated_state(gm)
    assert m.attributes == [], m
    (entry,) = m.inputs
    assert entry.endswith(".fill_into") and entry.split(".")[0] in ("dst", "l_dst_"), m


def _out_and_index_put_checked(gm: fx.GraphModule) -> None:
    m = mutated_state(gm)
    roots = sorted(e.split(".")[0].replace("l_", "").rstrip("_") for e in m.inputs)
    assert roots == ["b", "c"], m.inputs


OUT_ARGS = (torch.randn(3), torch.randn(3), torch.empty(3), torch.tensor([1]))


def test_a_custom_op_writes_what_its_mutates_args_say_not_what_its_name_says() -> None:
    """``scale_`` (a trailing _, no mutates_args) writes nothing; ``fill_into`` writes its
    second argument: read from the schemas."""
    _custom_ops_checked(fx.symbolic_trace(CustomOps()))


def test_out_variants_and_index_put_write_the_right_argument() -> None:
    """``torch.add(a, 1, out=c)`` writes c (not a); ``b.index_put_`` writes b."""
    _out_and_index_put_checked(fx.symbolic_trace(OutAndIndexPut()))


@pytest.mark.slow  # Dynamo traces the models
def test_the_graphs_dynamo_makes_are_read_the_same_way() -> None:
    """In Dynamo's graphs the custom ops are OpOverloads and ``index_put_`` a method call."""
    dynamo = _dynamo_graph(CustomOps(), torch.randn(4), torch.zeros(4))
    targets = [str(n.target) for n in dynamo.graph.nodes if n.op == "call_function"]
    assert any("scale_" in t for t in targets) and any("fill_into" in t for t in targets)
    _custom_ops_checked(dynamo)
    _out_and_index_put_checked(_dynamo_graph(OutAndIndexPut(), *OUT_ARGS))


def test_an_ops_written_arguments_are_the_callers_own() -> None:
    """Which arguments an op writes (asked by every node of every graph): the same answer each
    time, and each caller gets its own list — one caller clearing it changes no later answer."""
    from tuidebug.compiler import compat

    for target in (torch.ops.aten.add_.Tensor, torch.ops.aten.index_put_, "lerp_", torch.add):
        first = compat.written_arguments(target)
        again = compat.written_arguments(target)
        assert again == first and again is not first, target
        if again:
            again.clear()  # the caller's list: the answer stays
            assert compat.written_arguments(target) == first
    for target in (torch.ops.aten.add_.Tensor, torch.ops.aten.index_put_, "lerp_"):
        assert [w.name for w in compat.written_arguments(target) or []] == ["self"], target
    assert compat.written_arguments(lambda t: t) is None


class BitsView(nn.Module):
    """A float32 input's bits read as int32 (a dtype fixed inside the graph): its float64
    reference fails (a float64 has 8 bytes: its int32 view has twice the elements). A float32
    buffer made inside the graph and written by index (transformers' static cache) failed so
    too, until the reference kept the graph's narrower dtypes in float64."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + (x.view(torch.int32) & 1).float()


def test_a_reference_that_fails_prints_nothing_to_the_users_stderr(capfd) -> None:
    """FX prints a failing generated forward's traceback to stderr ("Call using an FX-traced
    Module, line 90 …") before raising: the failed float64 reference of Qwen2's static cache
    showed two tracebacks in the output of a run that had no error. The reason is kept in the
    check's ``reference``; the user's stderr is as untraced."""
    gm = fx.symbolic_trace(BitsView())
    records: list[dict] = []
    accuracy.checked(gm, gm, records.append)(torch.ones(4))
    (r,) = records
    assert r["close"] is True and r["reference"].startswith("eager only: RuntimeError"), r
    err = capfd.readouterr().err
    assert "FX-traced Module" not in err and "Traceback" not in err, err


class AdvanceCache(nn.Module):
    """A static KV cache's update: the step's keys written into the cache in place at its
    length, the length advanced; returns what attention would read."""

    def forward(self, k: torch.Tensor, cache: torch.Tensor, length: torch.Tensor):
        cache.index_copy_(0, length.view(1), k.view(1, -1))
        length.add_(1)
        return cache.sum(0) * 2


def _copies(fn) -> int:
    """The copy ops (``aten::copy_``, ``aten::clone``) one call of ``fn`` runs."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return sum(1 for e in prof.events() if e.name in ("aten::copy_", "aten::clone"))


def test_the_rerun_that_is_timed_and_profiled_copies_nothing() -> None:
    """The kernels' timing and the profile re-run the graph from the inputs' state before the
    user's call; putting a written input back (a whole static KV cache copied) ran inside the
    re-run each clock measured, padding every time and pulling compiled-against-eager to 1.
    It is handed to them apart, to run unclocked before each run."""
    gm = fx.symbolic_trace(AdvanceCache())
    given: list[tuple] = []
    cache, length = torch.zeros(64, 8), torch.tensor(3)
    run = accuracy.checked(gm, gm, lambda r: None,
                           time_kernels=lambda again, before: given.append(("time", again,
                                                                             before)),
                           profile=lambda again, inputs, grad, before: given.append(
                               ("profile", again, before)))
    run(torch.ones(8), cache, length)
    assert length.item() == 4 and cache[3].tolist() == [1.0] * 8  # the user's call, once
    assert [g[0] for g in given] == ["time", "profile"], given
    alone = _copies(lambda: gm(torch.ones(8), torch.zeros(64, 8), torch.tensor(3)))
    for _, again, before in given:
        assert _copies(again) == alone  # the timed run: the graph alone, no copy of its inputs
        outs = []
        for _ in range(3):
            before()
            outs.append(again())
        assert all(torch.equal(o, outs[0]) for o in outs) and outs[0][0].item() == 2.0
    assert length.item() == 4 and cache[4].abs().sum().item() == 0  # the user's, untouched


def test_inputs_that_cannot_be_copied_leave_the_call_unchecked_not_failed() -> None:
    """The copies the check re-runs on are made in the user's call: one that fails (out of
    memory on a large cache) leaves the call run as the program asked, unchecked."""
    class NoClone(torch.Tensor):
        def clone(self, *args, **kwargs):
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (a large static cache)")

    gm = fx.symbolic_trace(AdvanceCache())
    records: list[dict] = []
    cache, length = torch.zeros(4, 2).as_subclass(NoClone), torch.tensor(0)
    out = accuracy.checked(gm, gm, records.append)(torch.ones(2), cache, length)
    (r,) = records
    assert "copying its inputs" in r["skipped"] and "OutOfMemoryError" in r["skipped"], r
    assert length.item() == 1 and out.tolist() == [2.0, 2.0]
