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
    # the user's frame with no tensor operation is told so; torch's own frame gets no advice
    assert skipped[0].to_json()["advice"].startswith("it computes no tensor operation")
    assert skipped[1].advice is None


def test_a_compile_without_a_graph_for_inductor_and_one_dynamo_gave_up_on() -> None:
    compiles = {"0/0": {"metrics": {"co_name": "f", "co_filename": "/home/u/y.py",
                                    "graph_op_count": 3}},
                "1/0": {"metrics": {"co_name": "g", "co_filename": "/home/u/y.py",
                                    "fail_type": "RecompileLimitExceeded",
                                    "fail_reason": "hit config.recompile_limit (8)"}},
                "2/0": {"metrics": {"co_name": "h", "co_filename": "/home/u/y.py",
                                    "graph_op_count": 0}}}
    text = nothing_compiled([], compiles)
    assert text.startswith("nothing was compiled by Inductor: Dynamo handled 3 frames (0/0, 1/0, "
                           "2/0)")
    assert "0/0: no graph for Inductor (a backend other than Inductor" in text
    assert "1/0: Dynamo gave up (RecompileLimitExceeded: hit config.recompile_limit (8))" in text
    # a graph with no operation goes to no backend: not "a backend other than Inductor"
    assert "2/0: no graph" not in text, text
    assert "1 of them traced no tensor operation (a graph with no operation goes to no " \
        "backend)" in text, text


def test_ddp_frames_skipped_say_what_dynamo_did_instead() -> None:
    """DDP of torch's own modules: Dynamo skips DDP's frames (``_inside_ddp_forward``) and the
    modules' forwards are in its skip files (as a 2-rank job on torch 2.13 recorded them)."""
    torch_dir = "/v/lib/python3.11/site-packages/torch/nn/"
    skipped = skipped_frames([
        {"function": "forward", "file": torch_dir + "parallel/distributed.py", "line": 1884,
         "reason": "frame is in the Dynamo skipfiles list", "count": 2},
        {"function": "_inside_ddp_forward", "file": torch_dir + "parallel/distributed.py",
         "line": 1695, "reason": "frame is in the Dynamo skipfiles list", "count": 2},
        {"function": "forward", "file": torch_dir + "modules/container.py", "line": 248,
         "reason": "frame is in the Dynamo skipfiles list", "count": 2},
        {"function": "forward", "file": torch_dir + "modules/linear.py", "line": 130,
         "reason": "frame is in the Dynamo skipfiles list", "count": 4}])
    compiles = {"0/0_1": {"metrics": {"co_name": "inner", "co_filename": "/v/external_utils.py",
                                      "graph_op_count": 0}}}
    text = nothing_compiled(skipped, compiles)
    assert text.startswith("nothing was compiled by Inductor: Dynamo handled 1 frame (0/0_1)")
    assert "Dynamo does not trace DistributedDataParallel's own frames (its forward, " \
        "_inside_ddp_forward)" in text, text
    assert "torch's own modules (container.py:248, linear.py:130: frames in Dynamo's skip " \
        "files), so they ran eagerly" in text, text
    # what compiles them: DDP(torch.compile(m)) of the same nn.Sequential compiled a forward
    # and a backward graph per rank (torch 2.13, gloo, 2 ranks); the text named no way out
    assert "fix: compile the module DDP wraps, DDP(torch.compile(model)), or make the " \
        "module DDP calls one of your own" in text, text
    assert "backend other than Inductor" not in text and "torch.compile'd function" not in text
    # a DDP around a forward of the user's own: no claim that torch's modules ran eagerly
    own = skipped_frames([*[f.to_json() for f in skipped][:2],
                          {"function": "helper", "file": "/home/u/m.py", "line": 3,
                           "reason": "frame is in the Dynamo skipfiles list", "count": 1}])
    assert "ran eagerly" not in nothing_compiled(own, compiles)


def test_no_frame_handed_to_dynamo_at_all() -> None:
    assert "Dynamo was never handed a frame" in nothing_compiled([], {})


def test_dynamo_giving_up_is_told_whole_on_one_line() -> None:
    """A frame Dynamo gave up on (a custom op with no fake impl, under fullgraph=True): its
    multi-line message as one line, cause and explanation whole — the part that says what to do
    (``register_fake``) was cut at 200 characters, mid-quote, after a literal newline."""
    reason = (  # torch 2.13's message, as the capture kept it (compiles/0_0.json)
        "RuntimeError when making fake tensor call\n  Explanation: Dynamo failed to run FX node "
        "with fake tensors: call_function nu.mystery.default(*(FakeTensor(..., size=(4,)),), "
        "**{}): got RuntimeError('There was no fake impl registered for <CustomOpDef(nu::"
        "mystery)>. This is necessary for torch.compile/export/fx tracing to work. Please use "
        "`mystery.register_fake` to add an fake impl.')\n  Hint: Your code may result in an "
        "error when running in eager.\n\n  Developer debug context: \n\n For more details "
        "about this graph break, please visit: https://meta-pytorch.github.io/compile-graph-"
        "break-site/gb/gb4315.html")
    compiles = {"0/0": {"metrics": {"co_name": "f", "co_filename": "/home/u/fails.py",
                                    "fail_type": "TorchRuntimeError", "fail_reason": reason}}}
    text = nothing_compiled([], compiles)
    assert "\n" not in text
    assert ("0/0: Dynamo gave up (TorchRuntimeError: RuntimeError when making fake tensor call: "
            "Dynamo failed to run FX node with fake tensors: ") in text, text
    assert "Please use `mystery.register_fake` to add an fake impl.')" in text, text
    assert "Developer debug context" not in text and "Hint" not in text


def test_tuidebugs_own_hooks_are_not_the_users_frames() -> None:
    """The capture's hooks run inside the user's compiled region (a log record's handler under
    transformers' warning_once: emit, _on_record, structured_event …), and Dynamo skips them;
    from the editable install the README sets up (in no site-packages) they were listed first as
    the user's own frames not compiled (found by a new user on GPT-2). Whether installed here or
    elsewhere (a trace from another machine), they are not the user's."""
    from pathlib import Path

    import tuidebug
    here = Path(tuidebug.__file__).resolve().parent / "compiler" / "capture" / "events.py"
    frames = [{"function": "_on_record", "file": str(here), "line": 38,
               "reason": "skipped", "count": 1},
              {"function": "emit", "file": "/opt/other/tuidebug/trace/format/state.py",
               "line": 206, "reason": "skipped", "count": 1},
              {"function": "step", "file": "/home/u/train.py", "line": 9, "reason": "skipped",
               "count": 1}]
    skipped = skipped_frames(frames)
    assert [(f.function, f.own) for f in skipped] == [("step", True), ("_on_record", False),
                                                      ("emit", False)], skipped
