"""Recompiles of a function with a graph break, as torch 2.13 records them (a trace built with
the torch-free writer from the reasons a real run of this script wrote)::

    def forward(self, x, scale):
        h = torch.relu(self.l1(x))
        print("hidden")            # break: Dynamo resumes in torch_dynamo_resume_in_forward_at_11
        if h.sum() > 0:            # break: resumed in torch_dynamo_resume_in_forward_at_12
            h = h * scale
        return self.l2(h)

called with batch 4, 8 (scale 2.0), then batch 4 with scale 3.0. Checked against
TORCH_LOGS=recompiles of that run: four recompiles (0/1, 1/1, 2/1 on sizes, 2/2 on
``scale == 2.0``), the first of them restarted by the break (its graph is 0/1_1's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.queries.advice import counts, recompile_advice
from tuidebug.trace.queries.recompile_suggestion import suggestion
from tuidebug.trace.queries.recompiles import explain
from tuidebug.trace.queries.summary import trace_summary
from tuidebug.viewers.dynamic_view import dynamic_notes

STACK = ('\nUser stack trace:\n  File "/tmp/u/s1.py", line 13, in '
         'torch_dynamo_resume_in_forward_at_12\n    h = h * scale')
SCALE = ("scale == 2.0                                             # h = h * scale  "
         "# mp/u/s1.py:13 in torch_dynamo_resume_in_forward_at_12" + STACK)
FWD = {"co_name": "forward", "co_filename": "/tmp/u/s1.py", "co_firstlineno": 9}
R11 = {"co_name": "torch_dynamo_resume_in_forward_at_11", "co_filename": "/tmp/u/s1.py"}
R12 = {"co_name": "torch_dynamo_resume_in_forward_at_12", "co_filename": "/tmp/u/s1.py"}
# compile id -> (its code object, its recompile reasons, the graph it made or None: restarted)
COMPILES = {
    "0/0": (FWD, [], None), "0/0_1": (FWD, [], "0_0_1-forward"),
    "1/0": (R11, [], "1_0-forward"), "2/0": (R12, [], "2_0-forward"),
    "0/1": (FWD, ["0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8"], None),
    "0/1_1": (FWD, [], "0_1_1-forward"),
    "1/1": (R11, ["1/0: tensor 'h' size mismatch at index 0. expected 4, actual 8"],
            "1_1-forward"),
    "2/1": (R12, ["2/0: tensor 'h' size mismatch at index 0. expected 4, actual 8"],
            "2_1-forward"),
    "2/2": (R12, [json.dumps([f"2/1: {SCALE}", f"2/0: {SCALE}"])], "2_2-forward"),
}
SYMBOLS = {
    "0/1_1": [{"name": "s77", "source": "L['x'].size()[0]", "kind": "backed", "hint": 8}],
    "1/1": [{"name": "s75", "source": "L['h'].size()[0]", "kind": "backed", "hint": 8}],
    "2/1": [{"name": "s75", "source": "L['h'].size()[0]", "kind": "backed", "hint": 8}],
    "2/2": [{"name": "s75", "source": "L['h'].size()[0]", "kind": "backed", "hint": 4},
            {"name": "zf69", "source": "L['scale']", "kind": "backed", "hint": "3.0"}],
}


def _trace(tmp_path: Path) -> Trace:
    w = TraceWriter(tmp_path / "t", command=["tuidebug", "trace", "s1.py"])
    for cid, (code, reasons, graph) in COMPILES.items():
        extra = {"recompile_reasons": reasons} if reasons else {}
        w.write_compile(cid, {"graphs": [graph] if graph else [], "metrics": code, **extra})
        w.add_compile(cid, {"graphs": [graph] if graph else []})
        if graph:
            w.add_graph(graph, kind="forward", compile_id=cid)
            w.set_graph_status(graph, "ok")
        called = ({"file": "/tmp/u/s1.py", "line": 12, "fn": R11["co_name"],
                   "code": "if h.sum() > 0:"} if cid == "2/2" else None)
        w.write_compile_shapes(cid, {"id": cid, "symbols": SYMBOLS.get(cid, []), "recompile": {
            "reasons": reasons, "values": {}, "called_at": called}})
    w.finish("ok")
    return Trace(tmp_path / "t")


def _one_frame(root: Path, reasons: dict[str, list[str]],
               symbols: dict[str, list[dict[str, Any]]] | None = None) -> Trace:
    """A trace of one frame (``wrapper``) compiled as ``reasons`` says ({compile id: its
    recompile reasons}), each compile with an inference graph and its ``symbols``."""
    w = TraceWriter(root, command=["tuidebug", "trace", "script.py"])
    for cid, rs in reasons.items():
        graph = f"{cid.replace('/', '_')}-inference"
        w.write_compile(cid, {"graphs": [graph], "metrics": {"co_name": "wrapper"},
                              **({"recompile_reasons": rs} if rs else {})})
        w.add_compile(cid, {"graphs": [graph]})
        w.add_graph(graph, kind="inference", compile_id=cid)
        w.set_graph_status(graph, "ok")
        w.write_compile_shapes(cid, {"id": cid, "symbols": (symbols or {}).get(cid, []),
                                     "recompile": {"reasons": rs, "values": {}}})
    w.finish("ok")
    return Trace(root)


def test_a_changed_float_is_named_with_its_value_and_line(tmp_path: Path) -> None:
    t = _trace(tmp_path)
    assert "User stack trace" in t.compiles["2/2"]["recompile_reasons"][0]  # as recorded
    rec = explain("2/2", t.compiles, t.compile_shapes_brief("2/2"))
    assert rec is not None
    assert rec["failed_guard"] == "scale == 2.0", rec
    assert rec["guard_at"] == {"file": "/tmp/u/s1.py", "line": 13,
                               "fn": "torch_dynamo_resume_in_forward_at_12",
                               "code": "h = h * scale"}, rec
    assert rec["source"] == "L['scale']" and rec["expected"] == "2.0"
    assert rec["failing_value"] == "3.0", rec  # the hint of the symbol the compile made
    advice = rec["suggestion"]
    assert "read the failed guard" not in advice, advice
    assert advice.startswith("the Python float 'scale' is a constant of the compile"), advice
    assert "this compile makes it a symbol (automatic dynamic)" in advice, advice
    assert "torch.compile(dynamic=True)" in advice, advice
    (c,) = [c for c in trace_summary(t)["compiles"] if c["id"] == "2/2"]
    text = "\n".join(x.plain for x in dynamic_notes(c))
    assert "2/2 recompiled after 2/1: scale == 2.0 (failing value 3.0)" in text, text
    assert "guard from s1.py:13  h = h * scale" in text, text
    assert "resumed after the graph break at s1.py:12  if h.sum() > 0:" in text, text
    assert "called at" not in text, text
    assert "User stack trace" not in text and "\\n" not in text, text
    # advise: dynamic=True, why naming the number (tried by advise --try)
    (dyn,) = [s for s in recompile_advice(t) if s.id == "dynamic=True"]
    assert dyn.apply is not None and dyn.apply.compile_kwargs == {"dynamic": True}


def test_a_changed_int_is_a_constant_on_every_torch() -> None:
    for text in ("n == 2                                                   # return x * n  "
                 "# mp/u/g.py:4 in f\nUser stack trace:\n  File \"/tmp/u/g.py\", line 4, in f"
                 "\n    return x * n", "L['n'] == 2"):
        advice, source, expected, _ = suggestion(text, {}, {"L['n']"})
        assert (source, expected) == ("L['n']", "2"), (text, source, expected)
        assert advice.startswith("the Python int 'n' is a constant of the compile"), advice
        assert "makes it a symbol" in advice and "pass it as a tensor" not in advice, advice


def test_a_local_carried_across_a_break_is_not_marked_before_the_first_call(
        tmp_path: Path) -> None:
    """``h`` is the input of the code Dynamo resumes after ``print``: the user never passes it,
    so "call maybe_mark_dynamic(h, 0) before the first call" cannot be done."""
    t = _trace(tmp_path)
    for cid in ("1/1", "2/1"):
        rec = explain(cid, t.compiles, t.compile_shapes_brief(cid))
        assert rec is not None and rec["resumed"] is True, rec
        assert "maybe_mark_dynamic(h" not in rec["suggestion"], rec["suggestion"]
        assert "carries across a graph break" in rec["suggestion"], rec["suggestion"]
        (c,) = [c for c in trace_summary(t)["compiles"] if c["id"] == cid]
        text = " ".join(x.plain for x in dynamic_notes(c))
        assert "maybe_mark_dynamic(h" not in text, text
    x = explain("0/1", t.compiles, t.compile_shapes_brief("0/1"))
    assert x is not None and x["resumed"] is False
    assert "maybe_mark_dynamic(x, 0)" in x["suggestion"], x  # x is the user's argument
    ids = {s.id for s in recompile_advice(t)}
    assert "mark_dynamic x 0" in ids and "mark_dynamic h 0" not in ids, ids
    assert "dynamic_sources h 0" in ids, ids  # tried by its Dynamo source, not by a code edit
    (h,) = [s for s in recompile_advice(t) if s.id == "dynamic_sources h 0"]
    assert "(and its siblings)" not in h.text, h.text  # a plain local has none to match


def test_a_recompile_that_restarted_is_counted(tmp_path: Path) -> None:
    """0/1 restarted at the break; its graph is 0/1_1's: still one of the four recompiles."""
    c = counts(_trace(tmp_path))
    assert (c.compiles, c.recompiles) == (7, 4), c


def test_a_flag_of_an_object_you_pass_is_a_bool_that_flips_once() -> None:
    """BART's generate(): transformers' EncoderDecoderCache marks each layer's cross-attention
    cache filled after the first step (the reason as torch 2.13 wrote it, its stack cut)."""
    reason = ("kwargs['past_key_values'].is_updated[0] == False         # if is_cross_attention "
              "and past_key_values is not None and is_updated:  # transformers/models/bart/"
              "modeling_bart.py:222 in forward\nUser stack trace:\n  File \"/v/site-packages/"
              "transformers/models/bart/modeling_bart.py\", line 222, in forward\n    if "
              "is_cross_attention and past_key_values is not None and is_updated:")
    advice, source, expected, actual = suggestion(reason, {}, set())
    # the guard says only that it is not False now (True, None, another object…)
    assert (source, expected, actual) == (
        "L['kwargs']['past_key_values'].is_updated[0]", "False", None), (source, actual)
    assert advice.startswith("the Python bool \"kwargs['past_key_values'].is_updated[0]\" "
                             "changed (it was False)"), advice
    assert "dynamic=True does not change that" in advice, advice
    assert "read the failed guard" not in advice
    # a number read through an object that the compile did not make a symbol: no promise
    held, _, _, _ = suggestion("self.step == 3", {}, set())
    assert "did not make it a symbol: each value compiles once" in held, held
    assert "dynamic=True" not in held, held


def test_a_cache_that_was_one_long_recompiles_whatever_is_marked_dynamic() -> None:
    """BART's generate(): the self-attention cache is 1 long at the first decode step and 2 at
    the next; a size 1 is always specialized, so even torch.compile(dynamic=True) compiles the
    size 2 again (checked with TORCH_LOGS=recompiles: 0/2 stays). The advice must not promise
    that dynamic=True or marking it dynamic compiles once."""
    name = "kwargs['past_key_values'].self_attention_cache.layers[0].keys"
    advice, source, expected, actual = suggestion(
        f"tensor '{name}' size mismatch at index 2. expected 1, actual 2", {},
        {f"L['kwargs']['past_key_values'].self_attention_cache.layers[0].keys.size()[2]"})
    assert (expected, actual) == ("1", "2")
    assert "compiles again even with torch.compile(dynamic=True)" in advice, advice
    assert "to compile once" not in advice, advice
    assert "a static KV cache, whose length stays fixed, avoids it" in advice, advice


def test_bart_generate_advice_offers_no_dynamic_true(tmp_path: Path) -> None:
    """The two recompiles of BART's generate() (a bool that flips once, a cache 1 long then 2):
    dynamic=True avoids neither (TORCH_LOGS=recompiles with it: both stay), so it is not
    offered; nor is backed_size_oblivious: 0/1 held the cache's length fixed at 1 (its first
    size: it recompiled on the bool), and with the flag BART's generate() compiles 0/2 all the
    same (TORCH_LOGS=recompiles, torch 2.13, transformers 5.23). The static cache is offered."""
    name = "kwargs['past_key_values'].self_attention_cache.layers[0].keys"
    t = _one_frame(tmp_path / "t", {
        "0/0": [], "0/1": ["0/0: kwargs['past_key_values'].is_updated[0] == False"],
        "0/2": [f"0/1: tensor '{name}' size mismatch at index 2. expected 1, actual 2"]},
        {"0/2": [{"name": "s11", "kind": "backed", "hint": 2,
                  "source": f"L['kwargs']{name[6:]}.size()[2]"}]})
    ids = [s.id for s in recompile_advice(t)]
    assert ids and "dynamic=True" not in ids and not any(i.startswith("mark_dynamic")
                                                         for i in ids), ids
    assert "static KV cache" in ids and "backed_size_oblivious" not in ids, ids
    assert counts(t).recompiles == 2


def test_an_optional_tensor_left_out_is_named_and_not_taken_for_a_number() -> None:
    """``attn(q, k, v, mask=mask)`` then ``attn(q, k, v)`` (torch 2.13's words); and a tensor
    guard of another kind (dispatch keys) whose source ``L['k']`` is no number: advise offered
    "the Python number k changed (None → None)" for it."""
    advice, source, _, actual = suggestion(
        "expected type of 'mask' to be a tensor type, ' but found <class 'NoneType'>", {}, set())
    assert (source, actual) == ("L['mask']", "NoneType"), (source, actual)
    assert advice.startswith("'mask' was a tensor in the compile before and is NoneType now")
    assert "read the failed guard" not in advice
    other = suggestion("tensor 'k' dispatch key set mismatch. expected DispatchKeySet(CPU, "
                       "BackendSelect, ADInplaceOrView), actual DispatchKeySet(CPU, "
                       "BackendSelect)", {}, set())
    assert other[1] == "L['k']" and other[2] is None


def test_advice_offers_no_number_change_for_a_tensor_guard(tmp_path: Path) -> None:
    reason = ("0/0: tensor 'k' dispatch key set mismatch. expected DispatchKeySet(CPU, "
              "BackendSelect, ADInplaceOrView), actual DispatchKeySet(CPU, BackendSelect)")
    t = _one_frame(tmp_path / "t", {"0/0": [], "0/1": [reason]})
    assert explain("0/1", t.compiles, t.compile_shapes_brief("0/1")) is not None
    assert recompile_advice(t) == []


BERT_RANGE = ("2 <= kwargs['input_ids'].size()[1] <= 64  # if isinstance(attention_mask, "
              "(torch.Tensor, BlockMask)) and len(attention_mask.shape) == 4:  # transformers/"
              "masking_utils.py:833 in _preprocess_mask_arguments (user code shown is first use "
              "of this value--the guard itself is not due user code but due to 0/1 "
              "specialization in the framework; to avoid specialization try "
              "torch._dynamo.decorators.mark_unbacked(tensor, dim)) and attn_output = torch.nn."
              "functional.scaled_dot_product_attention(  # transformers/integrations/"
              "sdpa_attention.py:193 in sdpa_attention_forward (_dynamo/utils.py:4231 in run_node)")


def test_a_size_below_the_dynamic_range_is_named_with_its_value(tmp_path: Path) -> None:
    """BERT called with sequence lengths 8, 12, 16, then 1 (TORCH_LOGS=recompiles: 0/1 on
    8 → 12, 0/2 on ``2 <= kwargs['input_ids'].size()[1] <= 64`` with 0/0's guard saying
    "actual 1"): the range guard fell back to "read the failed guard"."""
    t = _one_frame(tmp_path / "t", {
        "0/0": [], "0/1": ["0/0: tensor 'kwargs['input_ids']' size mismatch at index 1. "
                           "expected 8, actual 12"],
        "0/2": [f"0/1: {BERT_RANGE}", "0/0: tensor 'kwargs['input_ids']' size mismatch at "
                                      "index 1. expected 8, actual 1"]},
        {"0/1": [{"name": "s27", "source": "L['kwargs']['input_ids'].size()[1]",
                  "kind": "backed", "hint": 12}]})
    rec = explain("0/2", t.compiles, t.compile_shapes_brief("0/2"))
    assert rec is not None
    assert rec["failed_guard"] == "2 <= kwargs['input_ids'].size()[1] <= 64", rec
    assert rec["source"] == "L['kwargs']['input_ids'].size()[1]", rec
    assert rec["failing_value"] == "1", rec  # said by 0/0's guard of the same call
    advice = rec["suggestion"]
    assert "read the failed guard" not in advice, advice
    assert "1 is below it: sizes 0 and 1 are always specialized" in advice, advice
    assert "mark_unbacked" in advice  # Dynamo's own hint, quoted
    ids = {s.id: s for s in recompile_advice(t)}
    assert "backed_size_oblivious" in ids, ids
    # the input the user passes by keyword is named as they pass it
    mark = ids["mark_dynamic kwargs['input_ids'] 1"]
    assert ("maybe_mark_dynamic(t, 1) on the tensor t you pass as input_ids=") in mark.text, \
        mark.text
    one = explain("0/1", t.compiles, t.compile_shapes_brief("0/1"))
    assert one is not None and "maybe_mark_dynamic(t, 1) on the tensor t you pass as " \
        "input_ids=" in one["suggestion"], one


def test_a_string_argument_is_a_constant_each_value_compiled() -> None:
    """``f(x, mode)`` called with eleven strings (torch 2.13's words): each compiles once, and
    past the recompile limit the function runs eagerly; dynamic=True is no help."""
    advice, source, expected, _ = suggestion(
        "mode == 'gelu'                                           # if mode == \"relu\": return "
        "x.relu()  # mp/u/g4.py:4 in f\nUser stack trace:\n  File \"/tmp/u/g4.py\", line 4, in "
        "f\n    if mode == \"relu\": return x.relu()", {}, set())
    assert (source, expected) == ("L['mode']", "'gelu'"), (source, expected)
    assert advice.startswith("the Python str 'mode' is a constant of the compile"), advice
    assert "recompile_limit" in advice and "dynamic=True" not in advice, advice


def _bert_frame(root: Path, mask: dict) -> Path:  # noqa: ANN001
    """BERT's 8 → 12 recompile: input_ids named by the failed guard, the attention mask's
    symbol (with ``mask``'s extra fields) beside it."""
    return _one_frame(root, {
        "0/0": [], "0/1": ["0/0: tensor 'kwargs['input_ids']' size mismatch at index 1. "
                           "expected 8, actual 12"]},
        {"0/1": [{"name": "s27", "source": "L['kwargs']['input_ids'].size()[1]",
                  "kind": "backed", "hint": 12},
                 {"name": "s16", "source": "L['kwargs']['attention_mask'].size()[1]",
                  "kind": "backed", "hint": 12, **mask}]})


def test_marking_dynamic_names_every_input_the_recompile_made_dynamic(tmp_path: Path) -> None:
    """BERT's 8 → 12 recompile names only input_ids in its failed guard, but the attention
    mask changed with it and the compile made both dynamic: marking input_ids alone left the
    mask to recompile (advise --try: 3 compiles → 3); both are marked."""
    t = _bert_frame(tmp_path / "t", {})
    (mark,) = [s for s in recompile_advice(t) if s.id.startswith("mark_dynamic")]
    assert mark.apply is not None and mark.apply.dynamic_sources == [
        "L['kwargs']['input_ids']:1", "L['kwargs']['attention_mask']:1"], mark.apply
    assert "t you pass as input_ids=" in mark.text and "t you pass as attention_mask=" in \
        mark.text, mark.text


def test_info_names_every_input_to_mark_as_advise_does(tmp_path: Path) -> None:
    """info's "avoid it" under the same recompile said "to compile once, call
    maybe_mark_dynamic(t, 1) on the tensor t you pass as input_ids=" alone: BERT's masked-LM
    step (input_ids and labels, 8 → 12 → 16 tokens) marked that way still compiled twice
    (torch 2.13, counted by hand: marking both compiled once). It names both, as advise's
    suggestion does."""
    t = _bert_frame(tmp_path / "t", {})
    (c,) = [c for c in trace_summary(t)["compiles"] if c["id"] == "0/1"]
    said = " ".join(c["recompile"]["suggestion"].split())
    assert ("call torch._dynamo.maybe_mark_dynamic(t, 1) on the tensor t you pass as "
            "input_ids= and torch._dynamo.maybe_mark_dynamic(t, 1) on the tensor t you pass "
            "as attention_mask= (this compile made it dynamic too)") in said, said
    text = " ".join(" ".join(x.plain for x in dynamic_notes(c)).split())
    assert "you pass as attention_mask=" in text, text


def test_a_first_batch_of_one_points_to_no_advice_advise_does_not_give(tmp_path: Path) -> None:
    """A ViT called with a batch of 1, then 4 (the reason and symbol a real run wrote): info
    said "`tuidebug advise TRACE --try` tries what may", and advise then said "No suggestion"
    (nothing it offers applies: the first compile held every size fixed, and it is no cache).
    The pointer is left out where advise has nothing to try."""
    t = _one_frame(tmp_path / "t", {
        "0/0": [], "0/1": ["0/0: tensor 'kwargs['pixel_values']' size mismatch at index 0. "
                           "expected 1, actual 4"]},
        {"0/1": [{"name": "s40", "source": "L['kwargs']['pixel_values'].size()[0]",
                  "kind": "backed", "hint": 4}]})
    (c,) = [c for c in trace_summary(t)["compiles"] if c["id"] == "0/1"]
    said = c["recompile"]["suggestion"]
    assert "was 1 in the compile before (sizes 0 and 1 are always specialized)" in said, said
    assert recompile_advice(t) == [], recompile_advice(t)
    assert "advise" not in said, said


def test_info_marks_no_input_beside_one_the_code_pinned(tmp_path: Path) -> None:
    """The mask's symbol was replaced by a constant: info's advice marks input_ids alone."""
    t = _bert_frame(tmp_path / "t", {"replaced_by": "12"})
    (c,) = [c for c in trace_summary(t)["compiles"] if c["id"] == "0/1"]
    said = " ".join(c["recompile"]["suggestion"].split())
    assert "you pass as input_ids= (or mark_dynamic)" in said and "attention_mask" not in said


def test_a_size_the_code_pinned_is_not_marked_with_the_others(tmp_path: Path) -> None:
    """The recompile made input_ids dynamic, but the compile replaced the mask's symbol by a
    constant (the code needs its value): marking the mask does nothing, so it is not offered
    beside input_ids (it was, from the raw symbol list)."""
    t = _bert_frame(tmp_path / "t", {"replaced_by": "12"})
    (mark,) = [s for s in recompile_advice(t) if s.id.startswith("mark_dynamic")]
    assert mark.apply is not None and mark.apply.dynamic_sources == [
        "L['kwargs']['input_ids']:1"], mark.apply
    assert "attention_mask" not in mark.text, mark.text


def test_a_stack_value_carried_across_a_break_is_named_as_such() -> None:
    """``pos = x[x > 0]`` breaks at nonzero; the code Dynamo resumes gets the masked value as
    ``___stack0``, whose length changes with the data: not a local, nor an input you pass."""
    advice = suggestion("tensor '___stack0' size mismatch at index 0. expected 35, actual 32",
                        {}, {"L['___stack0'].size()[0]"}, resumed=True)[0]
    assert "'___stack0' is the value your line was computing when the graph broke" in advice
    assert "maybe_mark_dynamic" not in advice, advice


def test_a_restarted_recompile_is_judged_by_the_attempt_that_made_its_graph(
        tmp_path: Path) -> None:
    """0/1 restarted at the break; 0/1_1 (its graph) holds the symbol for x's batch: the
    recompile's verdict is 0/1_1's ("makes it dynamic"), not the first attempt's (no
    symbol recorded: "did not make it dynamic")."""
    t = _trace(tmp_path)
    (c,) = [c for c in trace_summary(t)["compiles"] if c["id"] == "0/1"]
    said = c["recompile"]["suggestion"]
    assert "this compile makes it dynamic (automatic dynamic)" in said, said
    assert "did not make it dynamic" not in said, said
    (dyn,) = [s for s in recompile_advice(t) if s.id == "dynamic=True"]
    assert "0/1: dimension 0 of x changed (4 → 8); this compile made it dynamic" in dyn.why, dyn


def _loss_frame(root: Path, guard: str = "labels", fn: str = "ForCausalLMLoss",
                code: str = "out = self.m(input_ids=ids, labels=ids)",
                direct: bool | None = None) -> Trace:
    """transformers' ``ForCausalLMLoss(logits, labels)`` (a library file) recompiled for a
    longer batch: the model made both sizes symbols; the user's line passed ``labels=`` to
    the model, which computed ``logits`` itself. (``fn``, ``code``: another library function
    and the user's line calling it; ``direct``: the capture's ``called_at["direct"]``, None:
    not recorded.)"""
    w = TraceWriter(root, command=["tuidebug", "trace", "ddp_hf.py"])
    loss = "/venv/lib/python3.11/site-packages/transformers/loss/loss_utils.py"
    reasons = [f"8/0: tensor '{guard}' size mismatch at index 1. expected 8, actual 12"]
    for cid, rs in {"8/0": [], "8/1": reasons}.items():
        w.write_compile(cid, {"graphs": [], "metrics": {"co_name": fn,
                                                        "co_filename": loss,
                                                        "co_firstlineno": 51},
                              **({"recompile_reasons": rs} if rs else {})})
        w.add_compile(cid, {"graphs": []})
        w.write_compile_shapes(cid, {"id": cid, "symbols": [] if not rs else [
            {"name": "s38", "source": "L['labels'].size()[1]", "kind": "backed", "hint": 12},
            {"name": "s3", "source": "L['logits'].size()[1]", "kind": "backed", "hint": 12}],
            "recompile": {"reasons": rs, "values": {}, "called_at": {
                "file": "/job/ddp_hf.py", "line": 19, "fn": "forward", "code": code,
                **({} if direct is None else {"direct": direct})}} if rs else {}})
    w.finish("ok")
    return Trace(root)


def test_a_library_frame_is_marked_only_by_what_the_user_passes(tmp_path: Path) -> None:
    """torch.compile(DDP(GPT-2)), rank 1 fed a longer batch: advise offered
    ``maybe_mark_dynamic(logits, 1)`` (and ``maybe_mark_dynamic(labels, 1)``) for the
    recompile of transformers' loss, whose logits the model computes — a call on a tensor the
    user never holds. Only what the user's call passes is marked, named as they pass it."""
    t = _loss_frame(tmp_path / "t")
    (mark,) = [s for s in recompile_advice(t) if s.id.startswith("mark_dynamic")]
    assert "logits" not in mark.text, mark.text
    assert "torch._dynamo.maybe_mark_dynamic(t, 1) on the tensor t you pass as labels=" in \
        mark.text, mark.text
    assert mark.apply is not None and mark.apply.dynamic_sources == ["L['labels']:1"]
    # info's explanation of the recompile says the same
    from tuidebug.trace.queries.recompiles import explain_compile

    said = explain_compile(t, "8/1")["suggestion"]
    assert "maybe_mark_dynamic(t, 1) on the tensor t you pass as labels=" in said, said
    said = explain_compile(_loss_frame(tmp_path / "logits", "logits"), "8/1")["suggestion"]
    assert "maybe_mark_dynamic" not in said and "'logits' is not an input you pass yourself" \
        in said, said


def test_a_library_frame_called_positionally_is_marked_by_what_the_user_passes(
        tmp_path: Path) -> None:
    """A library module called with a positional argument (``out = model(images)`` into its
    ``forward(self, labels)``): the tensor is the user's, named as they pass it — it read
    "'labels' is not an input you pass yourself" and dropped maybe_mark_dynamic. An
    assignment target of that name is no keyword (``labels = model(labels)`` read "the tensor
    t you pass as labels="). A loss the model calls itself, the user's line calling the model
    positionally, still takes no tensor of the user's."""
    from tuidebug.trace.queries.recompiles import explain_compile

    said = explain_compile(_loss_frame(tmp_path / "a", fn="forward", code="out = model(images)",
                                       direct=True), "8/1")["suggestion"]
    assert "torch._dynamo.maybe_mark_dynamic(images, 1)" in said, said
    assert "not an input you pass yourself" not in said, said
    said = explain_compile(_loss_frame(tmp_path / "b", fn="forward",
                                       code="labels = model(labels)", direct=True),
                           "8/1")["suggestion"]
    assert "torch._dynamo.maybe_mark_dynamic(labels, 1)" in said, said
    assert "you pass as labels=" not in said, said
    said = explain_compile(_loss_frame(tmp_path / "c", fn="forward",
                                       code="out = model(images, mask)", direct=True),
                           "8/1")["suggestion"]
    assert "maybe_mark_dynamic(t, 1) on the tensor t you pass for labels" in said, said
    said = explain_compile(_loss_frame(tmp_path / "d", "logits", code="out = self.m(ids, labels=ids)"),
                           "8/1")["suggestion"]
    assert "maybe_mark_dynamic" not in said and "'logits' is not an input you pass yourself" \
        in said, said


def test_a_library_forward_the_users_line_does_not_call_is_not_theirs_to_mark(
        tmp_path: Path) -> None:
    """``out = model(images)`` runs the model, whose forward calls a submodule's: when that
    inner library ``forward`` recompiled, advice offered ``maybe_mark_dynamic(images, 1)`` — a
    call on the user's tensor for the submodule's input ``labels`` (any library frame named
    forward counted as the line's own call). Only the frame the line's call runs counts: the
    capture records whether anything but a module's ``__call__`` and torch.compile's wrappers
    stood between (``direct``); a trace without that record leaves it unknown — no such
    advice, and no claim that the tensor is not the user's."""
    from tuidebug.trace.queries.recompiles import explain_compile

    for direct, claim in ((False, "'labels' is not an input you pass yourself"),
                          (None, "whether you pass 'labels' yourself is not recorded")):
        t = _loss_frame(tmp_path / str(direct), fn="forward", code="out = model(images)",
                        direct=direct)
        said = explain_compile(t, "8/1")["suggestion"]
        assert "maybe_mark_dynamic" not in said and claim in said, said
        ids = [s.id for s in recompile_advice(t)]
        assert "dynamic=True" in ids and not any(i.startswith("mark_dynamic") for i in ids), ids
    # a function the line calls by name is its own call, recorded or not
    t = _loss_frame(tmp_path / "fn", fn="model", code="out = model(images)")
    (mark,) = [s for s in recompile_advice(t) if s.id.startswith("mark_dynamic")]
    assert "torch._dynamo.maybe_mark_dynamic(images, 1)" in mark.text, mark.text


def test_a_call_over_lines_is_the_users_only_where_the_capture_says_so(tmp_path: Path) -> None:
    """``outputs = model(`` (its arguments on the lines below: no whole statement, so no
    arguments read) counted as held whatever the capture recorded: an inner library
    ``forward`` that recompiled (``direct`` false) got ``maybe_mark_dynamic(labels, 1)``, a
    call on a tensor the user never holds (and a parameter name of the library's, not a
    variable of theirs). ``direct`` decides: false, not theirs; not recorded, not known; true,
    the tensor they pass for it."""
    from tuidebug.trace.queries.recompiles import explain_compile

    seen = 0
    for direct, claim in ((False, "'labels' is not an input you pass yourself"),
                          (None, "whether you pass 'labels' yourself is not recorded")):
        for code in ("outputs = model(", "out = model.generate("):
            t = _loss_frame(tmp_path / f"{direct}{seen}", fn="forward", code=code,
                            direct=direct)
            said = explain_compile(t, "8/1")["suggestion"]
            assert "maybe_mark_dynamic" not in said and claim in said, said
            ids = [s.id for s in recompile_advice(t)]
            assert "dynamic=True" in ids and not any(i.startswith("mark_dynamic")
                                                     for i in ids), ids
            seen += 1
    assert seen == 4
    t = _loss_frame(tmp_path / "direct", fn="forward", code="outputs = model(", direct=True)
    (mark,) = [s for s in recompile_advice(t) if s.id.startswith("mark_dynamic")]
    assert "torch._dynamo.maybe_mark_dynamic(t, 1) on the tensor t you pass for labels" in \
        mark.text, mark.text


def test_a_users_line_too_deep_or_long_to_parse_gives_no_arguments_not_a_crash() -> None:
    """The user's line comes from a trace: a generated line of many terms makes Python's parser
    (and ``ast.unparse``) recurse past its limit; the advice reads no arguments from it
    rather than crashing (before: RecursionError out of advice and the recompile view)."""
    import sys

    from tuidebug.trace.queries.held import MAX_LINE, call_args
    deep = "out = model(" + "+".join(["a"] * 500) + ")"
    assert len(deep) <= MAX_LINE
    limit = sys.getrecursionlimit()
    try:  # whatever the process's limit: torch raises it (CI read the 500 terms, once)
        for raised in (limit, 20_000):
            sys.setrecursionlimit(raised)
            assert call_args(deep) is None
    finally:
        sys.setrecursionlimit(limit)
    assert call_args("out = model(" + "+".join(["a"] * 20_000) + ")") is None
    plain = call_args("out = model(images, labels=y)")
    assert plain is not None and plain.positional == ("images",) and "labels" in plain.keywords


def test_a_call_with_another_number_of_keywords_is_explained(tmp_path: Path) -> None:
    """transformers' generate(cache_implementation="static") twice (prompts of 6 then 9
    tokens; torch 2.13's words): the prompt and each new token call forward with other
    keywords, so Dynamo's guard ``len(kwargs) == 6`` fails; info said "read the failed guard".
    The second prompt's recompile also failed 0/0's size guard, which is said with it."""
    from tuidebug.trace.queries.recompiles import explain

    count = ("len(kwargs) == {n}                                         # output = func(self,"
             " *args, **kwargs)  # transformers/utils/generic.py:943 in wrapper\nUser stack "
             "trace:\n  File \"/v/site-packages/transformers/utils/generic.py\", line 943, in "
             "wrapper\n    output = func(self, *args, **kwargs)")
    t = _one_frame(tmp_path / "t", {
        "0/0": [], "0/1": ["0/0: " + count.format(n=6)],
        "0/2": ["0/1: " + count.format(n=7), "0/0: tensor 'kwargs['input_ids']' size mismatch "
                                             "at index 1. expected 6, actual 9"]})
    one = explain("0/1", t.compiles, t.compile_shapes_brief("0/1"))
    assert one is not None and one["failed_guard"] == "len(kwargs) == 6", one
    said = one["suggestion"]
    assert said.startswith("this call passes another number of keyword arguments than the "
                           "compile before was made for (6): each set of keywords is compiled "
                           "once"), said
    assert "read the failed guard" not in said and "another compile's guard" not in said, said
    two = explain("0/2", t.compiles, t.compile_shapes_brief("0/2"))
    assert two is not None and two["failed_guard"] == "len(kwargs) == 7", two
    assert two["suggestion"].endswith("; another compile's guard failed too, 0/0's: tensor "
                                      "'kwargs['input_ids']' size mismatch at index 1. "
                                      "expected 6, actual 9"), two["suggestion"]
    assert recompile_advice(t) == []  # nothing to try: the keywords are generate()'s


def test_backed_size_oblivious_only_for_a_size_below_a_range_from_two(tmp_path: Path) -> None:
    """A size guard of another form (``3 < s``, ``s % 8 == 0``: the generic size advice, no
    expected value) whose call gave the size as 1: ``backed_size_oblivious`` was offered
    ("below the range (None)"), where only the range a dynamic compile holds from 2 (``2 <=
    …``, sizes 0 and 1 specialized) is what the flag changes. The BERT range keeps it."""
    def trace(root: Path, guard: str) -> Trace:
        w = TraceWriter(root, command=["tuidebug", "trace", "script.py"])
        src = "L['x'].size()[0]"
        for cid, rs in {"0/0": [], "0/1": [f"0/0: {guard}"]}.items():
            graph = f"{cid.replace('/', '_')}-inference"
            w.write_compile(cid, {"graphs": [graph], "metrics": {"co_name": "wrapper"},
                                  **({"recompile_reasons": rs} if rs else {})})
            w.add_compile(cid, {"graphs": [graph]})
            w.add_graph(graph, kind="inference", compile_id=cid)
            w.set_graph_status(graph, "ok")
            w.write_compile_shapes(cid, {
                "id": cid, "symbols": [{"name": "s0", "source": src, "kind": "backed",
                                        "hint": 5}] if cid == "0/0" else [],
                "recompile": {"reasons": rs, "values": {src: 1} if rs else {}}})
        w.finish("ok")
        return Trace(root)

    offered = {}
    for guard in ("3 < x.size()[0]", "x.size()[0] % 8 == 0", "2 <= x.size()[0] <= 64"):
        t = trace(tmp_path / str(len(offered)), guard)
        rec = explain("0/1", t.compiles, t.compile_shapes_brief("0/1"))
        assert rec is not None and rec["failed_guard"] == guard, rec
        assert str(rec["failing_value"]) == "1", rec
        ids = {s.id: s for s in recompile_advice(t)}
        offered[guard] = ids.get("backed_size_oblivious")
    assert len(offered) == 3
    assert offered["3 < x.size()[0]"] is None, offered
    assert offered["x.size()[0] % 8 == 0"] is None, offered
    range_ = offered["2 <= x.size()[0] <= 64"]
    assert range_ is not None and "(None)" not in range_.why, offered
