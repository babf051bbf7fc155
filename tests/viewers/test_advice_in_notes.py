"""A recompile's advice that names what ``advise --try`` tried says how that went (the advice
text is written before anything is tried; the measurement may say it does not help)."""

from __future__ import annotations

from tuidebug.viewers.dynamic_view import dynamic_notes

COMPILE = {"id": "0/2", "recompile": {
    "previous": "0/1", "failed_guard": "tensor 'kwargs['past_key_values'].layers[0].keys' size "
    "mismatch at index 2. expected 6, actual 7", "failing_value": 7, "limit_hit": False,
    "suggestion": "dimension 2 of ... changed size: to compile once, use "
                  "torch.compile(dynamic=True); or a static KV cache"}}


def test_tried_advice_is_marked_under_the_recompile() -> None:
    tried = {"dynamic=True": {"id": "dynamic=True", "helped": False,
                              "verdict": "tried, did not help: compiles 3 → 3, graph breaks 0 → 0"}}
    lines = [t.plain for t in dynamic_notes(COMPILE, tried)]
    assert any(ln.strip() == "dynamic=True was tried: tried, did not help: compiles 3 → 3, "
               "graph breaks 0 → 0" for ln in lines), lines
    assert not any("was tried" in ln for ln in (t.plain for t in dynamic_notes(COMPILE)))


def test_a_recompile_names_the_users_line_that_called_it() -> None:
    """The capture keeps the user's line whose call recompiled (``called_at``); ``info`` shows
    it under the recompile — a decode step's call, not the library frame that was compiled."""
    from tuidebug.trace.queries.recompiles import explain

    called = {"file": "/home/u/decode_loop.py", "line": 37, "fn": "main",
              "code": "out = step(input_ids=nxt, past_key_values=out.past_key_values)"}
    reason = "0/0: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 6, actual 1"
    compiles = {"0/0": {}, "0/1": {"recompile_reasons": [reason]}}
    rec = explain("0/1", compiles, {"recompile": {"reasons": [reason], "values": {},
                                                  "called_at": called}})
    assert rec is not None and rec["called_at"] == called
    lines = [t.plain for t in dynamic_notes({"id": "0/1", "recompile": rec})]
    assert "      called at decode_loop.py:37  out = step(input_ids=nxt, " \
        "past_key_values=out.past_key_values)" in lines, lines
    # a trace made before the capture kept it: no line, nothing invented
    old = explain("0/1", compiles, {"recompile": {"reasons": [reason], "values": {}}})
    assert old is not None and old["called_at"] is None
    assert not any("called at" in t.plain for t in dynamic_notes({"id": "0/1", "recompile": old}))
