"""compat reads what a hooked Inductor call was about from its arguments: the positions and names
it assumes must be those of the installed torch (a signature that moved fails here, by name,
instead of breaking a capture), and a call made with keywords reads the same as a positional one."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from tuidebug.compiler import compat

pytestmark = pytest.mark.slow  # runs torch's compiler internals in this process


@pytest.fixture(autouse=True, scope="module")
def _inductor() -> None:
    """Inductor imported when these tests run, not when they are collected (every pytest-xdist
    worker collects every file)."""
    compat.import_inductor()


def _signature(dotted: str) -> inspect.Signature:
    owner, name = compat.lookup._resolve(dotted)
    return inspect.signature(getattr(owner, name))  # a classmethod's comes bound (no cls)


def _positional(sig: inspect.Signature, values: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return sig.bind_partial(**values).args, {}


def _keywords(sig: inspect.Signature, values: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``self`` (or the first parameter of a method) stays positional; the rest by name."""
    first = next(iter(sig.parameters))
    args = (values[first],) if first == "self" else ()
    return args, {k: v for k, v in values.items() if k != "self" or first != "self"}


class _Node:
    def __init__(self, name: str) -> None:
        self.name = name

    def get_name(self) -> str:
        return self.name


# hook point, the arguments of a call by parameter name, what compat reads from it, expected
CASES = [
    (compat.COMPILE_FX, {"model_": "GM", "example_inputs_": [1]},
     compat.compile_fx_call, ("GM", [1])),
    (compat.PRE_GRAD_PASSES, {"gm": "GM", "example_inputs": []}, compat.stage_fn_graph, "GM"),
    (compat.JOINT_GRAPH_PASSES, {"gm": "GM"}, compat.stage_fn_graph, "GM"),
    (compat.POST_GRAD_PASSES, {"gm": "GM", "is_inference": True}, compat.stage_fn_graph, "GM"),
    (compat.CODEGEN_AND_COMPILE, {"self": None, "gm": "GM", "example_inputs": [],
                                  "inputs_to_check": [], "graph_kwargs": {"is_backward": True}},
     compat.codegen_call, ("GM", "backward")),
    (compat.CAN_FUSE, {"self": None, "node1": _Node("buf0"), "node2": _Node("buf1")},
     compat.fusion_pair_names, ("buf0", "buf1")),
    (compat.FUSE_TWO_NODES, {"self": None, "node1": _Node("buf0"), "node2": _Node("buf1"),
                             "fused_nodes": set()},
     compat.fusion_pair_names, ("buf0", "buf1")),
    (compat.CPP_BUILD, {"lock_path": "l", "cpp_builders": []}, compat.cpp_build_call, None),
    (compat.CUDAGRAPH_SKIP, {"msg": "skipping cudagraphs"}, compat.cudagraph_skip_reason,
     "skipping cudagraphs"),
    (compat.IR_PRE_FUSION, {"nodes": []}, compat.logged_scheduler_nodes, ([], "\n")),
    (compat.BENCHMARK_CHOICE, {"choice": "C", "autotune_args": None},
     compat.autotune_step_choice, "C"),
]


@pytest.mark.parametrize("hook,values,read,expected", CASES, ids=[c[0].rsplit(".", 1)[-1] for c in CASES])
def test_call_data_matches_this_torch(hook: str, values: dict[str, Any], read: Any,
                                      expected: Any) -> None:
    sig = _signature(hook)
    assert set(values) <= set(sig.parameters), (hook, list(sig.parameters))
    for how in (_positional, _keywords):
        args, kwargs = how(sig, values)
        sig.bind(*args, **kwargs)  # a call this torch accepts
        assert read(args, kwargs) == expected, (hook, how.__name__)


def test_provenance_and_triton_compile_calls() -> None:
    sig = _signature(compat.KERNEL_PROVENANCE)
    values = {"node_schedule": [], "kernel_name": "cpp_fused_0", "is_extern": False}
    for how in (_positional, _keywords):
        args, kwargs = how(sig, values)
        sig.bind(*args, **kwargs)
        assert compat.kernel_provenance(args, kwargs, 3) == ("cpp_fused_0:3", {
            "kernel": "cpp_fused_0", "extern": False, "ir_nodes": [], "fx_nodes": [],
            "stack_traces": []})
    try:
        sig = _signature(compat.TRITON_COMPILE_METRIC)
    except compat.NotAvailable:
        pytest.skip(f"{compat.TRITON_COMPILE_METRIC} is not in this torch")
    args, kwargs = _positional(sig, {"kernel_name": "triton_poi_0", "info": {"compile_time_us": 2500}})
    assert compat.triton_compile_call(args, kwargs) == ("triton_poi_0", 0.0025)


def test_why_no_fuse_reason_is_formatted() -> None:
    from torch._inductor.scheduler import WhyNoFuse

    why = WhyNoFuse(_Node("buf0"), _Node("buf1"))
    assert compat.why_no_fuse_call((why, "%s too big (%d)", "tile", 3), {}) == (
        "buf0", "buf1", "tile too big (3)")
    assert compat.why_no_fuse_call((why, "no shared data"), {}) == ("buf0", "buf1", "no shared data")


def _function(name: str, module: str) -> Any:
    """An autograd Function class named ``name``, defined (as far as it says) in ``module``."""
    import torch

    def forward(ctx: Any, t: torch.Tensor) -> torch.Tensor:
        return t * 3

    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return g * 3
    return type(name, (torch.autograd.Function,), {
        "forward": staticmethod(forward), "backward": staticmethod(backward),
        "__module__": module, "__qualname__": name})


def test_the_compiled_backward_node_is_found_by_its_function_not_its_name() -> None:
    """The node ``--profile`` hooks to time a compiled backward: AOTAutograd's
    ``CompiledFunction`` behind a compiled graph's outputs (through a view of one), and none
    behind plain autograd — even a user's own function of that name (None: no compiled
    backward behind them)."""
    import torch

    x = torch.randn(4, requires_grad=True)
    out = torch.compile(lambda t: (t * 2).sin(), backend="aot_eager")(x)
    node = compat.compiled_backward_node([out[1:].grad_fn])
    assert node is not None and compat.is_compiled_backward(node)
    assert node.name() == "CompiledFunctionBackward"

    own = _function("CompiledFunction", __name__).apply(x)  # the user's: not AOTAutograd's
    assert "CompiledFunction" in own.grad_fn.name()  # what the old substring test matched
    assert compat.compiled_backward_node([own.grad_fn, (x * 2).grad_fn]) is None


def test_an_earlier_graphs_backward_node_is_not_this_graphs() -> None:
    """A graph whose output is a view of its input, that input made by another compiled graph:
    the output leads to the earlier graph's ``CompiledFunction`` node; given the inputs' nodes,
    it is not taken for this graph's (its backward was timed as both graphs', hooked twice)."""
    import torch

    x = torch.randn(3, 4, requires_grad=True)
    first = torch.compile(lambda t: (t * 2).sin(), backend="aot_eager")(x)
    view = torch.compile(lambda t, y: (t.t(), y * 2), backend="aot_eager")(first, torch.randn(3))[0]
    earlier = compat.compiled_backward_node([first.grad_fn])
    assert earlier is not None and compat.is_compiled_backward(earlier)
    assert compat.compiled_backward_node([view.grad_fn]) is earlier  # without the inputs
    assert compat.compiled_backward_node([view.grad_fn], inputs=[first.grad_fn]) is None
    again = torch.compile(lambda t: (t * 3).cos(), backend="aot_eager")(first)
    mine = compat.compiled_backward_node([again.grad_fn], inputs=[first.grad_fn])
    assert mine is not None and mine is not earlier and compat.is_compiled_backward(mine)


def test_the_compiled_backward_node_is_feature_detected(monkeypatch: pytest.MonkeyPatch) -> None:
    """AOTAutograd's ``CompiledFunction`` is recognised in whichever module of
    ``torch._functorch`` defines it (a class of that name defined in another module of it, as
    a torch that moved the factory would). A compiled graph whose outputs that require grad
    are views of its inputs (``x.t()``) has no compiled backward to time: None, also as the
    process's first compile (it was "not available in torch 2.13", written into the manifest's
    not_available). "Not available" is said only where no module of AOTAutograd's runtime
    defines the class."""
    import torch

    from tuidebug.compiler.compat import compiled_backward

    x = torch.randn(3, 4, requires_grad=True)
    a, b = torch.compile(lambda x, y: (x.t(), y * 2), backend="aot_eager")(x, torch.randn(3))
    assert a.requires_grad and not b.requires_grad and a.grad_fn is not None
    assert compat.compiled_backward_node([a.grad_fn]) is None  # the input's view: no backward
    assert compat.compiled_backward_node([(x * 2).grad_fn]) is None  # plain autograd
    assert compat.compiled_backward_node([]) is None  # no output requires grad

    moved = _function("CompiledFunction", "torch._functorch._aot_autograd.somewhere_else")
    node = compat.compiled_backward_node([moved.apply(x).grad_fn])
    assert node is not None and compat.is_compiled_backward(node)
    user = _function("CompiledFunction", "my_project.functions")  # the user's: not AOT's
    assert not compat.is_compiled_backward(user.apply(x).grad_fn)

    assert compiled_backward.available()  # read from this torch's AOTAutograd runtime
    # the known module gone, the runtime package kept: found by scanning the package's modules
    monkeypatch.setattr(compiled_backward, "_KNOWN", "torch._functorch._aot_autograd.gone")
    compiled_backward.available.cache_clear()
    try:
        assert compiled_backward.available(), "the scan of the runtime package found nothing"
    finally:
        monkeypatch.undo()
        compiled_backward.available.cache_clear()
    monkeypatch.setattr(compiled_backward, "_KNOWN", "torch._functorch._aot_autograd.gone")
    monkeypatch.setattr(compiled_backward, "_RUNTIME", "torch._functorch.gone")
    compiled_backward.available.cache_clear()  # as a torch whose AOTAutograd moved elsewhere
    try:
        assert not compiled_backward.available()
        with pytest.raises(compat.NotAvailable, match=r"CompiledFunction .*not available in torch"):
            compat.compiled_backward_node([user.apply(x).grad_fn, (x * 2).grad_fn])
    finally:
        monkeypatch.undo()
        compiled_backward.available.cache_clear()


def test_a_compiled_function_built_in_a_static_method_is_found() -> None:
    """torch 2.11 builds ``CompiledFunction`` inside the static method
    ``AOTDispatchAutograd.post_compile`` (2.13 in an ordinary method): the detector reads the
    code a ``staticmethod`` or ``classmethod`` wraps too. Before, a 2.11 run recorded the
    compiled backward as not available and timed every backward as one lump (the H100's
    ``test_the_whole_training_step_against_eager``)."""
    import types

    from tuidebug.compiler.compat import compiled_backward

    source = (
        "class AOTDispatchAutograd:\n"
        "    @staticmethod\n"
        "    def post_compile(fw, bw):\n"
        "        class CompiledFunction:\n"
        "            pass\n"
        "        return CompiledFunction\n"
        "class Other:\n"
        "    @classmethod\n"
        "    def build(cls):\n"
        "        class Helper:\n"
        "            pass\n"
        "        return Helper\n")
    for name, expect in (("CompiledFunction", True), ("Helper", True), ("Absent", False)):
        module = types.ModuleType("torch._functorch._aot_autograd.like_2_11")
        exec(compile(source, module.__name__, "exec"), module.__dict__)  # noqa: S102 — our text
        assert compiled_backward._module_defines(module, name) is expect, name
