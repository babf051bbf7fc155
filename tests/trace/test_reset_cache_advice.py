"""dynamic=True is not offered where no compile it could let serve the call holds the call's
constants: one StaticCache reset() between prompts (a tiny Llama, prompts of 5 then 7 tokens,
one-token decode steps; torch 2.13, transformers 5): 0/0, the first prefill, was compiled for
a fresh cache (``is_initialized == False``), 0/1 the decode step held the length 1, and the
second prompt comes with the filled cache reset (``is_initialized == True``; 0/1's guards name
transformers' causal mask, as the real trace's do: ``mask_pins``). advise offered
dynamic=True ("the same call changed past_key_values.layers[i].is_initialized too, which
dynamic=True holds as symbols as well": a bool is no symbol), and ``advise --try`` measured
compiles 3 → 3. Traces built with the torch-free writer (``test_static_cache_recompiles``'s)."""

from __future__ import annotations

from pathlib import Path

from tests.trace.test_mask_pins import MASK_GUARDS
from tests.trace.test_static_cache_recompiles import (
    IDS, _FILLED, _REASONS, _filled, _sym, _trace)
from tuidebug.trace.queries.advice import recompile_advice
from tuidebug.trace.queries.recompiles import explain_compile


def test_a_reset_cache_gets_no_dynamic_true(tmp_path: Path) -> None:
    t = _trace(tmp_path / "reset", _REASONS,
               {"0/0": _FILLED, "0/1": _FILLED, "0/2": _FILLED + [_sym(IDS, 9)]},
               {"0/0": _filled(False), "0/1": _filled(True) + MASK_GUARDS,
                "0/2": _filled(True)})
    found = {s.id: s for s in recompile_advice(t)}
    assert "dynamic=True" not in found, found["dynamic=True"].why
    # nor the flag: 0/1 holds the call's constants, but ran transformers' causal mask
    assert not [i for i in found if "mark_dynamic" in i or "backed_size" in i], list(found)
    # info said dynamic=True "would have compiled 0/0 with a symbol for it, which may serve 9"
    said = (explain_compile(t, "0/2") or {})["suggestion"]
    assert "may serve" not in said and "would not serve 9" in said, said
    assert "0/0 holds past_key_values.layers[i].is_initialized at another value" in said, said


def test_a_fresh_cache_of_one_length_keeps_dynamic_true(tmp_path: Path) -> None:
    """The same prompts with a fresh StaticCache each (0/0 and 0/2 both see it unfilled): 0/0
    holding the length as a symbol serves 9 (measured: 3 compiles → 2 with a mark)."""
    t = _trace(tmp_path / "fresh", _REASONS,
               {"0/0": _FILLED, "0/1": _FILLED, "0/2": _FILLED + [_sym(IDS, 9)]},
               {"0/0": _filled(False), "0/1": _filled(True), "0/2": _filled(False)})
    found = {s.id: s for s in recompile_advice(t)}
    assert "dynamic=True" in found and "is_initialized" not in found["dynamic=True"].why, \
        found["dynamic=True"].why
