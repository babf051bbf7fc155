"""Recompiles on a Python number or bool the compile held as a constant, and the advice they
get. The trace is built with the torch-free writer from what a real run (torch 2.13) of this
script recorded::

    @torch.compile
    def f(x, n):
        for _ in range(n):
            x = x * 2
        return x

    for n in (2, 3, 4):
        f(torch.ones(4), n)

Each recompile makes ``n`` a symbol and the loop specializes it again (``Eq(s86, 3)``): every
value compiles once, with torch.compile(dynamic=True) as without (checked with plain torch:
n = 2, 3, 4, 5 made 4 graphs either way). It was told "this compile makes it a symbol
(automatic dynamic), so later values reuse it; to compile once, use dynamic=True", and advise
offered dynamic=True."""

from __future__ import annotations

import json
from pathlib import Path

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.queries.advice import recompile_advice
from tuidebug.trace.queries.failed_guard import guard_of
from tuidebug.trace.queries.recompile_suggestion import suggestion
from tuidebug.trace.queries.recompiles import explain
from tuidebug.trace.queries.summary import trace_summary
from tuidebug.viewers.dynamic_view import dynamic_notes

LINE = {"file": "/tmp/u/loopn.py", "line": 5, "fn": "f", "code": "for _ in range(n):"}
STACK = ('\nUser stack trace:\n  File "/tmp/u/loopn.py", line 5, in f\n    for _ in range(n):')
N2 = ("0/0: n == 2                                                   # for _ in range(n):  "
      "# mp/u/loopn.py:5 in f" + STACK)
N3 = ("0/1: n == 3  # for _ in range(n):  # mp/u/loopn.py:5 in f (_dynamo/variables/tensor.py:"
      "2606 in evaluate_expr)")
REASONS = {"0/0": [], "0/1": [N2], "0/2": [json.dumps([N3, N2])]}


def _specialized(value: int, source: str = "L['n']", line: dict = LINE) -> dict:
    return {"symbols": [{"name": "s86", "source": source, "sources": [source],
                         "kind": "backed", "hint": value, "lower": value, "upper": value,
                         "range": f"Eq(s86, {value})", "replaced_by": str(value),
                         "user_line": line}],
            "specializations": [{"symbol": "s86", "source": source, "sources": [source],
                                 "value": value, "reason": "range_refined_to_singleton",
                                 "guard": f"Eq(s86, {value})", "user_line": line}]}


def _trace(tmp_path: Path, reasons: dict[str, list[str]] = REASONS,
           source: str = "L['n']", line: dict = LINE) -> Trace:
    """The three compiles of ``reasons``, each recompile with ``source`` made a symbol and
    specialized again (to 3, then 4) at ``line``."""
    w = TraceWriter(tmp_path / "t", command=["tuidebug", "trace", "loopn.py"])
    for i, (cid, rs) in enumerate(reasons.items()):
        graph = f"{cid.replace('/', '_')}-inference"
        w.write_compile(cid, {"graphs": [graph], "metrics": {"co_name": "f"},
                              **({"recompile_reasons": rs} if rs else {})})
        w.add_compile(cid, {"graphs": [graph]})
        w.add_graph(graph, kind="inference", compile_id=cid)
        w.set_graph_status(graph, "ok")
        shapes = (_specialized(2 + i, source, line) if i
                  else {"symbols": [], "specializations": []})
        w.write_compile_shapes(cid, {"id": cid, **shapes, "recompile": {
            "reasons": rs, "values": {}, "called_at": {**LINE, "line": 11,
                                                       "fn": "<module>", "code": "f(x, n)"}}})
    w.finish("ok")
    return Trace(tmp_path / "t")


def _advice_of_specialized(t: Trace, source: str, said: str) -> list[str]:
    """Each recompile's advice (0/1 specialized to 3, 0/2 to 4), checked to name the
    specialization (``said``: what follows the value and its guard) and promise nothing; advise
    then offers nothing."""
    out = []
    for cid, value in (("0/1", 3), ("0/2", 4)):
        rec = explain(cid, t.compiles, t.compile_shapes_brief(cid))
        assert rec is not None and rec["source"] == source, rec
        advice = rec["suggestion"]
        assert "to compile once" not in advice and "maybe_mark_dynamic" not in advice, advice
        assert f"then specialized it to {value} (Eq(s86, {value})) at {said}" in advice, advice
        assert "torch.compile(dynamic=True) does not change that" in advice, advice
        (c,) = [c for c in trace_summary(t)["compiles"] if c["id"] == cid]
        text = " ".join(x.plain for x in dynamic_notes(c))
        assert "reuse it" not in text, text
        out.append(advice)
    assert len(out) == 2
    assert [s.id for s in recompile_advice(t)] == [], recompile_advice(t)
    return out


def test_an_int_the_code_specializes_gets_no_dynamic_true(tmp_path: Path) -> None:
    for advice in _advice_of_specialized(_trace(tmp_path), "L['n']", "loopn.py:5 `for _ in "
                                         "range(n):`: the code there needs its value"):
        assert advice.startswith("the Python int 'n' is a constant of the compile and its "
                                 "value changed: this compile made it a symbol"), advice


def test_a_size_the_code_specializes_gets_no_dynamic_true(tmp_path: Path) -> None:
    """``for i in range(x.shape[0])`` called with sizes 2, 3, 4 (the reasons and records a
    real run wrote): each recompile makes the size a symbol and the loop specializes it; plain
    torch with 2, 3, 4, 5 made 4 graphs with dynamic=True and with maybe_mark_dynamic too.
    It was told "to compile once, call maybe_mark_dynamic(x, 0) … or use dynamic=True", and
    advise offered both."""
    size = "tensor 'x' size mismatch at index 0. expected {}, actual {}"
    line = {**LINE, "file": "/tmp/u/loopdim.py", "code": "for i in range(x.shape[0]):"}
    t = _trace(tmp_path, {"0/0": [], "0/1": [f"0/0: {size.format(2, 3)}"],
                          "0/2": [f"0/1: {size.format(3, 4)}", f"0/0: {size.format(2, 4)}"]},
               "L['x'].size()[0]", line)
    for advice in _advice_of_specialized(t, "L['x'].size()[0]",
                                         "loopdim.py:5 `for i in range(x.shape[0]):`"):
        assert advice.startswith("dimension 0 of 'x' changed size: this compile made it "
                                 "dynamic, then"), advice


def test_a_number_the_compile_did_not_make_a_symbol_gets_no_dynamic_true() -> None:
    """"each value compiles once; to compile once, use dynamic=True" contradicted itself."""
    advice, source, expected, _ = suggestion("n == 2", {}, set())
    assert (source, expected) == ("L['n']", "2")
    assert "did not make it a symbol: each value compiles once" in advice, advice
    assert "dynamic=True" not in advice, advice
    advice, _, _, _ = suggestion("scale == 2.0", {}, set())
    assert "dynamic=True" not in advice and "pass it as a tensor" in advice, advice
    # a symbol the compile kept: automatic dynamic made it one, dynamic=True saves a compile
    advice, _, _, _ = suggestion("n == 2", {}, {"L['n']"})
    assert "makes it a symbol" in advice and "torch.compile(dynamic=True)" in advice, advice
    assert "unless" not in advice, advice
    # no shapes record (an import): whether a symbol was made is not known, nor promised
    advice, _, _, _ = suggestion("n == 2", {}, None)
    assert "dynamic=True) (unless the code needs its value, as a loop count does)" in advice, \
        advice


def test_a_global_number_is_named_by_its_global_source() -> None:
    advice, source, expected, _ = suggestion("G['scale'] == 2.0", {}, set())
    assert (source, expected) == ("G['scale']", "2.0"), source
    assert advice.startswith("the Python float 'scale' is a constant"), advice
    assert "L['G']" not in advice and "dynamic=True" not in advice, advice


def test_a_bool_guard_does_not_invent_the_new_value() -> None:
    """``flag == True`` fails for False, None or any other object (plain torch: called with
    True then None, TORCH_LOGS=recompiles names ``flag == True``, then ``flag is None``)."""
    advice, source, expected, actual = suggestion("flag == True", {}, set())
    assert (source, expected, actual) == ("L['flag']", "True", None)
    assert "changed (it was True)" in advice, advice
    assert "→" not in advice and "False" not in advice, advice


def test_a_size_that_was_one_with_automatic_dynamic_off_is_not_said_dynamic() -> None:
    text = "tensor 'x' size mismatch at index 0. expected 1, actual 2"
    advice, _, _, _ = suggestion(text, {"automatic_dynamic_shapes": False}, None)
    assert "makes it dynamic" not in advice, advice
    assert "automatic dynamic shapes are off here" in advice, advice
    # no shapes record: whether it made a symbol is not known, so not claimed
    advice, _, _, _ = suggestion(text, {}, None)
    assert "makes it dynamic" not in advice and "did not make it" not in advice, advice
    advice, _, _, _ = suggestion(text, {}, {"L['x'].size()[0]"})
    assert "this compile makes it dynamic (automatic dynamic)" in advice, advice


def test_a_comment_marker_inside_a_string_constant_is_part_of_the_guard() -> None:
    guard, at = guard_of("L['sep'] == '  # '                                      # return "
                         "sep.join(y)  # mp/u/j.py:3 in f")
    assert guard == "L['sep'] == '  # '", guard
    assert at is None
    assert guard_of("n == 2  # for _ in range(n):  # a.py:5 in f")[0] == "n == 2"


def test_a_tensor_message_with_quotes_is_cut_at_its_first_comment() -> None:
    """Not code (its quotes unbalanced): the comment begins at the first marker, whatever
    quotes the user's line holds."""
    text = ("expected type of 'mask' to be a tensor type, ' but found <class 'NoneType'>  # "
            "y = f(x, 'a')  # a.py:3 in g")
    assert guard_of(text)[0] == ("expected type of 'mask' to be a tensor type, ' but found "
                                 "<class 'NoneType'>")
