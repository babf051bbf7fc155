"""Why nothing reached Inductor, in words, from what a trace keeps (the manifest's
``skipped_frames``, the compiles' metrics): each case says what Dynamo did instead."""

from __future__ import annotations

from tuidebug.trace.queries.frames import nothing_compiled, skipped_frames

MANIFEST = {"skipped_frames": [
    {"function": "_fn", "file": "/v/lib/python3.11/site-packages/torch/_dynamo/eval_frame.py",
     "line": 1423, "reason": "frame is in the Dynamo skipfiles list", "count": 3},
    {"function": "add", "file": "/home/u/x.py", "line": 7, "reason":
     "Dynamo decided to skip the frame while tracing: No ops traced for the FX graph.\n"
     "Frame info: add", "count": 1}]}


def test_the_users_skipped_frame_is_named_first_with_dynamos_reason() -> None:
    skipped = skipped_frames(MANIFEST["skipped_frames"])
    assert [(f.function, f.own, f.where) for f in skipped] == [("add", True, "x.py:7"),
                                                             ("_fn", False, "eval_frame.py:1423")]
    text = nothing_compiled(skipped, {})
    assert text.startswith("nothing was compiled: Dynamo was handed frames but compiled none")
    assert "add (x.py:7): Dynamo decided to skip the frame while tracing: No ops traced" in text
    assert "and 1 more (1 of torch or an installed package)" in text
    assert "Frame info" not in text  # a reason's first line only


def test_a_compile_without_a_graph_for_inductor_and_one_dynamo_gave_up_on() -> None:
    compiles = {"0/0": {"metrics": {"co_name": "f", "co_filename": "/home/u/y.py"}},
                "1/0": {"metrics": {"co_name": "g", "co_filename": "/home/u/y.py",
                                    "fail_type": "RecompileLimitExceeded",
                                    "fail_reason": "hit config.recompile_limit (8)"}}}
    text = nothing_compiled([], compiles)
    assert text.startswith("nothing was compiled by Inductor: Dynamo handled 2 frames (0/0, 1/0)")
    assert "0/0: no graph for Inductor (a backend other than Inductor" in text
    assert "1/0: Dynamo gave up (RecompileLimitExceeded: hit config.recompile_limit (8))" in text


def test_no_frame_handed_to_dynamo_at_all() -> None:
    assert "Dynamo was never handed a frame" in nothing_compiled([], {})
