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
