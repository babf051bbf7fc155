"""Graph reduction and candidate code generation on a real captured graph (no compiling)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tuidebug.minify.codegen import ReproInfo, cache_key, render, value_code
from tuidebug.minify.program import Reducer, Spec, Unsupported
from tuidebug.minify.source import load_failure, regions


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
        "import tuidebug.minify.cli, tuidebug.minify.pool, tuidebug.minify.bisection\n"
        f"f = load_failure({str(bug_traces['compile_error'])!r})\n"
        "r = Reducer(f.graph, f.flags)\n"
        "render(r.build(r.full_spec()), ReproInfo())\n"
        "regions(f, set(r.units))\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n")
    proc = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
