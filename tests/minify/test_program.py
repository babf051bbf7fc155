"""Graph reduction and candidate code generation on a real captured graph (no compiling)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tuidebug.minify.codegen import ReproInfo, cache_key, render, value_code
from tuidebug.minify.program import (Reducer, Spec, Unsupported, contiguous_stride,
                                     dense_stride_like)
from tuidebug.minify.source import load_failure, regions
from tuidebug.trace.format.error_record import ErrorRecord
from tuidebug.trace.format.graph import Graph, Node


@pytest.fixture(scope="module")
def failure(bug_traces: dict[str, Path]):
    return load_failure(bug_traces["runtime_error"])


def test_failure_is_read_from_the_aten_snapshot(failure) -> None:
    assert failure.stage.name == "aot_inference"
    assert failure.signature.kind == "runtime"
    # the flag the bug needs; tuidebug's own capture settings are not repro flags
    assert failure.flags["cpp.inject_relu_bug_TESTING_ONLY"] == "runtime_error"
    assert "trace.provenance_tracking_level" not in failure.flags


def test_removed_producers_become_inputs_with_their_meta(failure) -> None:
    red = Reducer(failure.graph, failure.flags)
    assert red.compute_count >= 50
    prog = red.build(Spec(frozenset({"relu"}), frozenset(failure.flags)))
    assert prog is not None and [o.target for o in prog.ops] == ["aten.relu.default"]
    (inp,) = prog.inputs
    producer = failure.graph.get(failure.graph.get("relu").inputs[0])
    assert (list(inp.shape), list(inp.stride), inp.dtype) == (
        producer.tensor["shape"], producer.tensor["stride"], producer.tensor["dtype"])
    assert prog.outputs == ["relu"]
    # a tuple-valued node brings its getitems along; nothing is left dangling
    prog = red.build(Spec(frozenset({"var_mean"}), frozenset()))
    assert prog is not None
    assert {o.target for o in prog.ops} == {"aten.var_mean.correction", "operator.getitem"}


def test_region_comes_from_the_failing_kernels_provenance(failure) -> None:
    red = Reducer(failure.graph, failure.flags)
    regs = regions(failure, set(red.units))
    assert regs and "relu" in regs[0] and len(regs[0]) < len(red.units) // 4


def test_structurally_equal_candidates_share_a_cache_key(failure) -> None:
    red = Reducer(failure.graph, failure.flags)
    info = ReproInfo(kind="runtime", type="builtins.RuntimeError")
    flags = frozenset(failure.flags)
    k0 = cache_key(red.build(Spec(frozenset({"relu"}), flags)), info)
    k1 = cache_key(red.build(Spec(frozenset({"relu_1"}), flags)), info)
    k2 = cache_key(red.build(Spec(frozenset({"tanh"}), flags)), info)
    assert k0 == k1 != k2


def test_generated_code_is_valid_and_takes_no_code_from_the_trace(failure) -> None:
    red = Reducer(failure.graph, failure.flags)
    text = render(red.build(red.full_spec()), ReproInfo(kind="runtime", type="x"))
    ast.parse(text)
    assert "torch.ops.aten.addmm.default(" in text
    with pytest.raises(Unsupported):
        value_code({"repr": "__import__('os').system('echo pwned')"}, {})
    with pytest.raises(Unsupported):
        value_code({"repr": "torch.float32; import os"}, {})
    assert value_code({"repr": "cpu"}, {}) == "torch.device('cpu')"


def test_the_minifier_process_never_imports_torch(bug_traces: dict[str, Path]) -> None:
    """Only the worker processes import torch; the parent stays light (and so does the TUI)."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    code = (
        "import sys\n"
        "from tuidebug.minify import minify\n"
        "from tuidebug.minify.minifier import Minifier\n"
        "from tuidebug.minify.source import load_failure, regions\n"
        "from tuidebug.minify.codegen import render, ReproInfo\n"
        "from tuidebug.minify.program import Reducer\n"
        "import tuidebug.cli.minifying, tuidebug.minify.pool, tuidebug.minify.bisection\n"
        f"f = load_failure({str(bug_traces['compile_error'])!r})\n"
        "r = Reducer(f.graph, f.flags)\n"
        "render(r.build(r.full_spec()), ReproInfo())\n"
        "regions(f, set(r.units))\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n")
    proc = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_input_sizes_shrink_in_every_input_at_once_and_values_can_be_constant(failure) -> None:
    red = Reducer(failure.graph, failure.flags)
    spec = Spec(frozenset({"addmm"}), frozenset())
    assert red.shrinkable_sizes(spec) == [32, 16]
    # addmm(bias [32], x [16, 32], weight.T [32, 32]): size 32 goes in all three, so they agree
    prog = red.build(spec.with_(shrunk={32}))
    assert [(i.shape, i.stride) for i in prog.inputs] == [((1,), (1,)), ((16, 1), (1, 1)),
                                                          ((1, 1), (1, 1))]
    assert red.shrinkable_sizes(spec.with_(shrunk={32})) == [16]
    # a transposed input keeps its dimension order when it shrinks
    assert dense_stride_like((4, 1), (1, 32)) == (1, 4)
    assert dense_stride_like((4, 8), (8, 1)) == contiguous_stride((4, 8))
    # random values -> all zeros: rendered into INPUTS, and the input is no longer random
    filled = spec.with_(fill={("arg2_1", "zeros")})
    assert red.random_inputs(filled) == ["arg1_1", "permute"]
    text = render(red.build(filled), ReproInfo(kind="runtime", type="RuntimeError"))
    assert "((16, 32), (32, 1), torch.float32, 'cpu', 'zeros')," in text
    assert cache_key(red.build(filled), ReproInfo()) != cache_key(red.build(spec), ReproInfo())


def test_int_and_float_scalar_constants_become_one_but_bools_stay() -> None:
    meta = {"dtype": "float32", "shape": [4, 8], "stride": [8, 1], "device": "cpu"}
    g = Graph([Node("x", "placeholder", "x", tensor=meta),
               Node("pow", "call_function", "aten.pow.Tensor_Scalar", [{"node": "x"}, 3],
                    inputs=["x"], tensor=meta),
               Node("add", "call_function", "aten.add.Tensor", [{"node": "pow"}, 2.5],
                    {"alpha": 2}, inputs=["pow"], tensor=meta),
               Node("cumsum", "call_function", "aten.cumsum.default", [{"node": "add"}, 1],
                    inputs=["add"], tensor=meta),
               Node("any", "call_function", "aten.any.dim", [{"node": "cumsum"}, 0, True],
                    inputs=["cumsum"], tensor=meta),
               Node("output", "output", "output", [[{"node": "any"}]])])
    red = Reducer(g, {})
    spec = red.full_spec()
    consts = red.simplifiable_constants(spec)
    assert consts == [("pow", "args.1"), ("add", "args.1"), ("add", "kwargs.alpha")]
    prog = red.build(spec.with_(constants=consts))
    ops = {o.name: o for o in prog.ops}
    assert ops["pow"].args[1] == 1 and isinstance(ops["pow"].args[1], int)
    assert ops["add"].args[1] == 1.0 and isinstance(ops["add"].args[1], float)
    assert ops["add"].kwargs == {"alpha": 1} and ops["any"].args[1:] == [0, True]
    assert red.simplifiable_constants(spec.with_(constants=consts)) == []


def _repro_module(text: str, path: Path):
    import importlib.util

    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines; main() runs only as a script
    return module


def test_repro_checks_the_signature_normalized_as_tuidebug_does(
        bug_traces: dict[str, Path], tmp_path: Path) -> None:
    """The repro's own check (torch + stdlib only) agrees with signature.py on real failures:
    the same failure with run-to-run noise matches; another error of the same type does not."""
    import json
    import re

    from tuidebug.minify.signature import Signature

    errors = {bug: json.loads((t / "manifest.json").read_text())["error"]
              for bug, t in bug_traces.items()}
    ce = errors["compile_error"]["message"]
    results = [
        {"kind": "compile", "type": "torch._inductor.exc.CppCompileError", "message": ce},
        {"kind": "compile", "type": "torch._inductor.exc.CppCompileError",
         "message": re.sub(r"\.cpp:\d+:\d+:", ".cpp:7:2:", ce).replace("/tmp/", "/var/t/")},
        {"kind": "compile", "type": "torch._inductor.exc.CppCompileError",
         "message": ce.replace("‘compile’ was not declared in this scope",
                               "expected ‘;’ before ‘}’ token")},
        {"kind": "runtime", "type": "builtins.RuntimeError", "message": "unhandled error"},
        {"kind": "runtime", "type": "builtins.RuntimeError",
         "message": "index 40 is out of bounds for dimension 0 with size 32"},
        {"kind": "runtime", "type": "builtins.ValueError", "message": "unhandled error"},
        {"kind": "accuracy", "type": "AccuracyMismatch", "message": "max abs error 3"},
    ]
    red = Reducer(Graph.from_json({"nodes": [
        {"name": "x", "op": "placeholder", "target": "x",
         "tensor": {"dtype": "float32", "shape": [2], "stride": [1], "device": "cpu"}},
        {"name": "relu", "op": "call_function", "target": "aten.relu.default",
         "args": [{"node": "x"}], "inputs": ["x"],
         "tensor": {"dtype": "float32", "shape": [2], "stride": [1], "device": "cpu"}},
        {"name": "output", "op": "output", "target": "output", "args": [[{"node": "relu"}]]}]}),
        {})
    prog = red.build(red.full_spec())
    records = {bug: ErrorRecord.from_json(err) for bug, err in errors.items()}
    sigs = {bug: Signature.from_trace_error(e) for bug, e in records.items() if e is not None}
    assert len(sigs) == len(errors)
    # a message whose numbers, address and path change from run to run
    sigs["index"] = Signature.from_error(
        "runtime", "builtins.IndexError", "index 40 is out of bounds for size 32 (0x7f3a, /a/b.py)")
    results.append({"kind": "runtime", "type": "builtins.IndexError",
                    "message": "index 41 is out of bounds for size 64 (0x55aa, /tmp/x/y.py)\nmore"})
    for bug, sig in sigs.items():
        info = ReproInfo(kind=sig.kind, type=sig.type, key=sig.key, diags=tuple(sig.diags))
        repro = _repro_module(render(prog, info), tmp_path / f"repro_{bug}.py")
        verdicts = [repro._same(r) for r in results]
        assert verdicts == [sig.matches(Signature.from_result({"outcome": "failed", **r}))
                            for r in results], bug
        assert sum(verdicts) == {"compile_error": 2, "runtime_error": 1, "accuracy": 1,
                                 "index": 1}[bug]


def _one_op_repro(target: str, tmp_path: Path):
    t = {"dtype": "float32", "shape": [4], "stride": [1], "device": "cpu"}
    red = Reducer(Graph.from_json({"nodes": [
        {"name": "x", "op": "placeholder", "target": "x", "tensor": t},
        {"name": "op", "op": "call_function", "target": target,
         "args": [{"node": "x"}], "inputs": ["x"], "tensor": t},
        {"name": "add", "op": "call_function", "target": "aten.add.Tensor",
         "args": [{"node": "x"}, {"node": "op"}], "inputs": ["x", "op"], "tensor": t},
        {"name": "output", "op": "output", "target": "output", "args": [[{"node": "add"}]]}]}),
        {})
    info = ReproInfo(kind="accuracy", type="AccuracyMismatch")
    return _repro_module(render(red.build(red.full_spec()), info), tmp_path / "repro_acc.py")


def test_repro_has_no_float64_reference_for_a_graph_that_draws(tmp_path: Path) -> None:
    """As the trace's check (accuracy.compare): a float64 run of rand_like draws other numbers
    than eager, so judging against it would be a rule the trace never used."""
    import torch

    from tuidebug.compiler.judge import RANDOM_WHY

    drawn = _one_op_repro("aten.rand_like.default", tmp_path)
    assert drawn.float64_reference() == (None, RANDOM_WHY, None)
    plain = _one_op_repro("aten.relu.default", tmp_path)
    reference, why, notes = plain.float64_reference()
    (out,) = reference
    assert why == "" and notes == [""] and out.dtype == torch.float64
    x = plain.make_inputs()[0].double()
    assert torch.equal(out, x + x.relu())
    # standalone: nothing of tuidebug's is named in its code (the judge's tail is copied in)
    code = (tmp_path / "repro_acc.py").read_text()
    assert "tuidebug" not in "\n".join(ln for ln in code.splitlines()
                                       if not ln.lstrip().startswith("#")), code
