"""Why ``tuidebug numerics`` ran no precision-cast re-run, said from what the kernels wrote: a
bfloat16 block (LayerNorm, GELU MLP, softmax; the report as a real ``--numerics`` run wrote
it, cut to two kernels) whose kernels all agree with eager was told "every value its kernels
wrote is float32 or wider", which its bfloat16 buffers contradict."""

from __future__ import annotations

from pathlib import Path

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.queries.numerics_classes import PRECISION_CASTS, classify


def _buffer(name: str, dtype: str) -> dict:
    return {"buffer": name, "node": "n", "dtype": dtype, "shape": [4, 16, 64], "ok": True,
            "rule": "allclose", "err_compiled": 1e-3, "err_eager": 1e-3}


def _trace(tmp_path: Path, dtype: str) -> Trace:
    kernels = [{"kernel": "cpp_fused_native_layer_norm_0", "call": 0, "ok": True,
                "buffers": [_buffer("buf1", "float32"), _buffer("buf3", dtype)]},
               {"kernel": "cpp_fused_gelu_view_1", "call": 0, "ok": True,
                "buffers": [_buffer("buf5", dtype)]}]
    w = TraceWriter(tmp_path / dtype, command=["tuidebug", "trace", "--numerics", "s5.py"])
    w.write_runtime({"checks": {"0/0": {"close": True, "rule": "allclose", "numerics": {
        "graphs": [{"graph": "0_0-inference", "kind": "inference", "kernels": kernels}],
        "first": None}}}})
    w.finish("ok")
    return Trace(tmp_path / dtype)


def test_a_bfloat16_graph_with_no_diverging_kernel_is_not_called_float32(
        tmp_path: Path) -> None:
    (c,) = classify(_trace(tmp_path, "bfloat16"), {})
    (casts,) = [r for r in c.reruns if r.flag == PRECISION_CASTS]
    assert casts.outcome == "not run", casts
    assert "float32 or wider" not in casts.detail, casts.detail
    assert casts.detail == ("no kernel diverges, so there is no difference to classify (its "
                         "kernels write bfloat16)"), casts.detail
    # a float32 graph: the old reason, true there
    (c,) = classify(_trace(tmp_path, "float32"), {})
    (casts,) = [r for r in c.reruns if r.flag == PRECISION_CASTS]
    assert casts.detail.startswith("every value its kernels wrote is float32 or wider"), casts.detail


def test_kernels_set_aside_as_random_numbers_are_not_called_agreeing(tmp_path: Path) -> None:
    """A bfloat16 dropout kernel that differs from eager and was classified as random numbers
    (not judged): the report's ``first`` is None, yet a kernel did differ — "no kernel
    diverges" would hide it."""
    kernels = [{"kernel": "cpp_fused_dropout_0", "call": 0, "ok": False,
                "classified": "random numbers",
                "buffers": [_buffer("buf1", "bfloat16") | {"ok": False}]}]
    w = TraceWriter(tmp_path / "t", command=["tuidebug", "trace", "--numerics", "drop.py"])
    w.write_runtime({"checks": {"0/0": {"close": True, "rule": "allclose", "numerics": {
        "graphs": [{"graph": "0_0-inference", "kind": "inference", "kernels": kernels,
                    "random_ops": ["aten.bernoulli"]}], "first": None}}}})
    w.finish("ok")
    (c,) = classify(Trace(tmp_path / "t"), {})
    assert c.reruns, c
    (casts,) = [r for r in c.reruns if r.flag == PRECISION_CASTS]
    assert casts.outcome == "not run", casts
    assert not casts.detail.startswith("no kernel diverges"), casts.detail
    assert casts.detail == ("its differing kernels were set aside as random numbers (1 kernel "
                            "call) and no other kernel diverges, so there is no difference to "
                            "classify (its kernels write bfloat16)"), casts.detail
