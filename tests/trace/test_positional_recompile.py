"""A recompile on the frame's ``*args``: ``torch.compile(nn.Sequential(...))`` traces Dynamo's
own ``inner(*args, **kwargs)`` around the module's forward (torch 2.13), so a new batch size
fails the guard on ``args[0]`` — the tensor the user passes to the model. The advice names it
as such (trace built with the torch-free writer, the reason as torch 2.13 records it)."""

from __future__ import annotations

from pathlib import Path

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.queries.recompile_suggestion import suggestion
from tuidebug.viewers.dynamic_view import dynamic_notes
from tuidebug.trace.queries.summary import trace_summary

REASON = "0/0: tensor 'args[0]' size mismatch at index 0. expected 2, actual 5"


def test_a_positional_argument_is_an_input_the_user_passes(tmp_path: Path) -> None:
    w = TraceWriter(tmp_path / "t", command=["tuidebug", "trace", "batches.py"])
    inner = {"co_name": "inner", "co_filename": "/v/site-packages/torch/_dynamo/external_utils.py"}
    for cid, extra in (("0/0", {}), ("0/1", {"recompile_reasons": [REASON]})):
        w.write_compile(cid, {"graphs": [], "metrics": inner, **extra})
        w.add_compile(cid, {"graphs": []})
    w.write_compile_shapes("0/1", {"id": "0/1", "symbols": [
        {"name": "s33", "source": "L['args'][0].size()[0]",
         "sources": ["L['args'][0].size()[0]"], "kind": "backed", "hint": 5}],
        "recompile": {"reasons": [REASON], "values": {}}})
    w.finish("ok")
    compiles = trace_summary(Trace(tmp_path / "t"))["compiles"]
    (c,) = [c for c in compiles if c["id"] == "0/1"]
    text = " ".join(t.plain for t in dynamic_notes(c))
    assert "not an input you pass yourself" not in text, text  # it is: the model's argument
    assert ("to compile once, call torch._dynamo.maybe_mark_dynamic(t, 0) on the tensor t you "
            "pass as argument 0 (or mark_dynamic) before the first call, or use "
            "torch.compile(dynamic=True)") in " ".join(text.split()), text


def test_other_shapes_of_the_advice_name_the_argument_too() -> None:
    stride = suggestion("tensor 'args[1]' stride mismatch at index 0. expected 4, actual 1",
                        {}, set())[0]
    assert stride.startswith("the memory layout of 'args[1]' changed") and \
        "pass t.contiguous() on the tensor t you pass as argument 1" in stride, stride
    off = suggestion("tensor 'args[0]' size mismatch at index 0. expected 2, actual 5",
                     {"automatic_dynamic_shapes": False}, set())[0]
    assert "torch._dynamo.mark_dynamic(t, 0) on the tensor t you pass as argument 0" in off
    # a tensor reached through an argument is still not one the user passes
    deep = suggestion("tensor 'args[0].h' size mismatch at index 0. expected 2, actual 5",
                      {}, set())[0]
    assert "is not an input you pass yourself" in deep, deep
