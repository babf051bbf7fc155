"""A cache that grows by one each step, recognised from the recompile it causes (traces built
with the torch-free writer, the recompile reasons and symbols as torch 2.13 records them for
examples/decode_loop.py): transformers' cache gets a static KV cache that ``advise --try`` can
apply without editing the script; a cache of the user's own gets what to preallocate, a change
to the code that is listed and not tried."""

from __future__ import annotations

from pathlib import Path

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.queries.advice import recompile_advice
from tuidebug.trace.queries.advice_records import Apply
from tuidebug.trace.queries.cache_advice import STATIC_CACHE_LEN


def _trace(root: Path, name: str, source: str) -> Trace:
    """Compile 0/0, then 0/1 after ``name``'s dimension 2 grew from 6 to 7 (a symbol for it)."""
    w = TraceWriter(root, command=["tuidebug", "trace", "loop.py"])
    reason = f"0/0: tensor '{name}' size mismatch at index 2. expected 6, actual 7"
    for cid, extra in (("0/0", {}), ("0/1", {"recompile_reasons": [reason]})):
        w.write_compile(cid, {"graphs": [], "metrics": {"co_name": "forward",
                                                        "co_filename": "/home/u/loop.py"},
                              **extra})
        w.add_compile(cid, {"graphs": []})
    w.write_compile_shapes("0/1", {"id": "0/1", "symbols": [
        {"name": "s53", "source": f"{source}.size()[2]", "sources": [f"{source}.size()[2]"],
         "kind": "backed", "hint": 7}], "recompile": {"reasons": [reason], "values": {}}})
    w.finish("ok")
    return Trace(root)


def test_transformers_cache_gets_a_static_kv_cache_that_can_be_tried(tmp_path: Path) -> None:
    t = _trace(tmp_path / "hf", "kwargs['past_key_values'].layers[0].keys",
               "L['kwargs']['past_key_values'].layers[0].keys")
    found = {s.id: s for s in recompile_advice(t)}
    assert "static KV cache" in found and "preallocated cache" not in found, list(found)
    s = found["static KV cache"]
    assert "StaticCache(config=model.config, max_cache_len=N)" in s.text, s.text
    assert 'cache_implementation="static"' in s.text, s.text
    assert "transformers' KV cache and grows by one each step" in s.why, s.why
    assert s.apply == Apply(static_cache_len=STATIC_CACHE_LEN)
    assert Apply.from_json(s.apply.to_json()) == s.apply  # as advice.json keeps it
    assert f"static cache of {STATIC_CACHE_LEN} positions" in s.apply.describe()
    assert "dynamic=True" in found  # the other suggestion for it, tried beside it


def test_a_cache_of_the_users_own_gets_what_to_preallocate_not_tried(tmp_path: Path) -> None:
    t = _trace(tmp_path / "own", "kv_cache", "L['kv_cache']")
    found = {s.id: s for s in recompile_advice(t)}
    assert "static KV cache" not in found, list(found)  # no transformers cache to swap
    s = found["preallocated cache"]
    assert s.apply is None and not s.to_json()["tryable"]
    assert "preallocate the cache at its largest length (dimension 2 of kv_cache" in s.text
    assert "in place" in s.text and "grows by one each step" in s.why
    # the user passes it: marking it dynamic is offered too, and can be tried
    assert found["mark_dynamic kv_cache 2"].apply == Apply(dynamic_sources=["L['kv_cache']:2"])


def _three_compiles(root: Path, shapes_02: dict) -> Trace:
    """0/0 a 5-token prefill, 0/1 the 1-token decode step, 0/2 a 7-token prefill whose guards
    failed on both (as torch 2.13 words them); 0/2's shapes record is ``shapes_02``."""
    w = TraceWriter(root, command=["tuidebug", "trace", "gen.py"])
    ids = "kwargs['input_ids']"
    reasons = {"0/1": [f"0/0: tensor '{ids}' size mismatch at index 1. expected 5, actual 1"],
               "0/2": [f"0/1: tensor '{ids}' size mismatch at index 1. expected 1, actual 7",
                       f"0/0: tensor '{ids}' size mismatch at index 1. expected 5, actual 7"]}
    for cid in ("0/0", "0/1", "0/2"):
        w.write_compile(cid, {"graphs": [], "metrics": {"co_name": "wrapper",
                                                        "co_filename": "/x/generic.py"},
                              **({"recompile_reasons": reasons[cid]} if cid in reasons else {})})
        w.add_compile(cid, {"graphs": []})
    w.write_compile_shapes("0/2", {"id": "0/2", **shapes_02,
                                   "recompile": {"reasons": reasons["0/2"], "values": {}}})
    w.finish("ok")
    return Trace(root)


def test_a_size_one_compile_before_is_not_the_only_one_a_new_size_failed(tmp_path: Path) -> None:
    """Qwen2 generate(cache_implementation="static") twice, prompts of 5 then 7 tokens: 0/0
    the 5-token prefill, 0/1 the 1-token decode step, 0/2 the 7-token prefill, whose guards
    failed on both (``expected 1, actual 7`` and ``expected 5, actual 7``). The 1 was read as
    the only size before: "compiles again even with torch.compile(dynamic=True) or the
    dimension marked dynamic", and advise offered only backed_size_oblivious. With
    dynamic=True the 5-token compile holds the length as a symbol and may serve 7 too; 0/2
    holds it as a symbol (automatic dynamic), so later sizes reuse it."""
    from tuidebug.trace.queries.recompiles import explain

    src = "L['kwargs']['input_ids'].size()[1]"
    t = _three_compiles(tmp_path / "t", {"symbols": [
        {"name": "s27", "source": src, "sources": [src], "kind": "backed", "hint": 7}]})
    rec = explain("0/2", t.compiles, t.compile_shapes_brief("0/2"))
    assert rec is not None and "even with torch.compile(dynamic=True)" not in rec["suggestion"], rec
    said = rec["suggestion"]
    assert "was 1 in the compile before and 5 in 0/0" in said, said
    assert "would have compiled 0/0 with a symbol for it, which may serve 7" in said, said
    assert "later sizes reuse it" in said, said
    assert "maybe_mark_dynamic(t, 1) on the tensor t you pass as input_ids=" in said, said
    found = {s.id: s for s in recompile_advice(t)}
    assert "dynamic=True" in found, list(found)
    assert "(5 in 0/0 → 7)" in found["dynamic=True"].why, found["dynamic=True"].why
    assert any(i.startswith("mark_dynamic") for i in found), list(found)
    # 0/1 (5 → 1) held the length fixed at 5 in 0/0: the flag cannot avoid it; 0/1 made it
    # dynamic (it recompiled on it) and specialized the 1, so the flag may avoid 0/2 (checked
    # on torch 2.13: 5, 1, 7 compile 3 times, twice with backed_size_oblivious)
    why = found["backed_size_oblivious"].why
    assert why.startswith("0/2: dimension 1 of kwargs['input_ids'] was 1 in 0/1"), why
    assert "it recompiled on it" in why and "may serve 7" in why, why


def test_a_size_the_code_specialized_is_not_said_to_be_served_by_an_earlier_wider_compile(
        tmp_path: Path) -> None:
    """As above, but 0/2 specialized the length again (``range(x.shape[1])``: its symbol
    replaced by 7): each length compiles once whatever is dynamic, so neither explain nor
    advise may say dynamic=True "may serve 7" or offer dynamic=True / marking it."""
    from tuidebug.trace.queries.recompiles import explain

    src = "L['kwargs']['input_ids'].size()[1]"
    t = _three_compiles(tmp_path / "t", {"symbols": [
        {"name": "s27", "source": src, "sources": [src], "kind": "backed", "hint": 7,
         "replaced_by": "7"}], "specializations": []})
    rec = explain("0/2", t.compiles, t.compile_shapes_brief("0/2"))
    assert rec is not None and rec["wider"] == [{"compile": "0/0", "size": "5"}], rec
    assert "may serve" not in rec["suggestion"], rec["suggestion"]
    assert "then specialized it to 7" in rec["suggestion"], rec["suggestion"]
    assert "does not change that" in rec["suggestion"], rec["suggestion"]
    found = {s.id: s for s in recompile_advice(t)}
    assert "dynamic=True" not in found and not any(i.startswith("mark_dynamic") for i in found), \
        list(found)
    # 0/1 (5 → 1) followed a compile that held 5 fixed, 0/2 is the code's need of the size:
    # the flag avoids neither
    assert "backed_size_oblivious" not in found, list(found)


def test_a_decode_step_after_a_prefill_gets_no_backed_size_oblivious(tmp_path: Path) -> None:
    """A 6-token prefill, then one-token decode steps (examples/decode_loop.py's pattern, a
    static KV cache; torch 2.13's words): 0/0 held the length fixed at 6, so the decode step
    fails its guard whatever the flag. advise offered backed_size_oblivious, and `advise --try`
    measured it: "tried, did not help: compiles 2 → 2"; the recompile's explanation pointed at
    advise for it."""
    from tuidebug.trace.queries.recompiles import explain

    w = TraceWriter(tmp_path / "t", command=["tuidebug", "trace", "decode.py"])
    reason = "0/0: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 6, actual 1"
    for cid in ("0/0", "0/1"):
        w.write_compile(cid, {"graphs": [], "metrics": {"co_name": "wrapper",
                                                        "co_filename": "/x/generic.py"},
                              **({"recompile_reasons": [reason]} if cid == "0/1" else {})})
        w.add_compile(cid, {"graphs": []})
    w.write_compile_shapes("0/1", {"id": "0/1", "symbols": [], "specializations": [],
                                   "recompile": {"reasons": [reason], "values": {}}})
    w.finish("ok")
    t = Trace(tmp_path / "t")
    rec = explain("0/1", t.compiles, t.compile_shapes_brief("0/1"))
    assert rec is not None and "a compile of its own" in rec["suggestion"], rec
    assert "backed_size_oblivious" not in {s.id for s in recompile_advice(t)}
    assert "nor does backed_size_oblivious: the compile before held 6 as a fixed size" in \
        rec["suggestion"], rec["suggestion"]
    assert "tries what may" not in rec["suggestion"], rec["suggestion"]


def test_a_size_after_a_one_that_the_code_specialized_gets_no_backed_size_oblivious(
        tmp_path: Path) -> None:
    """0/0 held the length 1 (always specialized), 0/1 the length 7, which the code specialized
    again (``range(x.shape[1])``: its symbol replaced by 7): sizes 0 and 1 are not what makes
    7 compile again, the code's need of the size is; backed_size_oblivious (or dynamic=True)
    would not avoid it, and explain says why."""
    from tuidebug.trace.queries.recompiles import explain

    w = TraceWriter(tmp_path / "t", command=["tuidebug", "trace", "loop.py"])
    reason = "0/0: tensor 'x' size mismatch at index 1. expected 1, actual 7"
    for cid in ("0/0", "0/1"):
        w.write_compile(cid, {"graphs": [], "metrics": {"co_name": "f", "co_filename": "/x/l.py"},
                              **({"recompile_reasons": [reason]} if cid == "0/1" else {})})
        w.add_compile(cid, {"graphs": []})
    src = "L['x'].size()[1]"
    w.write_compile_shapes("0/1", {"id": "0/1", "symbols": [
        {"name": "s1", "source": src, "sources": [src], "kind": "backed", "hint": 7,
         "replaced_by": "7"}], "recompile": {"reasons": [reason], "values": {}}})
    w.finish("ok")
    t = Trace(tmp_path / "t")
    rec = explain("0/1", t.compiles, t.compile_shapes_brief("0/1"))
    assert rec is not None and "then specialized it to 7" in rec["suggestion"], rec
    assert [s.id for s in recompile_advice(t)] == [], recompile_advice(t)
