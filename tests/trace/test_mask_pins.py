"""backed_size_oblivious is not offered where transformers' causal mask pins a query length of 1
(traces built with the torch-free writer; the recompile reasons and guard lines as torch 2.13
and transformers 5 record them for a tiny GPT-2's decode loop, prompts of 5 then 7 tokens, a
DynamicCache each): the compile that held the one-token length ran ``create_causal_mask``,
whose ``q_length == 1`` leaves no guard while the length is the constant 1."""

from __future__ import annotations

from pathlib import Path

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.queries.advice import recompile_advice
from tuidebug.trace.queries.mask_pins import causal_mask_line, pinned_to_one

IDS = "kwargs['input_ids']"
KEYS = "kwargs['past_key_values'].layers[0].keys"
# two of the guards 0/2 recorded (the decode step's compile), as Dynamo words them
MASK_GUARDS = (
    "| | +- ID_MATCH: ___check_obj_id(dict(type(L['kwargs']['past_key_values']).__mro__[1]"
    ".__dict__)['is_compileable'].fget.__code__, 140386304320464), type=<class 'code'>  # "
    "getattr(past_key_values, \"is_compileable\", False) and q_length == 1  # "
    "transformers/masking_utils.py:987 in create_causal_mask\n"
    "| | +- ID_MATCH: ___check_obj_id(G['__import_transformers_dot_masking_utils'].is_torchdynamo"
    "_exporting.__code__, 140386351967536), type=<class 'code'>  # if is_torchdynamo_exporting()"
    " or (padding_mask is not None and is_tracing(padding_mask)):  # transformers/masking_utils"
    ".py:295 in _ignore_causal_mask_sdpa\n")
OTHER_GUARDS = ("| | +- TENSOR_MATCH: check_tensor(L['kwargs']['input_ids'], Tensor, ...)  # "
                "input_ids = kwargs['input_ids']  # loop.py:3 in step\n")


def _decode_loop(root: Path, guards: str) -> Trace:
    """0/0 the 5-token prefill, 0/1 the first one-token step (5 → 1), 0/2 the next (the cache
    5 → 6; it holds the length 1 too, with ``guards``), 0/3 the 7-token prompt (1 in 0/2, 5 in
    0/0), whose compile made the length a symbol (automatic dynamic)."""
    w = TraceWriter(root, command=["tuidebug", "trace", "loop_gpt2.py"])
    reasons = {
        "0/1": [f"0/0: tensor '{IDS}' size mismatch at index 1. expected 5, actual 1"],
        "0/2": [f"0/1: tensor '{KEYS}' size mismatch at index 2. expected 5, actual 6",
                f"0/0: tensor '{IDS}' size mismatch at index 1. expected 5, actual 1"],
        "0/3": [f"0/2: tensor '{IDS}' size mismatch at index 1. expected 1, actual 7",
                f"0/1: tensor '{IDS}' size mismatch at index 1. expected 1, actual 7",
                f"0/0: tensor '{IDS}' size mismatch at index 1. expected 5, actual 7"]}
    for cid in ("0/0", "0/1", "0/2", "0/3"):
        w.write_compile(cid, {"graphs": [], "guards": guards,
                              "metrics": {"co_name": "wrapper",
                                          "co_filename": "/x/transformers/utils/generic.py"},
                              **({"recompile_reasons": reasons[cid]} if cid in reasons else {})})
        w.add_compile(cid, {"graphs": []})
    src = "L['kwargs']['input_ids'].size()[1]"
    w.write_compile_shapes("0/3", {"id": "0/3", "symbols": [
        {"name": "s27", "source": src, "sources": [src], "kind": "backed", "hint": 7}],
        "recompile": {"reasons": reasons["0/3"], "values": {}}})
    w.finish("ok")
    return Trace(root)


def test_a_length_transformers_causal_mask_pins_gets_no_backed_size_oblivious(
        tmp_path: Path) -> None:
    """backed_size_oblivious was offered for 0/3 ("with the flag 0/2 holds it as a symbol,
    which may serve 7"); advise --try on the real script: compiles 5 → 5 with the flag."""
    t = _decode_loop(tmp_path / "mask", MASK_GUARDS)
    found = {s.id: s for s in recompile_advice(t)}
    assert "backed_size_oblivious" not in found, found["backed_size_oblivious"].why
    # what may help is still offered: the length marked dynamic, dynamic=True
    assert "dynamic=True" in found and f"mark_dynamic {IDS} 1" in found, list(found)


def test_without_the_causal_mask_the_flag_is_still_offered(tmp_path: Path) -> None:
    """The same recompiles in code that runs no causal mask (its guards name none)."""
    t = _decode_loop(tmp_path / "plain", OTHER_GUARDS)
    found = {s.id: s for s in recompile_advice(t)}
    assert "backed_size_oblivious" in found, list(found)


def test_the_evidence_names_the_mask_line_and_only_the_query_length() -> None:
    detail = {"guards": MASK_GUARDS}
    assert causal_mask_line(detail) == ("create_causal_mask", 987)
    assert causal_mask_line({"guards": OTHER_GUARDS}) is None
    assert causal_mask_line({}) is None
    why = pinned_to_one(detail, "L['kwargs']['input_ids'].size()[1]", "0/2")
    assert why and "create_causal_mask (masking_utils.py:987" in why and "q_length == 1" in why
    assert pinned_to_one(detail, "L['kwargs']['cache_position'].size()[0]", "0/2")
    # a batch of 1 is no query length: not said to be pinned
    assert pinned_to_one(detail, "L['kwargs']['input_ids'].size()[0]", "0/2") is None
