"""judge.KeptWide, the float64 reference's rule, on plain torch calls (no compile): it never
changes what the rest of the process sees, keeps eager's aliasing, writes in place where ATen's
in-place overloads write, and says which random ops drew."""

from __future__ import annotations

import sys
import threading

import torch

from tuidebug.compiler.judge import KeptWide


def test_another_thread_creating_tensors_meanwhile_sees_only_float32() -> None:
    seen: list[torch.dtype] = []
    done = threading.Event()

    def other() -> None:  # a data loader or logger of the user's, busy while the check runs
        while not done.is_set():
            seen.append(torch.ones(1).dtype)
            seen.append((torch.arange(3) * 0.5).dtype)

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    thread = threading.Thread(target=other)
    made: list[torch.dtype] = []
    try:
        thread.start()
        with KeptWide():
            for _ in range(3000):
                made.append((torch.ones(4) * torch.arange(4) * 0.5).dtype)
    finally:
        done.set()
        thread.join()
        sys.setswitchinterval(before)
    assert len(seen) > 10 and len(made) == 3000
    assert set(made) == {torch.float64}  # the reference's own factories are float64
    assert set(seen) == {torch.float32}
    assert torch.get_default_dtype() == torch.float32


def test_what_the_default_dtype_makes_is_made_in_float64() -> None:
    with KeptWide():
        tenth = torch.tensor([0.1])
        steps = torch.arange(0, 1, 0.1)
        halves = torch.arange(5) * 0.1
        ints = torch.arange(5)
    assert tenth.dtype == steps.dtype == halves.dtype == torch.float64
    assert tenth.item() == 0.1  # made in float64, not float32's 0.1 widened
    assert torch.equal(steps, torch.arange(0, 1, 0.1, dtype=torch.float64))
    assert torch.equal(halves, torch.arange(5, dtype=torch.float64) * 0.1)
    assert ints.dtype == torch.int64


def test_a_cast_to_float_of_a_float64_tensor_is_the_tensor_itself() -> None:
    x = torch.arange(4, dtype=torch.float64)  # float32 in eager: x.float() is x there too
    with KeptWide():
        y = x.float()
        y.mul_(2)
    assert y.data_ptr() == x.data_ptr()
    assert torch.equal(x, torch.arange(4, dtype=torch.float64) * 2)  # the write reached x


def test_an_aten_in_place_overload_writes_into_its_argument() -> None:
    held = torch.zeros(3)  # a float32 buffer the graph holds and writes into
    with KeptWide():
        torch.ops.aten.add_.Tensor(held, torch.ones(3, dtype=torch.float64))
        torch.ops.aten.mul_.Tensor(held, 3.0)
    assert held.dtype == torch.float32
    assert torch.equal(held, torch.full((3,), 3.0))


def test_random_draws_are_told_and_are_eager_numbers() -> None:
    torch.manual_seed(0)
    eager = torch.rand(5)
    torch.manual_seed(0)
    mode = KeptWide()
    with mode:
        drawn = torch.rand(5)
        torch.nn.functional.dropout(torch.ones(3, dtype=torch.float64), p=0.0)
    assert mode.drew == {"rand"}  # dropout with p == 0 draws nothing
    assert drawn.dtype == torch.float64 and torch.equal(drawn, eager.double())
    quiet = KeptWide()
    with quiet:
        torch.ops.aten.native_dropout.default(torch.ones(3, dtype=torch.float64), 0.5, True)
    assert quiet.drew == {"native_dropout"}


def test_values_computed_from_a_narrower_one_are_told_apart() -> None:
    """What repro.py and the trace's check both use to judge such an output against eager only:
    a float32 buffer written in place stays float32; what is computed from it is no float64
    reference, what is not is one."""
    held = torch.zeros(3)
    x = torch.arange(3, dtype=torch.float64)
    mode = KeptWide()
    with mode:
        torch.ops.aten.add_.Tensor(held, x)
        from_held = torch.ops.aten.mul.Tensor(held, 2.0) + x
        alone = x * 2
    notes = mode.narrow_notes((from_held, [alone, 3]))
    assert notes == ["the float64 run computed it in a narrower float at op add_", "", ""]


def test_the_kernel_reference_keeps_a_graph_wide_as_the_graph_verdict_does() -> None:
    """``tuidebug numerics``' per-node float64 values (localize) follow KeptWide: a ``dtype=``
    naming float32 on a factory of a post-grad graph is float64 there too."""
    from tuidebug.compiler import localize

    g = torch.fx.Graph()  # a post-grad graph's ops, as Inductor's FX graph holds them
    x_in = g.placeholder("x")
    cast = g.call_function(torch.ops.prims.convert_element_type.default, (x_in, torch.float32))
    tenth = g.call_function(torch.ops.aten.full.default, ([3], 0.1), {
        "dtype": torch.float32, "device": torch.device("cpu"), "pin_memory": False})
    g.output(g.call_function(torch.ops.aten.mul.Tensor, (cast, tenth)))
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    x = torch.arange(3, dtype=torch.float32)
    values, why, narrow = localize._values(gm, [x], True, lambda: None)
    names = {n.name for n in gm.graph.nodes if n.op == "call_function"}
    assert why == "" and narrow == {} and len(names) == 3 and names <= set(values)
    full, mul = (next(v for k, v in values.items() if k.startswith(p)) for p in ("full", "mul"))
    assert full.dtype == mul.dtype == torch.float64
    assert torch.equal(mul, x.double() * 0.1)
    eager, _, _ = localize._values(gm, [x], False, lambda: None)
    assert next(v for k, v in eager.items() if k.startswith("mul")).dtype == torch.float32


def test_a_draw_given_dtype_float32_draws_eagers_numbers() -> None:
    """A post-grad graph always passes ``dtype=``: ``aten.rand.default([4], dtype=float32)``
    widened to float64 drew other numbers than eager."""
    torch.manual_seed(0)
    eager = torch.ops.aten.rand.default([4], dtype=torch.float32)
    torch.manual_seed(0)
    mode = KeptWide()
    with mode:
        drawn = torch.ops.aten.rand.default([4], dtype=torch.float32)
        plain = torch.rand(4, dtype=torch.float32)
    assert mode.drew == {"rand"}
    assert drawn.dtype == plain.dtype == torch.float64
    assert torch.equal(drawn, eager.double())
    torch.manual_seed(0)
    torch.rand(4)
    assert torch.equal(plain, torch.rand(4).double())


def test_a_node_computed_narrow_is_no_kernels_float64_reference() -> None:
    """``tuidebug numerics`` judged a kernel against a node's "float64" value still computed in
    float32 (a held float32 buffer written in place, then read): a kernel could read FIRST
    DIVERGING against float32 arithmetic. Such a node has no float64 value, and says why; one
    not computed from it keeps its reference. A float64 run that drew has none (RANDOM_WHY)."""
    from tuidebug.compiler import judge, localize

    root = torch.nn.Module()
    root.register_buffer("held", torch.zeros(3))
    g = torch.fx.Graph()
    x = g.placeholder("x")
    held = g.get_attr("held")
    g.call_function(torch.ops.aten.add_.Tensor, (held, x))
    from_held = g.call_function(torch.ops.aten.mul.Tensor, (held, 2.0))
    alone = g.call_function(torch.ops.aten.mul.Tensor, (x, 3.0))
    g.output((from_held, alone))
    gm = torch.fx.GraphModule(root, g)
    values, why, narrow = localize._values(gm, [torch.arange(3.0)], True, lambda: None)
    assert why == "" and narrow, narrow
    assert narrow[from_held.name] == ("the float64 run computed it in a narrower float at "
                                      "op add_"), narrow
    assert from_held.name not in values and values[alone.name].dtype == torch.float64

    r = torch.fx.Graph()
    y = r.placeholder("y")
    drawn = r.call_function(torch.ops.aten.rand.default, ([3],), {"dtype": torch.float32})
    r.output(r.call_function(torch.ops.aten.add.Tensor, (y, drawn)))
    rm = torch.fx.GraphModule(torch.nn.Module(), r)
    values, why, _ = localize._values(rm, [torch.zeros(3)], True, lambda: None)
    assert values == {} and why == judge.RANDOM_WHY


def test_dtype_none_is_no_dtype_given_and_a_narrow_cast_of_ints_is_told() -> None:
    """``torch.ones(3, dtype=None)`` stayed float32 and unrecorded (``dtype`` was among the
    keywords); ``ints.type(torch.FloatTensor)`` computed in float32, unrecorded (no float
    among its inputs)."""
    said: list[bool] = []

    class Told(KeptWide):
        def met(self, cast):
            said.append(cast)

    mode = Told()
    with mode:
        ones = torch.ones(3, dtype=None)
        tenth = torch.full((2,), 0.1, dtype=None)
        cast = torch.arange(3).type(torch.FloatTensor)
    assert ones.dtype == tenth.dtype == torch.float64
    assert torch.equal(tenth, torch.full((2,), 0.1, dtype=torch.float64))
    assert cast.dtype == torch.float32 and mode.narrow_at(cast) == "op type", mode.narrow_at(cast)
    assert said == [False], said


def test_a_cast_to_float_copies_where_eager_copies() -> None:
    """A bfloat16 model's ``y = x.float(); y.mul_(2)``: eager's ``x.float()`` is a copy, the
    reference's returned ``x`` itself and the write changed ``x``. The eager dtype rides on
    the upcast inputs and on what is computed from them."""
    from tuidebug.compiler.judge import upcast

    x = upcast(torch.ones(3, dtype=torch.bfloat16))
    f32 = upcast(torch.ones(3))
    with KeptWide():
        y = x.float()
        y.mul_(2)
        z = (x * 3).float()
        z.add_(1)
        same = f32.float()
        same.mul_(5)
        as_bf16 = x.bfloat16()
    assert y.dtype == torch.float64 and y.data_ptr() != x.data_ptr()
    assert torch.equal(x, torch.ones(3, dtype=torch.float64))  # eager's x untouched
    assert torch.equal(z, torch.full((3,), 4.0, dtype=torch.float64))
    assert same.data_ptr() == f32.data_ptr() and torch.equal(f32, torch.full((3,), 5.0,
                                                                             dtype=torch.float64))
    assert as_bf16 is x  # eager's x.bfloat16() of a bfloat16 x: x itself
