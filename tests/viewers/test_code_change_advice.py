"""A suggestion only an edit of the user's code can apply ("one max_cache_len" for a user on
transformers' StaticCache) is said to be one that ``advise --try`` cannot make, wherever it is
listed: ``info``'s legend said "· untried: tuidebug advise TRACE --try" over it, and after a
``--try`` in which another suggestion helped, ``advise`` said nothing of it beyond "not tried"
(as if a later --try would). Suggestions as ``Suggestion.to_json`` writes them."""

from __future__ import annotations

import io

from rich.console import Console

from tuidebug.viewers.advice_view import advice_section, render_advice

DYNAMIC = {"id": "dynamic=True", "text": "compile with torch.compile(..., dynamic=True)",
           "why": "0/2: dimension 1 of kwargs['input_ids'] changed (6 in 0/0 → 9)",
           "about": "recompiles", "apply": {"compile_kwargs": {"dynamic": True}},
           "tryable": True}
ONE_LENGTH = {"id": "one max_cache_len",
              "text": "build every StaticCache with one max_cache_len (the longest prompt plus "
                      "the new tokens), or reuse one and reset() it",
              "why": "0/2: the same call changed past_key_values.layers[i].max_cache_len",
              "about": "recompiles", "apply": None, "tryable": False}
HELPED = {"id": "dynamic=True", "helped": True, "trace": "/t-advise/try-1",
          "verdict": "verified: compiles 4 → 2",
          "before": {"compiles": 4, "recompiles": 3, "graph_breaks": 0, "wall_s": 30.0,
                     "status": "ok"},
          "after": {"compiles": 2, "recompiles": 1, "graph_breaks": 0, "wall_s": 20.0,
                    "status": "ok"}}


def _printed(suggestions: list[dict], tried: list[dict]) -> str:
    out = io.StringIO()
    render_advice(suggestions, tried, Console(file=out, width=300, color_system=None))
    return out.getvalue()


def test_info_marks_a_code_change_as_one_try_cannot_make() -> None:
    lines = [t.plain for t in advice_section([DYNAMIC, ONE_LENGTH], {})]
    assert "✎ a change to your code, which --try cannot make" in lines[0], lines[0]
    assert any(ln.startswith("✎ build every StaticCache") for ln in lines), lines
    assert any(ln.startswith("· compile with torch.compile") for ln in lines), lines
    assert any("advise --try cannot apply it" in ln for ln in lines), lines
    # no code change listed: the legend does not name one
    assert "✎" not in advice_section([DYNAMIC], {})[0].plain


def test_after_a_try_that_helped_the_code_change_is_said_not_tried_and_why() -> None:
    said = _printed([DYNAMIC, ONE_LENGTH], [HELPED])
    assert "not tried, a change to your code that --try cannot make: build every " \
        "StaticCache with one max_cache_len" in said, said
    assert "✓ compile with torch.compile" in said and "✎ build every StaticCache" in said, said
    # the table lists only what ran
    table = said[said.index("tried (each a run"):]
    assert "max_cache_len" not in table.split("wall: one run each")[0], table
