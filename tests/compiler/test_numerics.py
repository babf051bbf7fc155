"""Numerics of a compile: the gradients judged as the outputs are, against float64, and named
(tuidebug/compiler/gradients.py); on a mismatch, the first kernel whose output departs from
float64 by more than eager's (tuidebug/compiler/localize.py, trace/queries/numerics.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import ROOT, pythonpath
from tuidebug.compiler.compat.source_names import placeholder_name, source_name, source_names
from tuidebug.compiler.wrapper_writes import call_sites
from tuidebug.trace.format.reader import Trace

MODELS = Path(__file__).with_name("numerics_models.py")


def test_inputs_are_named_as_the_user_names_them() -> None:
    assert source_name("L['self']._modules['layers']._modules['0']._modules['fc1']"
                       "._parameters['weight']") == "layers.0.fc1.weight"
    assert source_name("L['x']") == "x" and source_name("L['past'][0]") == "past[0]"
    assert source_name("L['self'].scale") == "scale"
    assert source_name("GetItemSource(x)") is None and source_name(None) is None
    assert placeholder_name("l_self_modules_fc1_parameters_weight_") == "fc1.weight"
    assert placeholder_name("l_x_") == "x" and placeholder_name("primals_1") == "primals_1"


def test_a_compiled_torch_module_names_its_parameters_as_named_parameters_does() -> None:
    """``torch.compile(nn.Sequential(...))`` traces Dynamo's ``inner(*args, **kwargs)`` around
    the forward (torch 2.13): the sources are ``L['fn']…`` and ``L['args'][0]``; a parameter is
    ``0.weight``, as ``model.named_parameters()`` names it (it read ``fn.0.weight.grad``)."""
    sources = ["L['fn']._modules['0']._parameters['weight']",
               "L['fn']._modules['0']._parameters['bias']", "L['args'][0]"]
    assert source_names(sources) == ["0.weight", "0.bias", "args[0]"]
    # a function of the user's own with a local module named fn keeps the name
    own = ["L['fn']._modules['0']._parameters['weight']", "L['x']"]
    assert source_names(own) == ["fn.0.weight", "x"]


def test_outputs_are_named_by_where_the_call_returns_them() -> None:
    """A graph's flat outputs found by identity in what the user's call returned: a
    ``ModelOutput``'s fields, a cache's layers, a dict's keys; an output held only by position
    (a plain tuple) or not returned at all keeps the graph's own name."""
    import torch
    from transformers import DynamicCache
    from transformers.modeling_outputs import CausalLMOutputWithPast

    from tuidebug.compiler.output_paths import output_names, rename_outputs

    loss, logits, k, v, hidden = (torch.randn(1, 2, 3, 4) for _ in range(5))
    cache = DynamicCache()
    cache.update(k, v, 0)
    returned = CausalLMOutputWithPast(loss=loss, logits=logits, past_key_values=cache)
    graph_outputs = [cache.layers[0].keys, cache.layers[0].values, loss, logits, hidden]
    names = output_names(graph_outputs, returned)
    assert names == {0: "past_key_values.layers[0].keys", 1: "past_key_values.layers[0].values",
                     2: "loss", 3: "logits"}, names
    assert output_names([loss, logits], {"out": [loss], "x": 1}) == {0: "['out'][0]"}
    assert output_names([loss, logits], (loss, logits)) == {}  # positions say nothing more
    check = {"outputs": [{"index": 0, "name": "output 0"}, {"index": 3, "name": "logits"}],
             "detail": "output 0: RMSE vs float64: compiled 1 > 3 x eager 0.1 + 1e-05"}
    assert rename_outputs(check, names) is True
    assert [o["name"] for o in check["outputs"]] == ["past_key_values.layers[0].keys", "logits"]
    assert check["detail"].startswith("past_key_values.layers[0].keys: RMSE"), check
    assert rename_outputs(check, names) is False  # named already: nothing to write again


WRAPPER = """
def call(self, args):
        arg0_1, arg1_1, arg2_1 = args
        args.clear()
        buf0 = empty_strided_cpu((16, 32), (32, 1), torch.float32)
        extern_kernels.addmm(arg1_1, arg2_1, reinterpret_tensor(arg0_1, (32, 32), (1, 32), 0), alpha=1, beta=1, out=buf0)
        buf1 = empty_strided_cpu((16, 1), (1, 16), torch.float32)
        buf2 = buf1; del buf1  # reuse
        buf4 = buf0; del buf0  # reuse
        cpp_fused_relu_0(buf2, buf4, arg2_1)
        buf5 = empty_strided_cpu((16, 32), (32, 1), torch.float32)
        extern_kernels.addmm(arg1_1, buf4, arg0_1, out=buf5)
        cpp_fused_relu_1(buf4, buf5, buf7)
        triton_poi_fused_2.run(buf7, buf8, 512, stream=stream0)
        return (buf8, )
"""


def test_the_buffers_a_kernel_call_writes_are_read_from_the_wrapper() -> None:
    """A name first seen in a call is written there (reuse renames a buffer: buf4 is written
    in place by the first relu kernel); an extern kernel's output is an input of its reader."""
    sites = call_sites(WRAPPER, {"cpp_fused_relu_0", "cpp_fused_relu_1", "triton_poi_fused_2"})
    assert [(s.kernel, s.writes) for s in sites] == [
        ("cpp_fused_relu_0", [0, 1]), ("cpp_fused_relu_1", [2]), ("triton_poi_fused_2", [1])]
    assert sites[2].args == ["buf7", "buf8", "512", "stream=stream0"]


# an embedding's backward, as Inductor compiled it for BERT under bf16 autocast (trimmed): the
# first kernel fills buf127 with zeros, a later one accumulates into it (an out pointer of a
# buffer seen before); buf9, written by the first kernel, is written again by an extern mm
ACCUMULATE = """
cpp_fused_embedding_dense_backward_1 = async_compile.cpp_pybinding(['at::BFloat16*', 'const at::BFloat16*', 'float*', 'float*', 'float*'], r'''
extern "C"  void  kernel(at::BFloat16* in_out_ptr0, const at::BFloat16* in_ptr0, float* out_ptr0,
                       float* out_ptr1, float* out_ptr2)
''')
triton_poi_fused_index_put_2 = async_compile.triton('triton_poi_fused_index_put_2', '''
@triton.jit
def triton_poi_fused_index_put_2(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
''', device_str='cuda')
cpp_fused_sum_3 = async_compile.cpp_pybinding(['const float*', 'float*'], r'''
''')

def call(self, args):
        primals_1, tanh, idx = args
        buf3 = empty_strided_cpu((2, 64), (64, 1), torch.bfloat16)
        extern_kernels.mm(primals_1, primals_1, out=buf3)
        buf7 = buf3; del buf3  # reuse
        buf127 = empty_strided_cpu((2, 64), (64, 1), torch.float32)
        cpp_fused_embedding_dense_backward_1(buf7, tanh, buf11, buf127, buf9)
        extern_kernels.mm(buf7, tanh, out=buf9)
        cpp_fused_sum_3(buf11, buf12)
        triton_poi_fused_index_put_2.run(idx, buf7, buf127, 128, stream=stream0)
        return (buf127, buf12, buf9)
"""


def test_a_buffer_a_later_kernel_writes_again_is_judged_after_it() -> None:
    """``tuidebug numerics`` on BERT under bf16 autocast blamed the kernel that only zeroed an
    embedding gradient's buffer (``values [0, 0], eager [-0.818, 0.789]``: 'a wrong kernel'),
    before the kernel that accumulates into it had run. A buffer is recorded after the last
    kernel whose signature writes it; one an extern call writes again is recorded nowhere; a
    buffer a later kernel only reads stays with its writer."""
    from tuidebug.compiler.wrapper_writes import written_params

    assert written_params(ACCUMULATE) == {"cpp_fused_embedding_dense_backward_1": {0, 2, 3, 4},
                                          "triton_poi_fused_index_put_2": {2},
                                          "cpp_fused_sum_3": {1}}
    sites = call_sites(ACCUMULATE, {"cpp_fused_embedding_dense_backward_1", "cpp_fused_sum_3",
                                    "triton_poi_fused_index_put_2"})
    assert [(s.kernel, [s.args[i] for i in s.writes]) for s in sites] == [
        ("cpp_fused_embedding_dense_backward_1", ["buf7", "buf11"]),
        ("cpp_fused_sum_3", ["buf12"]),
        ("triton_poi_fused_index_put_2", ["buf127"])]


@pytest.fixture(scope="module")
def numerics_traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, int, str]]:
    """mode -> (trace, exit code, what ``tuidebug trace`` printed), traced in parallel."""
    root = tmp_path_factory.mktemp("numerics")
    env = dict(os.environ, PYTHONPATH=pythonpath())

    # one correct training step, traced with --numerics: its outputs and gradients are judged
    # as without it (the same check, which --numerics extends to every kernel), so one trace
    # serves both the gradients test and the kernels test
    runs = {"backward_bug": ("backward_bug",), "pass_bug": ("pass_bug",),
            "train_numerics": ("--numerics", "train"), "random": ("--numerics", "random"),
            "hf": ("hf",)}

    def make(name: str) -> tuple[str, tuple[Path, int, str]]:
        *opts, mode = runs[name]
        proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", "trace", *opts, "-o",
                               str(root / name), str(MODELS), mode], env=env,
                              capture_output=True, text=True, cwd=ROOT, timeout=900)
        return name, (root / name, proc.returncode, proc.stdout + proc.stderr)

    with ThreadPoolExecutor(2) as ex:
        return dict(ex.map(make, runs))


def _check(trace: Path) -> dict:
    (check,) = Trace(trace).runtime["checks"].values()
    return check


@pytest.mark.slow
def test_a_correct_training_step_has_its_gradients_judged_and_matching(numerics_traces) -> None:
    """The step's loss and every parameter's gradient judged against float64, all matching,
    and the user's ``.grad`` left as eager's (with ``--numerics`` on: the kernels' replay
    beside the check leaves them too; the gradients of a trace without it are judged in the
    pass-bug and backward-bug tests)."""
    trace, rc, out = numerics_traces["train_numerics"]
    assert rc == 0, out[-3000:]
    assert "grads as eager" in out  # the user's .grad untouched by the check's backward
    check = _check(trace)
    assert check["close"] is True, check
    assert [o["name"] for o in check["outputs"]] == ["loss"]
    grads = check["gradients"]
    assert grads["close"] is True and grads["reference"] == "float64", grads
    names = [g["name"] for g in grads["outputs"]]
    assert names == ["fc1.weight.grad", "fc1.bias.grad", "fc2.weight.grad",
                     "fc2.bias.grad"], names
    for g in grads["outputs"]:
        assert g["ok"] and g["err_compiled"] is not None and g["err_eager"] is not None, g


@pytest.mark.slow
def test_a_pass_bug_is_found_through_the_gradients_not_in_a_kernel(numerics_traces) -> None:
    """A post-grad pass scales relu's backward by 1.5: the loss matches, fc1's gradients do
    not (fc2's are computed before the relu's backward and stay right). Every kernel computes
    what the (wrong) post-grad graph says: no kernel is blamed, the note says where to look."""
    trace, rc, out = numerics_traces["pass_bug"]
    check = _check(trace)
    (loss,) = check["outputs"]
    assert loss["name"] == "loss" and loss["ok"], loss
    assert check["close"] is False and check["detail"].startswith("fc1.weight.grad: RMSE"), check
    bad = {g["name"]: g for g in check["gradients"]["outputs"] if not g["ok"]}
    assert sorted(bad) == ["fc1.bias.grad", "fc1.weight.grad"], bad
    for g in bad.values():
        assert g["rule"] == "rmse-fp64" and g["err_compiled"] > 1000 * g["err_eager"], g
    error = json.loads((trace / "manifest.json").read_text())["error"]
    assert error["phase"] == "accuracy" and "fc1.weight.grad" in error["message"]
    assert "(rule rmse-fp64; max abs err 0.0238)" in error["message"], error
    said = " ".join(out.split())
    assert "MISMATCH" in said and "4 gradients judged" in said, out[-3000:]
    report = check["numerics"]
    assert report["first"] is None and "before the kernels" in report["note"], report
    kernels = [k for g in report["graphs"] for k in g["kernels"]]
    assert len(kernels) >= 4 and all(k["ok"] and k["buffers"] for k in kernels), kernels
    assert "first diverging kernel" not in said and "none diverging" in said


@pytest.mark.slow
def test_a_hugging_face_models_outputs_and_gradients_are_named(numerics_traces) -> None:
    """A tiny Llama trained one step: each judged output is named where the user finds it in
    the returned ``CausalLMOutputWithPast`` (the cache's keys and values too, which the graph
    alone could only number), each gradient by its parameter's name in the model."""
    trace, rc, out = numerics_traces["hf"]
    assert rc == 0, out[-3000:]
    check = _check(trace)
    assert check["close"] is True, check
    names = sorted(o["name"] for o in check["outputs"])
    assert names == ["logits", "loss", "past_key_values.layers[0].keys",
                     "past_key_values.layers[0].values"], names
    grads = [g["name"] for g in check["gradients"]["outputs"]]
    assert "model.layers.0.mlp.up_proj.weight.grad" in grads, grads
    assert "model.embed_tokens.weight.grad" in grads and all(g.endswith(".grad") for g in grads)
    said = " ".join(subprocess.run(
        [sys.executable, "-m", "tuidebug.cli", "info", str(trace)], capture_output=True,
        text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=pythonpath(), COLUMNS="200"),
        check=True).stdout.split())
    assert "logits float32 [1,8,64]" in said and "output 0" not in said, said


@pytest.mark.slow
def test_a_hugging_face_models_casts_are_kept_in_the_float64_reference(numerics_traces) -> None:
    """Llama casts inside its forward (rotary's ``.float()``, RMSNorm's
    ``.to(torch.float32)``, the loss's ``logits.float()``): run as it is on float64 inputs, the
    "float64" reference computed from the first norm on in float32 and the loss came back
    float32 — ``loss`` read "—", and every gradient was judged against float32 arithmetic. The
    casts are kept in float64 and named; every output and gradient has a float64 reference."""
    trace, rc, out = numerics_traces["hf"]
    assert rc == 0, out[-3000:]
    check = _check(trace)
    kept = check["kept_in_float64"]
    assert any(k.startswith("loss_utils.py:") and "logits.float()" in k for k in kept), kept
    assert any(k.startswith("modeling_llama.py:") and "torch.float32" in k for k in kept), kept
    label = (f"float64, the model's casts to a narrower float kept in float64: {kept[0]} and "
             f"{len(kept) - 1} more")
    assert check["reference"] == label and check["gradients"]["reference"] == label, check
    judged = check["outputs"] + check["gradients"]["outputs"]
    assert len(judged) > 10 and any(o["name"] == "loss" for o in judged), judged
    for o in judged:
        assert "no_fp64" not in o and o["err_eager"] > 0 and o["err_compiled"] > 0, o


def _first(trace: Path) -> dict:
    summary = json.loads(subprocess.run(
        [sys.executable, "-m", "tuidebug.cli", "info", "--json", str(trace)], capture_output=True,
        text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=pythonpath()), check=True).stdout)
    (entry,) = summary["numerics"].values()
    return entry


@pytest.mark.slow
def test_a_wrong_forward_kernel_is_named_first(accuracy_trace: Path) -> None:
    """``relu → x + 1`` in every generated relu: the first kernel of the graph is the first
    to diverge; its wrong buffer is the block's output, its line the block's return."""
    entry = _first(accuracy_trace)
    first = entry["first"]
    assert first["graph"].endswith("-inference") and "relu" in first["kernel"], first
    assert entry["kernels"][0]["kernel"] == first["kernel"] and first["call"] == 0
    assert not entry["kernels"][0]["ok"] and len(entry["kernels"]) >= 8
    (buf,) = first["buffers"]
    assert buf["err_compiled"] > 1e5 * buf["err_eager"] and buf["rule"] == "rmse-fp64", buf
    assert buf["source"]["file"].endswith("failing_compile.py"), buf
    assert buf["source"]["code"] == "return x + torch.tanh(h)" and "relu" in first["fx_nodes"]
    out = subprocess.run([sys.executable, "-m", "tuidebug.cli", "info", str(accuracy_trace)],
                         capture_output=True, text=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=pythonpath(), COLUMNS="200")).stdout
    assert f"first diverging kernel: {first['kernel']}" in out, out
    assert "failing_compile.py:42  return x + torch.tanh(h)" in out, out
    banner = out.splitlines()[1]  # right under the trace's name: a planted bug says so
    assert banner.startswith("TESTING-ONLY flag set: cpp.inject_relu_bug_TESTING_ONLY='accuracy'")


@pytest.mark.slow
def test_the_svg_draws_the_diverging_kernel_red(accuracy_trace: Path, tmp_path: Path) -> None:
    """The first diverging kernel's cluster and its wrong node: a red fill and border, and a
    line under the label saying what diverged by how much; no other kernel drawn so."""
    first = _first(accuracy_trace)["first"]
    svg = tmp_path / "k.svg"
    subprocess.run([sys.executable, "-m", "tuidebug.cli", "svg", str(accuracy_trace), "--kernels",
                    "-o", str(svg)], cwd=ROOT, env=dict(os.environ, PYTHONPATH=pythonpath()),
                   check=True, capture_output=True)
    text = svg.read_text()
    clusters = {m.group(1): (m.group(2), m.group(3)) for m in re.finditer(
        r'<title>(cluster_[^<]*)</title>.*?<path fill="([^"]*)" stroke="([^"]*)"', text, re.S)}
    assert clusters[f"cluster_{first['kernel']}"] == ("#ffcccc", "#d00000"), clusters
    others = [t for t in clusters if t.startswith("cluster_cpp") and first["kernel"] not in t]
    assert others and not any("#d00000" in clusters[t] for t in others), others
    errs = f"compiled↔fp64 {first['err_compiled']:.3g}, eager↔fp64 {first['err_eager']:.3g}"
    assert f">✗ first diverging kernel: {errs}</text>".replace("-", "&#45;") in text, errs
    (buf,) = first["buffers"]
    node = re.search(rf'<g id="node:{buf["node"]}".*?</g>', text, re.S)
    assert node and 'fill="#ffcccc"' in node.group(0) and "✗ diverges: " in node.group(0)
    assert text.count("✗ diverges") == 1 and "first diverging</text>" in text  # the legend
    assert "TESTING&#45;ONLY flag set" in text  # the planted bug, in the title


@pytest.mark.slow
def test_a_wrong_backward_kernel_is_found_through_the_gradients(numerics_traces) -> None:
    """Inductor's relu bug knob where relu is only in a custom backward: the loss matches,
    fc1's gradients do not, and the backward kernel computing relu is the first to diverge
    (every forward kernel matched)."""
    trace, rc, out = numerics_traces["backward_bug"]
    check = _check(trace)
    assert check["outputs"][0]["ok"] and check["close"] is False, check
    assert check["detail"].startswith("fc1.weight.grad"), check
    entry = _first(trace)
    first = entry["first"]
    assert first["kind"] == "backward" and "relu" in first["kernel"], first
    forward = [k for k in entry["kernels"] if k["kind"] == "forward"]
    assert forward and all(k["ok"] for k in forward), entry["kernels"]
    (buf,) = first["buffers"]
    assert buf["source"]["code"] == "return grad * (s + torch.relu(x) * s * (1 - s))", buf
    assert buf["err_compiled"] > 1e3 * buf["err_eager"], buf
    # info's table of kernel calls names which graph each ran in (its id), not only its kind
    from rich.console import Console

    from tuidebug.viewers.numerics_view import kernel_table

    console = Console(width=200, color_system=None, record=True)
    console.print(kernel_table(entry))
    table = console.export_text()
    graphs = {k["graph"] for k in entry["kernels"]}
    assert len(graphs) == 2 and all(g in table for g in graphs), (graphs, table)


@pytest.mark.slow
def test_a_correct_model_has_no_kernel_flagged(numerics_traces) -> None:
    """``--numerics`` judges every kernel of a matching compile: none diverges."""
    trace, rc, out = numerics_traces["train_numerics"]
    assert rc == 0, out[-3000:]
    entry = _first(trace)
    assert entry["first"] is None, entry
    kinds = {k["kind"] for k in entry["kernels"]}
    assert kinds == {"forward", "backward"} and len(entry["kernels"]) >= 4, entry["kernels"]
    assert all(k["ok"] and k["err_compiled"] is not None for k in entry["kernels"]), entry


@pytest.mark.slow
def test_random_numbers_are_classified_not_flagged(numerics_traces) -> None:
    """Dropout in training: Inductor's kernels draw other numbers than eager; the kernels
    that differ are classified as random numbers, no kernel is named, the trace is ok."""
    trace, rc, out = numerics_traces["random"]
    assert rc == 0, out[-3000:]
    check = _check(trace)
    assert check["skipped"].startswith("not compared: the graph draws random numbers"), check
    report = check["numerics"]
    forward = report["graphs"][0]
    assert forward["kind"] == "forward" and forward["random_ops"], forward
    assert forward["classified"].startswith("random numbers"), forward
    classified = [k for g in report["graphs"] for k in g["kernels"] if k.get("classified")]
    assert classified and all(k["ok"] for k in classified), report["graphs"]
    assert report["first"] is None and _first(trace)["first"] is None
    assert "MISMATCH" not in out and "first diverging kernel" not in out
    # `tuidebug numerics` confirms it: with fallback_random=True (eager's numbers drawn) no
    # kernel diverges, so the difference was random numbers; float32: no precision-cast re-run
    proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", "numerics", "--yes", "--json",
                           str(trace)], capture_output=True, text=True, cwd=ROOT, timeout=900,
                          env=dict(os.environ, PYTHONPATH=pythonpath()))
    assert proc.returncode == 0, proc.stderr[-3000:]
    (c,) = json.loads(proc.stdout)["classified"]
    assert c["verdict"] == "random numbers" and c["kernel"] is None, c
    casts, random = c["reruns"]
    assert casts["flag"] == "emulate_precision_casts" and casts["outcome"] == "not run", casts
    assert random["flag"] == "fallback_random" and random["outcome"] == "disappears", random
    (rerun,) = Trace(random["trace"]).runtime["checks"].values()
    judged = [k for g in rerun["numerics"]["graphs"] for k in g["kernels"]]
    assert judged and not any(k.get("classified") for k in judged), judged  # judged, not excused


# in-place ATen fallbacks Inductor emits (deterministic mode, bool indices, integer
# accumulation, scale_grad_by_freq): a buffer a kernel zeroed, then written by index_put_ /
# scatter_reduce_ (their first argument), is not that kernel's value; a buffer two kernels write
# in turn is judged after the second, the first named with it
INPLACE = """
triton_poi_fused_zeros_0 = async_compile.triton('triton_poi_fused_zeros_0', '''
def triton_poi_fused_zeros_0(out_ptr0, out_ptr1, out_ptr2, xnumel, XBLOCK : tl.constexpr):
''', device_str='cuda')
triton_poi_fused_add_1 = async_compile.triton('triton_poi_fused_add_1', '''
def triton_poi_fused_add_1(in_out_ptr0, in_ptr0, xnumel, XBLOCK : tl.constexpr):
''', device_str='cuda')

def call(self, args):
        primals_1, idx, vals = args
        buf0 = empty_strided_cuda((8, 4), (4, 1), torch.float32)
        triton_poi_fused_zeros_0.run(buf0, buf1, buf2, 32, stream=stream0)
        aten.index_put_(buf0, [idx], vals, True)
        aten.scatter_reduce_.two(buf1,0,idx,vals, reduce='sum', include_self=True)
        triton_poi_fused_add_1.run(buf2, primals_1, 32, stream=stream0)
        return (buf0, buf1, buf2)
"""


def test_an_in_place_aten_fallback_writes_its_first_argument() -> None:
    """wrapper_writes counted only generated kernels and out= externs as writing a buffer
    again: a buffer zeroed by a kernel, then accumulated into by ``aten.index_put_`` (or
    ``aten.scatter_reduce_.two``), was judged as the zeroing kernel's (the false 'wrong
    kernel' this module fixed for Triton). And a buffer two kernels write is judged after the
    second with the first named (``also_written_by``), so a wrong first writer is not reported
    as the second's fault without saying so."""
    from tuidebug.compiler.wrapper_writes import extern_writes

    assert extern_writes("aten.index_put_(buf0, [idx], vals, True)") == [("aten.index_put_",
                                                                           "buf0")]
    assert extern_writes("aten.mm(buf0, buf1)") == []  # not in place: writes no argument
    sites = call_sites(INPLACE, {"triton_poi_fused_zeros_0", "triton_poi_fused_add_1"})
    assert [(s.kernel, [s.args[i] for i in s.writes], s.also_written_by) for s in sites] == [
        ("triton_poi_fused_zeros_0", [], {}),
        ("triton_poi_fused_add_1", ["buf2"], {0: ["triton_poi_fused_zeros_0"]})]
    # ACCUMULATE: buf127 zeroed by the C++ kernel, accumulated into by the Triton one
    sites = call_sites(ACCUMULATE, {"cpp_fused_embedding_dense_backward_1", "cpp_fused_sum_3",
                                    "triton_poi_fused_index_put_2"})
    assert sites[2].also_written_by == {2: ["cpp_fused_embedding_dense_backward_1"]}, sites[2]


def test_a_buffer_written_before_is_said_with_the_first_diverging_kernel() -> None:
    from tuidebug.trace.queries.numerics_classes import _shared
    from tuidebug.viewers.numerics_view import numerics_lines

    buf = {"buffer": "buf2", "node": "add", "ok": False, "rule": "rmse-fp64",
           "also_written_by": ["triton_poi_fused_zeros_0"]}
    first = {"graph": "0_0-forward", "kind": "forward", "kernel": "triton_poi_fused_add_1",
             "call": 0, "judged": 2, "buffers": [buf]}
    text = "\n".join(str(getattr(x, "plain", x)) for x in numerics_lines({"first": first}))
    assert "also written before by triton_poi_fused_zeros_0 (judged only after this kernel: " \
           "the wrong value may come from there)" in text, text
    said = _shared({"first": first})
    assert said == ("; buf2 was written before by triton_poi_fused_zeros_0 (judged only after "
                    "this kernel: the wrong value may come from there)"), said
    assert _shared({"first": {**first, "buffers": [{**buf, "also_written_by": []}]}}) == ""
