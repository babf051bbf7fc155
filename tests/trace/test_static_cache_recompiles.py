"""Recompile advice for a user already on transformers' static KV cache, and for a recompile
whose call changed more than a mark covers (traces built with the torch-free writer, reasons,
symbols and guards as torch 2.13 recorded them for Llama with a new ``StaticCache(config,
max_cache_len=n + 4)`` per prompt of 6 then 9 tokens, each followed by one-token decode steps:
compiles 0/0 prefill 6, 0/1 decode, 0/2 prefill 9, 0/3 decode). ``advise --try`` measured
there: dynamic=True 4 → 2 compiles; maybe_mark_dynamic(input_ids, 1) 4 → 4;
backed_size_oblivious 4 → 4."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.queries.advice import recompile_advice
from tuidebug.trace.queries.recompiles import explain_compile

PKV = "L['kwargs']['past_key_values']"
IDS = "L['kwargs']['input_ids'].size()[1]"
_N = itertools.count(10)


def _sym(source: str, hint: int) -> dict[str, Any]:
    return {"name": f"s{next(_N)}", "source": source, "sources": [source],
            "kind": "backed", "hint": hint}


# every compile of a static cache (5.x) reads its filled length: a symbol of each
_FILLED = [_sym(f"{PKV}.layers[{i}].cumulative_length.item()", 6) for i in (0, 1)]


def _trace(root: Path, reasons: dict[str, list[str]], symbols: dict[str, list[dict[str, Any]]],
           guards: dict[str, str] | None = None) -> Trace:
    w = TraceWriter(root, command=["tuidebug", "trace", "static2.py"])
    for cid in sorted({"0/0", *reasons, *symbols}):
        extra: dict[str, Any] = {"recompile_reasons": reasons[cid]} if cid in reasons else {}
        if guards and cid in guards:
            extra["guards"] = guards[cid]
        w.write_compile(cid, {"graphs": [], "metrics": {
            "co_name": "wrapper", "co_filename": "/v/site-packages/transformers/utils/generic.py"},
            **extra})
        w.add_compile(cid, {"graphs": []})
        w.write_compile_shapes(cid, {"id": cid, "symbols": symbols.get(cid, []),
                                     "recompile": {"reasons": reasons.get(cid, []), "values": {},
                                                   "called_at": {
                                                       "file": "/home/u/static2.py", "line": 13,
                                                       "fn": "<module>", "code":
                                                       "out = step(input_ids=ids, past_key_values="
                                                       "cache, use_cache=True, cache_position=pos)"}}})
    w.finish("ok")
    return Trace(root)


def _keys_changed(root: Path, evidence: str) -> Trace:
    """0/1 after the static cache's keys went from 10 to 13 positions (a new StaticCache of
    another max_cache_len), the cache known static by its symbols or by 0/0's guards only."""
    keys = f"{PKV}.layers[0].keys"
    reason = ("0/0: tensor 'kwargs['past_key_values'].layers[0].keys' size mismatch at index 2. "
              "expected 10, actual 13")
    grown = [_sym(f"{keys}.size()[2]", 13)]
    if evidence == "symbols":  # the new cache's length, held as a symbol (automatic dynamic)
        held = [_sym(f"{PKV}.layers[{i}].max_cache_len", 13) for i in (0, 1)]
        return _trace(root, {"0/1": [reason]}, {"0/0": _FILLED, "0/1": _FILLED + held + grown})
    guard = (f"| | +- EQUALS_MATCH: {PKV}.layers[0].max_cache_len == 10  # self.keys = "
             "torch.zeros(...)  # transformers/cache_utils.py:440 in lazy_initialization\n")
    return _trace(root, {"0/1": [reason]}, {"0/0": [], "0/1": grown}, {"0/0": guard})


def test_a_static_cache_is_never_told_to_use_a_static_cache(tmp_path: Path) -> None:
    """It was: the cache advice read only the tensor's name (``past_key_values.layers[0].keys``
    names a DynamicCache's keys and a StaticCache's alike), so a user on StaticCache whose
    cache's length changed got "use a static KV cache" in info and advise."""
    for evidence in ("symbols", "guards"):
        t = _keys_changed(tmp_path / evidence, evidence)
        found = {s.id: s for s in recompile_advice(t)}
        assert "static KV cache" not in found, (evidence, list(found))
        s = found["one max_cache_len"]
        assert s.apply is None and "build every StaticCache with one max_cache_len" in s.text
        assert "StaticCache of another max_cache_len" in s.why, s.why
        said = (explain_compile(t, "0/1") or {}).get("suggestion") or ""
        assert "use a static KV cache" not in said and "avoids it" not in said, said
        assert "its length changed (10 → 13)" in said, said
        assert "build every StaticCache with one max_cache_len" in said, said


def test_a_growing_dynamic_cache_still_gets_a_static_one(tmp_path: Path) -> None:
    keys = "L['kwargs']['past_key_values'].layers[0].keys"
    reason = ("0/0: tensor 'kwargs['past_key_values'].layers[0].keys' size mismatch at index 2. "
              "expected 6, actual 7")
    t = _trace(tmp_path / "t", {"0/1": [reason]}, {"0/0": [], "0/1": [_sym(f"{keys}.size()[2]", 7)]})
    found = {s.id for s in recompile_advice(t)}
    assert "static KV cache" in found and "one max_cache_len" not in found, found
    assert "use a static KV cache" in (explain_compile(t, "0/1") or {})["suggestion"]



def test_a_growing_sliding_window_cache_is_not_called_a_static_one(tmp_path: Path) -> None:
    """transformers' DynamicSlidingWindowLayer (Mistral, Gemma, Qwen) keeps a
    ``cumulative_length`` too: a growing DynamicCache of such layers, whose compiles read it,
    was called "already a static cache" (and offered one max_cache_len). Only
    ``max_cache_len`` tells a static cache."""
    keys = f"{PKV}.layers[0].keys"
    reason = ("0/0: tensor 'kwargs['past_key_values'].layers[0].keys' size mismatch at index 2. "
              "expected 6, actual 7")
    t = _trace(tmp_path / "t", {"0/1": [reason]},
               {"0/0": _FILLED, "0/1": _FILLED + [_sym(f"{keys}.size()[2]", 7)]})
    found = {s.id for s in recompile_advice(t)}
    assert "static KV cache" in found and "one max_cache_len" not in found, found
    said = (explain_compile(t, "0/1") or {})["suggestion"]
    assert "use a static KV cache" in said and "StaticCache of another" not in said, said


_REASONS = {
    "0/1": ["0/0: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 6, actual 1"],
    "0/2": ["0/1: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 1, actual 9",
            "0/0: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 6, actual 9"]}


def _prompts(root: Path, lengths_changed: bool) -> Trace:
    """0/0, 0/1, 0/2 as above; 0/2 holds the prompt's length as a symbol and, where each
    prompt got a StaticCache of its own length, its max_cache_len too (automatic dynamic)."""
    new = [_sym(IDS, 9)] + ([_sym(f"{PKV}.layers[{i}].max_cache_len", 13) for i in (0, 1)]
                            if lengths_changed else [])
    return _trace(root, _REASONS, {"0/0": _FILLED, "0/1": _FILLED, "0/2": _FILLED + new})


def test_a_mark_is_not_offered_where_the_call_changed_what_it_does_not_cover(
        tmp_path: Path) -> None:
    """maybe_mark_dynamic(input_ids, 1) and backed_size_oblivious were offered for 0/2 and
    measured 4 → 4: the second prompt came with a cache of another max_cache_len, which 0/0 and
    0/1 held fixed (0/2 holds it as a new symbol), so neither could serve it whatever held the
    prompt's length. dynamic=True (measured 4 → 2) stays, saying why; one max_cache_len is
    offered."""
    t = _prompts(tmp_path / "t", lengths_changed=True)
    found = {s.id: s for s in recompile_advice(t)}
    assert not [i for i in found if "mark_dynamic" in i or "dynamic_sources" in i], list(found)
    assert "backed_size_oblivious" not in found, found["backed_size_oblivious"].why
    why = found["dynamic=True"].why
    assert "the same call changed past_key_values.layers[i].max_cache_len" in why, why
    assert "one max_cache_len" in found and "static KV cache" not in found, list(found)
    said = (explain_compile(t, "0/2") or {})["suggestion"]
    assert "maybe_mark_dynamic" not in said, said
    assert "which marking \"kwargs['input_ids']\" does not cover" in said, said


def _filled(value: bool) -> str:
    """A compile's guards on whether the static cache was filled (a fresh StaticCache is filled
    lazily by its first call: the prefill sees False, each decode step True)."""
    return "".join(f"| | +- EQUALS_MATCH: {PKV}.layers[{i}].is_initialized == {value}  # if not "
                   "self.is_initialized:  # transformers/cache_utils.py:470 in update\n"
                   for i in (0, 1))


def test_the_same_prompts_on_one_cache_length_keep_the_mark_not_the_flag(tmp_path: Path) -> None:
    """One StaticCache(max_cache_len=32) per prompt (measured on torch 2.13: 3 compiles; 2 with
    maybe_mark_dynamic(input_ids, 1); 3 with backed_size_oblivious): 0/0, the prefill of a
    fresh cache, held as a symbol serves 9 (the mark stays); 0/1, whose length the flag would
    hold as a symbol, was compiled for a filled cache (is_initialized == True) and the 9 comes
    with a fresh one, so the flag cannot let it serve the call (it was offered: "may serve
    9")."""
    t = _trace(tmp_path / "t", _REASONS,
               {"0/0": _FILLED, "0/1": _FILLED, "0/2": _FILLED + [_sym(IDS, 9)]},
               {"0/0": _filled(False), "0/1": _filled(True), "0/2": _filled(False)})
    found = {s.id for s in recompile_advice(t)}
    assert "mark_dynamic kwargs['input_ids'] 1" in found and "dynamic=True" in found, found
    assert "backed_size_oblivious" not in found and "one max_cache_len" not in found, found
    said = (explain_compile(t, "0/2") or {})["suggestion"]
    assert "maybe_mark_dynamic(t, 1)" in said and "does not cover" not in said, said


def test_without_guards_recorded_the_flag_stays_offered(tmp_path: Path) -> None:
    t = _prompts(tmp_path / "t", lengths_changed=False)
    found = {s.id for s in recompile_advice(t)}
    assert "mark_dynamic kwargs['input_ids'] 1" in found, found
    assert "backed_size_oblivious" in found and "one max_cache_len" not in found, found


def test_info_and_advise_give_one_answer_for_a_positional_input(tmp_path: Path) -> None:
    """A DataLoader's smaller last batch on torch.compile(nn.Sequential(...)): info said
    maybe_mark_dynamic(t, 0) on args[0] while advise offered dynamic_sources; both now ask
    recompile_suggestion.is_passed and both say maybe_mark_dynamic."""
    reason = "0/0: tensor 'args[0]' size mismatch at index 0. expected 4, actual 2"
    t = _trace(tmp_path / "t", {"0/1": [reason]},
               {"0/0": [], "0/1": [_sym("L['args'][0].size()[0]", 2)]})
    said = (explain_compile(t, "0/1") or {})["suggestion"]
    assert "torch._dynamo.maybe_mark_dynamic(t, 0) on the tensor t you pass as argument 0" in said
    found = {s.id: s for s in recompile_advice(t)}
    assert not [i for i in found if i.startswith("dynamic_sources")], list(found)
    s = found["mark_dynamic args[0] 0"]
    assert "torch._dynamo.maybe_mark_dynamic(t, 0) on the tensor t you pass as argument 0" in \
        s.text, s.text
    assert s.apply is not None and s.apply.dynamic_sources == ["L['args'][0]:0"]


def test_a_change_beside_drops_only_the_mark() -> None:
    """What else changed takes away the mark, not what else is true of the input."""
    from tuidebug.trace.queries.recompile_suggestion import suggestion

    stride = suggestion("tensor 'x' stride mismatch at index 0. expected 4, actual 1", {}, set(),
                        also=["L['n']"])[0]
    assert stride.startswith("the memory layout of 'x' changed"), stride
    size = suggestion("tensor 'x' size mismatch at index 0. expected 4, actual 5", {}, set(),
                      also=["L['n']"])[0]
    assert "maybe_mark_dynamic" not in size, size
    assert "use torch.compile(dynamic=True); the same call changed n too" in size, size


def test_a_tensor_inside_a_dict_batch_is_a_change_a_mark_does_not_cover(
        tmp_path: Path) -> None:
    """A call passing ``input_ids`` and a dict ``batch`` whose mask's length changed with it:
    a mark on ``input_ids`` (the one the advice can offer: ``is_passed``) leaves the mask's
    length fixed, and the call still recompiles (a review found the mark offered there alone).
    Such a change withholds the mark and keeps dynamic=True, said so; the failed guard's own
    source (a nested input's) is never a change "too"."""
    from tuidebug.trace.queries.changed_with import unmarked_changes

    mask = "L['kwargs']['batch']['attention_mask'].size()[1]"
    reason = "0/0: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 6, actual 9"
    syms = [_sym(IDS, 9), _sym(mask, 9)]
    t = _trace(tmp_path / "t", {"0/1": [reason]}, {"0/0": [], "0/1": syms})
    assert unmarked_changes(t, "0/1", "0/0") == [mask]
    assert unmarked_changes(t, "0/1", "0/0", failed=mask) == []
    found = {s.id: s for s in recompile_advice(t)}
    assert "mark_dynamic kwargs['input_ids'] 1" not in found, list(found)
    why = found["dynamic=True"].why
    assert "batch['attention_mask']" in why and " too" in why, why
    # the same call without the mask's change: the mark covers it
    t2 = _trace(tmp_path / "t2", {"0/1": [reason]}, {"0/0": [], "0/1": [_sym(IDS, 9)]})
    assert "mark_dynamic kwargs['input_ids'] 1" in {s.id for s in recompile_advice(t2)}
