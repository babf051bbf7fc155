"""A Hugging Face model's forward wrapped by transformers' decorators compiles as a frame named
``wrapper`` (``transformers/utils/generic.py``) whose ``*args`` are the model's positional
arguments; the capture records the function it wraps (``recompile.wraps``), and the advice
names that forward and the argument the user's line passes at that place. Traces built with
the torch-free writer, the records as torch 2.13 and transformers 5 made them for a tiny GPT-2
compiled with ``torch.compile(model)`` and called as ``out = step(ids)`` with 5, then 8
tokens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.queries.advice import recompile_advice
from tuidebug.trace.queries.recompiles import explain_compile
from tuidebug.viewers.dynamic_view import dynamic_notes

GPT2 = "/v/site-packages/transformers/models/gpt2/modeling_gpt2.py"
WRAPS = {"file": GPT2, "line": 645, "fn": "forward", "qualname": "GPT2LMHeadModel.forward",
         "args": ["input_ids", "past_key_values", "attention_mask", "token_type_ids"],
         "passed_from": 0}


def _trace(root: Path, code: str, wraps: dict[str, Any] | None, index: int = 0,
           direct: bool = True) -> Trace:
    w = TraceWriter(root, command=["tuidebug", "trace", "pos_gpt2.py"])
    reason = f"0/0: tensor 'args[{index}]' size mismatch at index 1. expected 5, actual 8"
    for cid in ("0/0", "0/1"):
        w.write_compile(cid, {"graphs": [], "metrics": {
            "co_name": "wrapper", "co_filename": "/v/site-packages/transformers/utils/generic.py",
            "co_firstlineno": 937}, **({"recompile_reasons": [reason]} if cid == "0/1" else {})})
        w.add_compile(cid, {"graphs": []})
    src = f"L['args'][{index}].size()[1]"
    w.write_compile_shapes("0/1", {"id": "0/1", "symbols": [
        {"name": "s50", "source": src, "sources": [src], "kind": "backed", "hint": 8}],
        "recompile": {"reasons": [reason], "values": {}, "called_at": {
            "file": "/home/u/pos_gpt2.py", "line": 14, "fn": "main", "code": code,
            "direct": direct}, **({"wraps": wraps} if wraps else {})}})
    w.finish("ok")
    return Trace(root)


def test_the_advice_names_the_wrapped_forwards_argument_and_the_users(tmp_path: Path) -> None:
    """It said "dimension 1 of args[0]" and "maybe_mark_dynamic(t, 1) on the tensor t you pass
    as argument 0", and info named only ``wrapper`` (generic.py:937)."""
    t = _trace(tmp_path / "t", "out = step(ids)", WRAPS)
    found = {s.id: s for s in recompile_advice(t)}
    mark = found["mark_dynamic args[0] 1"]
    assert "torch._dynamo.maybe_mark_dynamic(ids, 1)" in mark.text, mark.text
    assert "dimension 1 of input_ids (args[0])" in mark.text, mark.text
    assert mark.apply is not None and mark.apply.dynamic_sources == ["L['args'][0]:1"]
    rec = explain_compile(t, "0/1")
    assert rec is not None and "maybe_mark_dynamic(ids, 1)" in rec["suggestion"], rec
    assert rec["wraps"] == {"function": "GPT2LMHeadModel.forward", "file": GPT2, "line": 645,
                            "wrapper": "wrapper"}, rec["wraps"]
    lines = [x.plain for x in dynamic_notes({"id": "0/1", "recompile": rec})]
    assert "      compiled as wrapper, a decorator's wrapper around GPT2LMHeadModel.forward " \
        "(modeling_gpt2.py:645)" in lines, lines


def test_an_argument_passed_at_another_place_is_named_by_its_place(tmp_path: Path) -> None:
    """``out = step(ids, mask)`` recompiling on ``args[1]``: ``mask`` (the forward's
    attention_mask is its third parameter, but the line passes ``mask`` second: the place in
    ``*args`` is what counts); a line whose argument there is no plain name gets the
    parameter's name."""
    t = _trace(tmp_path / "two", "out = step(ids, mask)", WRAPS, index=1)
    mark = {s.id: s for s in recompile_advice(t)}["mark_dynamic args[1] 1"]
    assert "maybe_mark_dynamic(mask, 1)" in mark.text, mark.text
    t = _trace(tmp_path / "expr", "out = step(ids[:, :n])", WRAPS)
    mark = {s.id: s for s in recompile_advice(t)}["mark_dynamic args[0] 1"]
    assert "maybe_mark_dynamic(t, 1) on the tensor t you pass as input_ids (argument 0 of " \
        "GPT2LMHeadModel.forward)" in mark.text, mark.text


def test_a_wrapper_that_holds_the_instance_first_counts_the_callers_places_after_it(
        tmp_path: Path) -> None:
    """transformers' check_model_inputs is ``wrapper(*args, **kwargs)``: ``args[0]`` is the
    model, the caller's first argument ``args[1]``."""
    wraps = {**WRAPS, "args": ["self", *WRAPS["args"]], "passed_from": 1}
    t = _trace(tmp_path / "t", "out = step(ids)", wraps, index=1)
    mark = {s.id: s for s in recompile_advice(t)}["mark_dynamic args[1] 1"]
    assert "maybe_mark_dynamic(ids, 1)" in mark.text and "input_ids (args[1])" in mark.text, \
        mark.text


def test_a_trace_without_the_record_keeps_the_old_words(tmp_path: Path) -> None:
    t = _trace(tmp_path / "t", "out = step(ids)", None)
    mark = {s.id: s for s in recompile_advice(t)}["mark_dynamic args[0] 1"]
    assert "on the tensor t you pass as argument 0" in mark.text, mark.text
    rec = explain_compile(t, "0/1")
    assert rec is not None and rec["wraps"] is None


def test_a_wrapper_the_library_called_takes_no_tensor_of_the_users(tmp_path: Path) -> None:
    """``out = model.generate(ids)``: generate (transformers' code) called the wrapped forward
    with tensors of its own making (the capture's ``direct`` is false): no mark is offered on
    "the tensor t you pass as input_ids", which the user never passes; dynamic=True is."""
    t = _trace(tmp_path / "t", "out = model.generate(ids)", WRAPS, direct=False)
    found = {s.id: s for s in recompile_advice(t)}
    assert found and not any(k.startswith("mark_dynamic") for k in found), list(found)
    assert "dynamic=True" in found, list(found)
    rec = explain_compile(t, "0/1")
    assert rec is not None and "maybe_mark_dynamic" not in rec["suggestion"], rec["suggestion"]
    assert "'input_ids (args[0])' is not an input you pass yourself" in rec["suggestion"], \
        rec["suggestion"]
