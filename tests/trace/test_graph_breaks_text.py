"""Graph breaks read from traces made with the torch-free writer, with reasons in Dynamo's own
words (torch 2.13's layout, copied from examples/five_breaks.py's trace): the cause, the line
that broke (not the resumed frame's start), the resume compile, and two traces compared."""

from __future__ import annotations

from pathlib import Path

from tuidebug.trace.diff import diff_traces
from tuidebug.trace.queries.graph_breaks import summarize, trace_breaks
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.writer import TraceWriter

PRINT = ("Failed to trace builtin operator",
         "Dynamo does not know how to trace builtin operator `print` with argument types "
         "['str'] (has_kwargs False)",
         "Avoid calling builtin `print` with argument types ['str'].")
ITEM = ("Unsupported Tensor.item() call with capture_scalar_outputs=False",
        "Dynamo does not support tracing `Tensor.item()` with config.capture_scalar_outputs=False.",
        "Set `torch._dynamo.config.capture_scalar_outputs = True` or `export "
        "TORCHDYNAMO_CAPTURE_SCALAR_OUTPUTS=1` to include these operations in the captured graph.")


def _reason(file: str, line: int, code: str, kind: tuple[str, str, str]) -> str:
    cause, explanation, hint = kind
    return (f"Graph break in user code at {file}:{line}\nGraph Break Reason: Encountered graph "
            f"break when attempting to trace CALL: a function call, e.g. f(x, y):\n\n{cause}\n"
            f"  Explanation: {explanation}\n  Hint: {hint}\n  Hint: Please report an issue to "
            f"PyTorch.\n\n  Developer debug context: builtin\n\n For more details about this "
            f"graph break, please visit: https://meta-pytorch.github.io/compile-graph-break-site"
            f"/gb/gb0059.html\n\nUser code traceback:\n  File \"<frozen runpy>\", line 88, in "
            f"_run_code\n  File \"{file}\", line 30, in main\n    out = fn(x)\n  File \"{file}\","
            f" line {line}, in step\n    {code}\n\nTraceback (most recent call last):\n  File "
            f"\"/x/site-packages/torch/_dynamo/symbolic_convert.py\", line 1076, in wrapper\n"
            f"    return inner_fn(self, inst)\n")


def _trace(root: Path, breaks: list[tuple[int, str, tuple[str, str, str]]]) -> Trace:
    """A trace whose frame ``step`` (def at line 9) breaks at each of ``breaks`` in turn,
    each time resumed in the next compile, as Dynamo names them."""
    file = str(root.parent / "script.py")
    w = TraceWriter(root, command=["script.py"])
    first = 9
    for n, (line, code, kind) in enumerate(breaks + [(None, None, None)]):  # type: ignore[list-item]
        fn = "step" if n == 0 else f"torch_dynamo_resume_in_step_at_{breaks[n - 1][0]}"
        start = first if n == 0 else breaks[n - 1][0]
        detail = {"graphs": [], "metrics": {"co_name": fn, "co_filename": file,
                                            "co_firstlineno": start}}
        if line is not None:
            detail["dynamo_graph_break_reason"] = [_reason(file, line, code, kind)]
        w.write_compile(f"{n}/0", detail)
        w.add_compile(f"{n}/0", {"graphs": []})
    w.finish("ok")
    return Trace(root)


def test_each_break_names_its_cause_line_and_resume(tmp_path: Path) -> None:
    t = _trace(tmp_path / "a", [(11, 'print("y is ready")', PRINT), (12, "s = y.sum().item()", ITEM)])
    per = trace_breaks(t)
    breaks = [b for bs in per.values() for b in bs]
    assert [b.compile_id for b in breaks] == ["0/0", "1/0"]
    for b, (line, code, kind) in zip(breaks, [(11, 'print("y is ready")', PRINT),
                                              (12, "s = y.sum().item()", ITEM)]):
        assert b.user_line is not None and (b.user_line.line, b.user_line.code) == (line, code)
        assert b.cause == kind[0] and b.explanation == kind[1]
        assert "Please report an issue to PyTorch." in b.hints  # Dynamo's, kept as it says
        assert b.advice and "report an issue" not in b.advice
        assert b.resumed_in == f"{int(b.compile_id[0]) + 1}/0"
        assert b.eager.startswith(f"line {line} ({code}) ran eagerly")
    assert "capture_scalar_outputs = True" in (breaks[1].advice or "")
    assert summarize(breaks).headline == "2 graph breaks from 2 causes"


def test_diff_names_the_break_added_and_the_one_gone(tmp_path: Path) -> None:
    a = _trace(tmp_path / "a", [(11, 'print("y is ready")', PRINT), (12, "s = y.sum().item()", ITEM)])
    # B: the print removed (the .item() line moved up one), a second .item() added
    b = _trace(tmp_path / "b", [(11, "s = y.sum().item()", ITEM), (14, "t = y.max().item()", ITEM)])
    d = diff_traces(a, b, code=False)
    gb = d["graph_breaks"]
    assert [x["user_line"]["code"] for x in gb["added"]] == ["t = y.max().item()"]
    assert [x["user_line"]["code"] for x in gb["gone"]] == ['print("y is ready")']
    assert gb["kept"] == 1
    assert any(ln.startswith("graph break gone: script.py:11 print") for ln in d["lines"]), d["lines"]
    assert any(ln.startswith("graph break added: script.py:14 t = y.max()") for ln in d["lines"])


def _disabled(address: str) -> tuple[str, str, str]:
    return ("Skip calling `torch.compiler.disable()`d function",
            f"Skip calling function `<function log_step at {address}>` since it was wrapped "
            "with `torch.compiler.disable` (reason: None)",
            "Remove the `torch.compiler.disable` call")


def test_a_break_at_a_disabled_function_is_the_same_in_another_process(tmp_path: Path) -> None:
    """Dynamo names a disabled function by its address, another in each process: two runs (two
    ranks of a job: ``diff JOB/rank_0 JOB/rank_1``) of one script said the break added and
    gone at once. Its cause is compared without the address."""
    a = _trace(tmp_path / "a", [(11, "log_step(y)", _disabled("0x7fcb4c03ff60"))])
    b = _trace(tmp_path / "b", [(11, "log_step(y)", _disabled("0x7fca7782bf60"))])
    gb = diff_traces(a, b, code=False)["graph_breaks"]
    assert (gb["added"], gb["gone"], gb["kept"]) == ([], [], 1), gb


def test_a_break_met_in_fewer_compiles_is_not_gone(tmp_path: Path) -> None:
    """A break met in two compiles of A (the function recompiled) and one of B (dynamic=True:
    no recompile) is still there: diff said "graph break gone" for it."""
    a = _trace(tmp_path / "a", [(11, 'print("y is ready")', PRINT)] * 2)
    b = _trace(tmp_path / "b", [(11, 'print("y is ready")', PRINT)])
    d = diff_traces(a, b, code=False)
    gb = d["graph_breaks"]
    assert gb["gone"] == [] and gb["added"] == [] and gb["kept"] == 1, gb
    assert [(x["times_a"], x["times_b"]) for x in gb["met"]] == [(2, 1)], gb["met"]
    assert not any(ln.startswith("graph break gone") for ln in d["lines"]), d["lines"]
    assert ("graph break still there, met 2× → 1× (once per compile that reaches it): "
            "script.py:11 print(\"y is ready\") (Failed to trace builtin operator)") in d["lines"]


def _branch(file: str, line: int, code: str) -> str:
    """Dynamo's reason for a data-dependent branch (torch 2.13): its explanation goes on with
    the branch's own code."""
    return (f"Graph break in user code at {file}:{line}\nGraph Break Reason: Data-dependent "
            f"branching\n  Explanation: Detected data-dependent branching (e.g. `if "
            f"my_tensor.sum() > 0:`). Dynamo does not support tracing dynamic control flow.\n\n"
            f"      The branch condition involves a tensor computed as follows:\n        # File "
            f"\"{file}\", line {line}, in step, code: {code}\n        gt = gt(sum_1, 0)\n    \n"
            f"  Hint: Use `torch.cond` to express dynamic control flow.\n\n  Developer debug "
            f"context: attempted to jump with TensorVariable()\n\nUser code traceback:\n  File "
            f"\"{file}\", line {line}, in step\n    {code}\n\nNoneType: None\n")


def test_two_data_dependent_branches_are_one_cause(tmp_path: Path) -> None:
    """Grouped by the first sentence of the explanation, cut at a sentence's end (not at
    "e.g."): the rest names each branch's own code."""
    w = TraceWriter(tmp_path / "t", command=["script.py"])
    file = str(tmp_path / "script.py")
    for n, (line, code) in enumerate([(14, "if z.sum() > 0:"), (20, "if w.max() < 1:")]):
        w.write_compile(f"{n}/0", {"graphs": [], "metrics": {"co_name": "step",
                                                            "co_filename": file},
                                   "dynamo_graph_break_reason": [_branch(file, line, code)]})
        w.add_compile(f"{n}/0", {"graphs": []})
    w.finish("ok")
    breaks = [b for bs in trace_breaks(Trace(tmp_path / "t")).values() for b in bs]
    assert [b.user_line.code for b in breaks if b.user_line] == ["if z.sum() > 0:",
                                                                 "if w.max() < 1:"]
    s = summarize(breaks)
    assert s.headline == "2 graph breaks from 1 cause", s
    assert s.causes[0].lines == ["script.py:14", "script.py:20"]
    assert breaks[0].key.endswith("(e.g. `if my_tensor.sum() > 0:`).") and "torch.cond" in (
        breaks[0].advice or "")


def test_advise_reads_any_form_of_trace_and_runs_nothing_without_consent(tmp_path: Path) -> None:
    """``advise`` lists what the trace calls for, on a trace or its archive alike (the one
    door); ``--try`` with no terminal to ask on and no ``--yes`` refuses, and nothing runs."""
    import json
    import os
    import subprocess
    import sys

    from tests.conftest import pythonpath

    script = tmp_path / "script.py"
    script.write_text("raise SystemExit('must not run')\n")
    root = tmp_path / "a"
    w = TraceWriter(root, command=["tuidebug", "trace", str(script)])
    w.write_compile("0/0", {"graphs": [], "metrics": {"co_name": "step",
                                                      "co_filename": str(script)},
                            "dynamo_graph_break_reason": [_reason(str(script), 12,
                                                                  "s = y.sum().item()", ITEM)]})
    w.add_compile("0/0", {"graphs": []})
    w.finish("ok")
    env = dict(os.environ, PYTHONPATH=pythonpath())

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tuidebug.cli", *args], env=env,
                              capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)

    listed = json.loads(cli("advise", str(root), "--json").stdout)["suggestions"]
    assert [(s["id"], s["tryable"]) for s in listed] == [("capture_scalar_outputs", True)]
    assert cli("pack", str(root), "-o", str(tmp_path / "a.tar.gz")).returncode == 0
    assert json.loads(cli("advise", str(tmp_path / "a.tar.gz"), "--json").stdout)[
        "suggestions"] == listed
    refused = cli("advise", str(root), "--try")
    assert refused.returncode != 0 and "no terminal to ask on" in refused.stderr, refused.stderr
    assert str(script) in refused.stderr  # the plan was shown
    assert not (root / "advice.json").exists() and not (tmp_path / "a-advise").exists()


def test_a_break_inside_a_library_that_cannot_be_resumed(tmp_path: Path) -> None:
    """transformers' ``logger.warning_once`` inside GPT-2's loss (torch 2.13's words): the
    cause is the Logger method, not Dynamo's no-resume preamble; the user's line is their call
    into the model, the break's site the library line; Dynamo's hint names the knob."""
    lib = "/v/lib/python3.11/site-packages/transformers"
    user = str(tmp_path / "train.py")
    reason = (
        f"Graph break in user code at {lib}/modeling_utils.py:4769\nGraph Break Reason: "
        "Encountered graph break that we cannot resume from. Compiling up to the previous "
        "resumable state, then skipping the rest of the function. Graph break encountered:\n\n"
        "logging.Logger method not supported for non-export cases\n  Explanation: "
        "logging.Logger methods are not supported for non-export cases.\n  Hint: Add the "
        "logging method to `torch._dynamo.config.ignore_logging_functions`.\n\n  Developer "
        "debug context: method: warning_once\n\n For more details about this graph break, "
        "please visit: https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0291.html"
        f"\n\nStack variable source attribution:\n  File \"{lib}/models/gpt2/modeling_gpt2.py\""
        ", line 700\n    loss = self.loss_function(\n\nUser code traceback:\n  File "
        f"\"{user}\", line 39, in train\n    loss = step(input_ids=ids).loss\n  File "
        f"\"{lib}/models/gpt2/modeling_gpt2.py\", line 700, in forward\n    loss = "
        f"self.loss_function(\n  File \"{lib}/modeling_utils.py\", line 4769, in loss_function"
        "\n    logger.warning_once(\n\n")
    w = TraceWriter(tmp_path / "t", command=["train.py"])
    w.write_compile("0/0", {"graphs": [], "metrics": {"co_name": "forward", "co_filename":
                                                      f"{lib}/models/gpt2/modeling_gpt2.py"},
                            "dynamo_graph_break_reason": [reason]})
    w.add_compile("0/0", {"graphs": []})
    w.finish("ok")
    (b,) = [b for bs in trace_breaks(Trace(tmp_path / "t")).values() for b in bs]
    assert b.cause == "logging.Logger method not supported for non-export cases", b.cause
    assert b.user_line and (b.user_line.file, b.user_line.line) == (user, 39)
    assert b.site and b.site.line == 4769 and b.site.code == "logger.warning_once("
    assert b.frame_line and b.frame_line.line == 700  # the compiled frame's call into it
    assert b.eager.startswith("Dynamo could not resume after the break"), b.eager
    assert "ignore_logging_functions" in (b.advice or ""), b.advice
    assert b.gb_id == "gb0291"
    # the exact entry (checked on torch 2.13: with it, a GPT-2 training step compiles with no
    # graph break), and no "log outside the compiled function": the call is transformers'
    assert b.advice == ("torch._dynamo.config.ignore_logging_functions.add("
                        "logging.Logger.warning_once) before the first call (Dynamo then drops "
                        "the log call): the log call is the library's (modeling_utils.py:4769), "
                        "not yours to move"), b.advice
    own = reason.replace(f"{lib}/modeling_utils.py", user).replace(
        "logger.warning_once(", "log.info(").replace(
        "method: warning_once", "method: info")  # the user's own logger call keeps "move it"
    w = TraceWriter(tmp_path / "own", command=["train.py"])
    w.write_compile("0/0", {"graphs": [], "metrics": {"co_name": "train", "co_filename": user},
                            "dynamo_graph_break_reason": [own]})
    w.add_compile("0/0", {"graphs": []})
    w.finish("ok")
    (b,) = [b for bs in trace_breaks(Trace(tmp_path / "own")).values() for b in bs]
    assert b.advice == ("log outside the compiled function, or torch._dynamo.config."
                        "ignore_logging_functions.add(logging.Logger.info) before the first call"
                        " (Dynamo then drops the log call)"), b.advice


def test_the_logger_method_is_the_one_dynamo_names(tmp_path: Path) -> None:
    """The Logger method in the advice is the one Dynamo's debug context names (``method:
    warning``), never the first ``.name(`` of the line: ``logging.getLogger(__name__).warning(``
    read as ``logging.Logger.getLogger`` (an AttributeError), ``if dist.get_rank() == 0:
    logger.info(`` as ``logging.Logger.get_rank``. A method Dynamo does not name, or one
    logging.Logger lacks (a subclass's own), gets the generic advice: no method named."""
    user = str(tmp_path / "train.py")

    def advice(code: str, context: str | None) -> str | None:
        reason = (
            f"Graph break in user code at {user}:12\nGraph Break Reason: logging.Logger method "
            "not supported for non-export cases\n  Explanation: logging.Logger methods are not "
            "supported for non-export cases.\n  Hint: Add the logging method to "
            "`torch._dynamo.config.ignore_logging_functions`.\n\n"
            + (f"  Developer debug context: {context}\n\n" if context is not None else "")
            + f"\nUser code traceback:\n  File \"{user}\", line 12, in step\n    {code}\n\n")
        d = tmp_path / f"t{len(list(tmp_path.iterdir()))}"
        w = TraceWriter(d, command=["train.py"])
        w.write_compile("0/0", {"graphs": [], "metrics": {"co_name": "step", "co_filename": user},
                                "dynamo_graph_break_reason": [reason]})
        w.add_compile("0/0", {"graphs": []})
        w.finish("ok")
        (b,) = [b for bs in trace_breaks(Trace(d)).values() for b in bs]
        assert b.site is not None and b.site.code == code, b.site
        return b.advice

    entry = ("log outside the compiled function, or torch._dynamo.config.ignore_logging_functions"
             ".add(logging.Logger.{}) before the first call (Dynamo then drops the log call)")
    said = [(code, context, advice(code, context)) for code, context in (
        ("logging.getLogger(__name__).warning(\"x\")", "method: warning"),
        ("if dist.get_rank() == 0: logger.info(\"x\")", "method: info"),
        ("log.trace(\"x\")", "method: trace"),  # a Logger subclass's own method
        ("log.info(\"x\")", None))]  # a Dynamo that does not name it
    assert len(said) == 4
    assert said[0][2] == entry.format("warning"), said[0]
    assert said[1][2] == entry.format("info"), said[1]
    for code, context, text in said[2:]:
        assert text and "ignore_logging_functions" in text and "logging.Logger." not in text, (
            code, context, text)


def test_advise_does_not_count_a_break_met_in_fewer_compiles_as_removed(tmp_path: Path) -> None:
    """dynamic=True on a function that breaks and recompiled: the same break is met once
    instead of twice. advise --try said "verified: compiles 7 → 3, graph breaks 4 → 2" as if
    the fix had removed breaks; it says they are the same ones, and fewer breaks met is not
    what makes a suggestion help."""
    from tuidebug.trace.queries.advice import counts
    from tuidebug.trace.queries.advice_records import Counts, Tried
    # (the writer-made traces hold no graphs: 0 compiles each)
    twice = counts(_trace(tmp_path / "a", [(11, 'print("y is ready")', PRINT)] * 2))
    once = counts(_trace(tmp_path / "b", [(11, 'print("y is ready")', PRINT)]))
    assert (twice.graph_breaks, twice.break_lines) == (2, 1), twice
    assert (once.graph_breaks, once.break_lines) == (1, 1), once
    same = Tried("dynamic=True", twice, once)
    assert not same.helped, same.verdict  # as many compiles, the same break
    assert same.verdict == ("tried, did not help: compiles 0 → 0, graph breaks 2 → 1 (1 "
                            "break line(s) before and after, met by fewer compiles)"), same.verdict
    fewer = Tried("dynamic=True", Counts(7, 3, 4, None, "ok", 2), Counts(3, 0, 2, None, "ok", 2))
    assert fewer.helped and fewer.verdict.endswith("(2 break line(s) before and after, met by fewer "
                                                   "compiles)"), fewer.verdict
    gone = Tried("capture_scalar_outputs", Counts(2, 0, 2, None, "ok", 1),
                 Counts(1, 0, 0, None, "ok", 0))
    assert gone.helped and gone.verdict == ("verified: compiles 2 → 1, graph breaks 2 → 0")
    # advice.json written before break_lines: compared as met, as it was
    assert Counts.from_json({"compiles": 1, "graph_breaks": 2}).break_lines is None
    # a count not recorded is written null (asdict) and read back as not recorded, never as 0
    # (0 against a real count read as breaks removed)
    unknown = Counts(1, 0, 2, None, "ok", None)
    assert Counts.from_json(unknown.to_json()).break_lines is None
    assert Counts.from_json(gone.after.to_json()).break_lines == 0


NONZERO = ("Dynamic shape operator",
           "Operator `aten.nonzero.default`'s output shape depends on input Tensor data.",
           "Enable tracing of dynamic shape operators with "
           "`torch._dynamo.config.capture_dynamic_output_shape_ops = True`")


def test_a_data_dependent_shape_break_offers_its_knob_to_try(tmp_path: Path) -> None:
    """``pos = x[x > 0]`` (torch 2.13's words): Dynamo's hint names
    capture_dynamic_output_shape_ops, which advise listed as a change to the code, untried;
    it is a knob --try sets (measured on that script: compiles 3 → 1, graph breaks 1 → 0)."""
    from tuidebug.trace.queries.advice import break_advice
    t = _trace(tmp_path / "a", [(4, "pos = x[x > 0]", NONZERO)])
    (s,) = break_advice(t)
    assert s.id == "capture_dynamic_output_shape_ops", s
    assert s.apply is not None and s.apply.config == {
        "dynamo.capture_dynamic_output_shape_ops": True}, s.apply
    assert s.why == "Dynamic shape operator at script.py:4", s.why


def test_a_break_logged_again_by_the_restarted_analysis_is_one_break(tmp_path: Path) -> None:
    """Dynamo meets a data-dependent branch (``if top % 2 == 0:`` on ``.item()`` under
    ``capture_scalar_outputs``: a tiny Mistral's step), restarts its analysis (0/0 → 0/0_1)
    and logs the same break again in the attempt that compiles the graph. One break, as
    ``torch._dynamo.explain`` counts it (``graph_break_count`` 1); the trace said "2 graph
    breaks from 1 cause", and ``advise --try`` "graph breaks 1 → 2" for a change that only
    moved the break."""
    w = TraceWriter(tmp_path / "t", command=["script.py"])
    file = str(tmp_path / "script.py")
    reason = _branch(file, 13, "if top % 2 == 0:")
    for cid in ("0/0", "0/0_1"):
        w.write_compile(cid, {"graphs": [], "metrics": {"co_name": "step", "co_filename": file,
                                                       "co_firstlineno": 9},
                              "dynamo_graph_break_reason": [reason]})
        w.add_compile(cid, {"graphs": []})
    w.write_compile("1/0", {"graphs": [], "metrics": {
        "co_name": "torch_dynamo_resume_in_step_at_13", "co_filename": file,
        "co_firstlineno": 13}})
    w.add_compile("1/0", {"graphs": []})
    w.finish("ok")
    per = trace_breaks(Trace(tmp_path / "t"))
    breaks = [b for bs in per.values() for b in bs]
    assert len(breaks) == 1 and list(per) == ["0/0"], per
    assert summarize(breaks).headline == "1 graph break from 1 cause"


def test_a_break_in_torch_or_the_standard_library_is_no_change_to_your_code(
        tmp_path: Path) -> None:
    """``torch.compile(DDP(nn.Sequential(...)))``: Dynamo breaks inside DDP's own
    ``_pre_forward`` (its logger) and in ``contextlib`` (DDP's ``_inside_ddp_forward``,
    marked skipped). ``advise`` listed "log outside the compiled function" and "call it outside
    the compiled function" as "a change to your code": neither line is the user's. A break in
    the user's own file still gets its change."""
    from tuidebug.trace.queries.advice import break_advice

    ddp = "/x/lib/python3.11/site-packages/torch/nn/parallel/distributed.py"
    stdlib = "/root/.pyenv/versions/3.11.7/lib/python3.11/contextlib.py"
    mine = str(tmp_path / "script.py")
    w = TraceWriter(tmp_path / "t", command=["script.py"])
    for n, (file, line, code, kind) in enumerate([
            (ddp, 1757, "self.logger.set_runtime_stats_and_log()", PRINT),
            (stdlib, 105, "self.gen = func(*args, **kwds)", PRINT),
            (mine, 11, 'print("y is ready")', PRINT)]):
        w.write_compile(f"{n}/0", {"graphs": [], "metrics": {"co_name": "step",
                                                            "co_filename": file},
                                   "dynamo_graph_break_reason": [_reason(file, line, code,
                                                                         kind)]})
        w.add_compile(f"{n}/0", {"graphs": []})
    w.finish("ok")
    t = Trace(tmp_path / "t")
    assert sum(len(bs) for bs in trace_breaks(t).values()) == 3
    advice = break_advice(t)
    assert [s.id for s in advice] == ["break at script.py:11"], [s.id for s in advice]


def test_a_recompiled_frames_break_resumes_in_the_resume_functions_recompile(
        tmp_path: Path) -> None:
    """A module whose forward prints (a break) called with batch 2 then 3: forward compiles
    0/0 and 0/1 (x's size), the code after the print 1/0 and 1/1 (h's size). 0/1's break was
    said to resume in 1/0, the first compile of the resume function; it resumed in 1/1, the one
    made right after it. Where no compile of the resume function follows (its guards held),
    the latest one before is named (Dynamo tries its newest compile first)."""
    file = str(tmp_path / "printer.py")

    def build(root: Path, recompiled_resume: bool) -> Trace:
        w = TraceWriter(root, command=["printer.py"])
        order = [("0/0", "forward", 5, True), ("0/0_1", "forward", 5, False),
                 ("1/0", "torch_dynamo_resume_in_forward_at_7", 7, False),
                 ("0/1", "forward", 5, True), ("0/1_1", "forward", 5, False)]
        if recompiled_resume:
            order.append(("1/1", "torch_dynamo_resume_in_forward_at_7", 7, False))
        for cid, fn, first, breaks in order:
            detail = {"graphs": [], "metrics": {"co_name": fn, "co_filename": file,
                                                "co_firstlineno": first}}
            if breaks:
                detail["dynamo_graph_break_reason"] = [_reason(
                    file, 7, 'print("hidden mean", h.mean())', PRINT).replace(
                    "line 7, in step", "line 7, in forward")]
            w.write_compile(cid, detail)
            w.add_compile(cid, {"graphs": []})
        w.finish("ok")
        return Trace(root)

    per = trace_breaks(build(tmp_path / "a", True))
    assert [(cid, b.resumed_in) for cid, bs in per.items() for b in bs] == [
        ("0/0", "1/0"), ("0/1", "1/1")], per
    per = trace_breaks(build(tmp_path / "b", False))
    assert [(cid, b.resumed_in) for cid, bs in per.items() for b in bs] == [
        ("0/0", "1/0"), ("0/1", "1/0")], per


def test_a_frame_after_one_without_code_is_read(tmp_path: Path) -> None:
    """``tuidebug trace`` runs the script through runpy: the user's module-level call follows
    ``<frozen runpy>`` frames, which have no code line. The frame after such a frame was read
    as its code: a break in torch's DDP forward called from ``loss = step(ids)`` at the script's
    top level was listed at ``distributed.py:1757`` (the same TORCH_TRACE log, imported, said
    ``ddp_hf.py:36``)."""
    from tuidebug.trace.format.layout import stack_frames
    from tuidebug.trace.queries.graph_breaks import parse

    torch_dir = "/venv/lib/python3.11/site-packages/torch"
    stack = ('  File "<frozen runpy>", line 291, in run_path\n'
             '  File "<frozen runpy>", line 98, in _run_module_code\n'
             '  File "<frozen runpy>", line 88, in _run_code\n'
             '  File "/job/ddp_hf.py", line 36, in <module>\n'
             '    loss = step(ids)\n'
             f'  File "{torch_dir}/_dynamo/external_utils.py", line 69, in inner\n'
             '    return fn(*args, **kwargs)\n'
             f'  File "{torch_dir}/nn/parallel/distributed.py", line 1757, in _pre_forward\n'
             '    self.logger.set_runtime_stats_and_log()\n')
    reason = (f"Graph break in user code at {torch_dir}/nn/parallel/distributed.py:1757\n"
              "Graph Break Reason: Encountered graph break when attempting to trace "
              "CALL_FUNCTION_EX: a variadic function call, e.g. f(*args):\n\n"
              "Unsupported method call\n  Explanation: Dynamo does not know how to trace "
              "method `set_runtime_stats_and_log` of class `Logger`\n\n"
              f"User code traceback:\n{stack}\nTraceback (most recent call last):\n"
              f'  File "{torch_dir}/_dynamo/symbolic_convert.py", line 1076, in wrapper\n'
              "    return inner_fn(self, inst)\n")
    b = parse("0/0", reason, {"function": "inner"}, {})
    assert (b.user_line.file, b.user_line.line, b.user_line.code) == (
        "/job/ddp_hf.py", 36, "loss = step(ids)"), b.user_line
    assert (b.site.file.endswith("distributed.py"), b.site.line) == (True, 1757), b.site
    # the stacks of FX nodes are read the same way: a frame without code has none
    frames = stack_frames(stack, {})
    assert [f["code"] for f in frames[:4]] == ["", "", "", "loss = step(ids)"], frames
    # the user's line called it, but the break is torch's own (DDP's C++ logger): no change
    # to the user's code is advised for it (advise listed 'log outside the compiled
    # function … why: Unsupported method call at ddp_hf.py:36' once the line was read)
    from tuidebug.trace.queries.advice import suggestions

    w = TraceWriter(tmp_path / "ddp", command=["ddp_hf.py"])
    w.write_compile("0/0", {"graphs": [], "dynamo_graph_break_reason": [reason],
                            "metrics": {"co_name": "inner", "co_firstlineno": 67,
                                        "co_filename": f"{torch_dir}/_dynamo/external_utils.py"}})
    w.add_compile("0/0", {"graphs": []})
    w.finish("ok")
    [b] = trace_breaks(Trace(tmp_path / "ddp"))["0/0"]
    assert b.user_line.line == 36 and b.advice, b
    assert [a.id for a in suggestions(Trace(tmp_path / "ddp"))] == []


def test_only_a_break_in_ddps_code_loses_its_advice(tmp_path: Path) -> None:
    """advise dropped the advice of any break whose site's path held '/torch/': a break in
    torch/utils/checkpoint.py, or anywhere in a user's project under a folder named torch/,
    lost its advice. Only DDP's own code (torch/nn/parallel/, its C++ logger call) does."""
    from tuidebug.trace.queries.advice import suggestions

    site_pkgs = "/venv/lib/python3.11/site-packages"
    kept = []
    for name, site in (("ddp", f"{site_pkgs}/torch/nn/parallel/distributed.py"),
                       ("checkpoint", f"{site_pkgs}/torch/utils/checkpoint.py"),
                       ("project", "/home/u/torch/proj/blocks.py")):
        stack = ('  File "/job/train.py", line 36, in <module>\n'
                 '    loss = step(ids)\n'
                 f'  File "{site}", line 1757, in forward\n'
                 '    self.logger.set_runtime_stats_and_log()\n')
        reason = (f"Graph break in user code at {site}:1757\n"
                  "Graph Break Reason: Unsupported method call\n  Explanation: Dynamo does "
                  "not know how to trace method `set_runtime_stats_and_log` of class "
                  f"`Logger`\n\nUser code traceback:\n{stack}")
        w = TraceWriter(tmp_path / name, command=["train.py"])
        w.write_compile("0/0", {"graphs": [], "dynamo_graph_break_reason": [reason],
                                "metrics": {"co_name": "step", "co_firstlineno": 30,
                                            "co_filename": "/job/train.py"}})
        w.add_compile("0/0", {"graphs": []})
        w.finish("ok")
        [b] = trace_breaks(Trace(tmp_path / name))["0/0"]
        assert b.advice and b.user_line.line == 36 and b.site.file == site, b
        kept.append([a.id for a in suggestions(Trace(tmp_path / name))])
    assert kept == [[], ["break at train.py:36"], ["break at train.py:36"]], kept


def test_a_break_in_fsdp2s_hook_is_no_call_of_yours_to_move(tmp_path: Path) -> None:
    """``torch.compile`` of a ``fully_shard``-ed model (torch 2.13, gloo): FSDP2 wraps its hooks
    in ``torch._dynamo.disable`` (_fsdp_common.py), so the model's call breaks there whatever
    the user's code. advise said "call it outside the compiled function … why: Attempted to
    call function marked as skipped at fsdp2_train.py:31" — the user's ``cm(x)``, which no
    move makes compiled. Like a break in DDP's forward, it keeps no advice of a change."""
    from tuidebug.trace.queries.advice import suggestions

    torch_dir = "/venv/lib/python3.11/site-packages/torch"
    site = f"{torch_dir}/distributed/fsdp/_fully_shard/_fsdp_common.py"
    reason = (f"Graph break in user code at {site}:30\n"
              "Graph Break Reason: Encountered graph break when attempting to trace "
              "CALL_FUNCTION_EX: a variadic function call, e.g. f(*args):\n\n"
              "Attempted to call function marked as skipped\n  Explanation: Dynamo developers "
              "have intentionally marked that the function `disable` in file "
              f"`{torch_dir}/_dynamo/decorators.py` should not be traced.\n  Hint: Avoid "
              "calling the function `disable`.\n\nUser code traceback:\n"
              '  File "/job/fsdp2_train.py", line 31, in main\n'
              "    loss = cm(x).pow(2).mean()\n"
              f'  File "{torch_dir}/nn/modules/module.py", line 1811, in inner\n'
              "    args_kwargs_result = hook(self, args, kwargs)\n"
              f'  File "{site}", line 30, in wrapper\n'
              "    return torch._dynamo.disable(\n")
    w = TraceWriter(tmp_path / "t", command=["fsdp2_train.py"])
    w.write_compile("0/0", {"graphs": [], "dynamo_graph_break_reason": [reason],
                            "metrics": {"co_name": "inner", "co_firstlineno": 67,
                                        "co_filename": f"{torch_dir}/_dynamo/external_utils.py"}})
    w.add_compile("0/0", {"graphs": []})
    w.finish("ok")
    [b] = trace_breaks(Trace(tmp_path / "t"))["0/0"]
    assert b.user_line.line == 31 and b.site.file == site and b.advice, b
    assert [a.id for a in suggestions(Trace(tmp_path / "t"))] == []


def test_a_graph_break_torch_calls_itself_is_no_call_of_yours_to_remove(tmp_path: Path) -> None:
    """``torch.compile`` of a function calling ``opt.step()`` (AdamW, an LR scheduler; torch
    2.13's words): torch's optimizer calls ``torch._dynamo.graph_break()`` around every step
    (``_use_grad``, torch/optim/optimizer.py). info said "fix: Remove the
    `torch._dynamo.graph_break()` call." — Dynamo's hint, about a call the user cannot remove.
    A graph_break() in the user's own file (or a folder of theirs named torch/) keeps it."""
    from tuidebug.trace.queries.advice import break_advice
    from tuidebug.viewers.breaks_view import break_notes

    optim = "/venv/lib/python3.11/site-packages/torch/optim/optimizer.py"
    mine, project = "/job/train.py", "/home/u/torch/proj/blocks.py"
    w = TraceWriter(tmp_path / "t", command=["train.py"])
    for n, site in enumerate((optim, mine, project)):
        stack = ('  File "/job/train.py", line 12, in opt_step\n    opt.step()\n'
                 + (f'  File "{site}", line 79, in _use_grad\n'
                    '    torch._dynamo.graph_break()\n' if site != mine else ""))
        line = 12 if site == mine else 79
        reason = (f"Graph break in user code at {site}:{line}\nGraph Break Reason: Encountered "
                  "graph break when attempting to trace CALL_FUNCTION_EX: a variadic function "
                  "call, e.g. f(*args):\n\nCall to `torch._dynamo.graph_break()`\n  "
                  "Explanation: User-inserted graph break. Message: None\n  Hint: Remove the "
                  "`torch._dynamo.graph_break()` call.\n\n  Developer debug context: Called "
                  "`torch._dynamo.graph_break()` with args `[]`, kwargs `{}`\n\nUser code "
                  f"traceback:\n{stack}")
        w.write_compile(f"{n}/0", {"graphs": [], "dynamo_graph_break_reason": [reason],
                                   "metrics": {"co_name": "opt_step", "co_firstlineno": 10,
                                               "co_filename": "/job/train.py"}})
        w.add_compile(f"{n}/0", {"graphs": []})
    w.finish("ok")
    t = Trace(tmp_path / "t")
    breaks = {b.compile_id: b for bs in trace_breaks(t).values() for b in bs}
    assert sorted(breaks) == ["0/0", "1/0", "2/0"], breaks
    torchs = breaks["0/0"]
    assert torchs.torchs_own and torchs.user_line.line == 12, torchs
    assert "Remove" not in torchs.advice, torchs.advice
    assert torchs.advice.startswith("nothing in your code: torch itself calls "
                                    "torch._dynamo.graph_break() there (torch/optim/"
                                    "optimizer.py:79, in _use_grad)"), torchs.advice
    for cid in ("1/0", "2/0"):  # the user's own call, in their file or their torch/ folder
        assert not breaks[cid].torchs_own
        assert breaks[cid].advice == "Remove the `torch._dynamo.graph_break()` call.", breaks[cid]
    # one cause, each distinct fix said (the user's and torch's)
    text = " ".join(str(x) for x in break_notes("3 graph breaks",
                                                [b.to_json() for b in breaks.values()]))
    assert text.count("fix: ") == 2 and "fix: nothing in your code" in text, text
    # advise offers removing the user's own calls only (torch's is met at train.py:12 too)
    offered = {s.id: s.text for s in break_advice(t)}
    assert offered == {"break at train.py:12": "Remove the `torch._dynamo.graph_break()` call."}
    one = TraceWriter(tmp_path / "one", command=["train.py"])  # torch's alone: nothing offered
    one.write_compile("0/0", {"graphs": [], "metrics": {"co_name": "opt_step",
                                                        "co_filename": "/job/train.py"},
                              "dynamo_graph_break_reason": list(t.compiles["0/0"][
                                  "dynamo_graph_break_reason"])})
    one.add_compile("0/0", {"graphs": []})
    one.finish("ok")
    assert len(trace_breaks(Trace(tmp_path / "one"))["0/0"]) == 1
    assert break_advice(Trace(tmp_path / "one")) == []


def _skipped_call(root: Path, fn: str, file: str,
                  then: list[tuple[str, str, str]]) -> Trace:
    """opt_step() (/job/train.py:10) breaking at its line 12, ``opt.step()``, on a call of
    ``fn`` in ``file`` that Dynamo skips (torch 2.13's words); the frames compiled after it
    (``then``: compile id, function, file), in that order."""
    reason = ("Graph break in user code at /job/train.py:12\nGraph Break Reason: Encountered "
              "graph break when attempting to trace CALL: a function call, e.g. f(x, y):\n\n"
              "Attempted to call function marked as skipped\n  Explanation: Dynamo "
              f"developers have intentionally marked that the function `{fn}` in file "
              f"`{file}` should not be traced.\n  Hint: Avoid calling the function `{fn}`.\n"
              "  Hint: Please file an issue to PyTorch.\n\n  Developer debug context: "
              f"module: x, qualname: {fn}, skip reason: file is force-skipped ({file})\n\n"
              "User code traceback:\n  File \"/job/train.py\", line 12, in opt_step\n"
              "    opt.step()\n")
    w = TraceWriter(root, command=["train.py"])
    for cid, name, where in [("5/0", "opt_step", "/job/train.py"), *then]:
        w.write_compile(cid, {"graphs": [], "metrics": {
            "co_name": name, "co_firstlineno": 12 if name.startswith("torch_dynamo") else 10,
            "co_filename": where}, **({"dynamo_graph_break_reason": [reason]}
                                      if name == "opt_step" else {})})
        w.add_compile(cid, {"graphs": []})
    w.finish("ok")
    return Trace(root)


RESUME = "torch_dynamo_resume_in_opt_step_at_12"


def test_a_call_of_a_function_torch_skips_is_not_moved_out_of_the_compiled_function(
        tmp_path: Path) -> None:
    """The same opt_step() with an LR scheduler (torch 2.13's words): the scheduler wraps
    ``opt.step`` in torch/optim/lr_scheduler.py, a file Dynamo skips, and info and advise said
    "call it outside the compiled function" — while the trace showed the frames it called
    compiled (the optimizer's wrapper and Adam's step, 6/0 and 7/0, before the resume 8/0):
    moved out, they run eagerly. Said only where the trace shows such frames: a skipped torch
    helper that entered none keeps "call it outside" (moved out, its break goes), and so does
    a function of the user's own that Dynamo skips."""
    from tuidebug.trace.queries.advice import break_advice

    torch = "/venv/lib/python3.11/site-packages/torch/"
    sched = torch + "optim/lr_scheduler.py"
    t = _skipped_call(tmp_path / "torch", "Adam.step", sched, [
        ("6/0", "wrapper", torch + "optim/optimizer.py"), ("7/0", "step", torch + "optim/adam.py"),
        ("8/0", RESUME, "/job/train.py"),
        # the next step's recompile meets the call again: those frames are compiled already
        ("5/1", "opt_step", "/job/train.py")])
    per = trace_breaks(t)
    assert set(per) == {"5/0", "5/1"}, per
    for b in (*per["5/0"], *per["5/1"]):
        assert b.torchs_own and b.user_line.line == 12 and b.entered == ("6/0", "7/0"), b
        assert b.advice.startswith("torch skips Adam.step on purpose (its file, "
                                   "torch/optim/lr_scheduler.py, is not traced)"), b.advice
        assert "compiled as frames of their own (6/0, 7/0)" in b.advice, b.advice
        assert "gains nothing" in b.advice and "call it outside" not in b.advice, b.advice
    assert break_advice(t) == []
    # a torch helper called in a forward, skipped, entering no compiled frame: moved out of
    # the compiled function, its break goes
    helper = _skipped_call(tmp_path / "helper", "clip_grad_norm_",
                           torch + "nn/utils/clip_grad.py", [("6/0", RESUME, "/job/train.py"),
                                                             ("7/0", "later", torch + "x.py")])
    [b] = trace_breaks(helper)["5/0"]
    assert not b.torchs_own and not b.entered, b
    assert "call it outside the compiled function" in b.advice, b.advice
    assert [s.id for s in break_advice(helper)] == ["break at train.py:12"]
    # no resume compiled: what compiled after may be any code's, so nothing is shown
    [b] = trace_breaks(_skipped_call(tmp_path / "open", "Adam.step", sched, [
        ("6/0", "wrapper", torch + "optim/optimizer.py")]))["5/0"]
    assert not b.torchs_own and "call it outside the compiled function" in b.advice, b
    [mine] = trace_breaks(_skipped_call(tmp_path / "mine", "MyOpt.step", "/home/u/torch/my.py", [
        ("6/0", "step", "/home/u/torch/inner.py"), ("7/0", RESUME, "/job/train.py")]))["5/0"]
    assert not mine.torchs_own and "call it outside the compiled function" in mine.advice


def _skipped_frame(root: Path, second: bool) -> Trace:
    """transformers' Mixtral expert loop (``experts_implementation="eager"``) under torch 2.13:
    Dynamo's words when it gives up on the frame (``Failed to handle graph break gracefully``),
    the nonzero() break inside; ``second``: the loop's own break reported after it."""
    lib = "/v/lib/python3.11/site-packages/transformers/models/mixtral/modeling_mixtral.py"
    reason = (
        f"Graph break in user code at {lib}:78\nGraph Break Reason: Failed to handle graph "
        "break gracefully. Skipping the function and falling back to eager. Graph break "
        "encountered:\n\nDynamic shape operator\n  Explanation: Operator "
        "`aten.nonzero.default`'s output shape depends on input Tensor data.\n  Hint: Enable "
        "tracing of dynamic shape operators with "
        "`torch._dynamo.config.capture_dynamic_output_shape_ops = True`\n\n  Developer debug "
        "context: aten.nonzero.default\n\n For more details about this graph break, please "
        "visit: https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0036.html\n\n"
        + ("*** While handling this graph break, another graph break occurred: ***\n\ngraph "
           "break in loop\n  Explanation: torch.compile detected a graph break in a for/while "
           "loop. Skipping the frame and falling back to eager, as graph breaks in loops are "
           "not supported.\n  Hint: This graph break may have been caused by an earlier graph "
           "break. Resolving the earlier graph break may resolve this one.\n\n  Developer "
           "debug context: frame skipped: forward\n\n" if second else "")
        + f"User code traceback:\n  File \"{root.parent / 'moe.py'}\", line 11, in <module>\n"
        f"    out = cmodel(input_ids=ids, labels=ids)\n  File \"{lib}\", line 78, in forward\n"
        "    expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()\n")
    w = TraceWriter(root, command=["moe.py"])
    w.write_compile("0/0", {"graphs": [], "metrics": {"co_name": "forward", "co_filename": lib,
                                                      "co_firstlineno": 68},
                            "dynamo_graph_break_reason": [reason]})
    w.add_compile("0/0", {"graphs": []})
    w.finish("ok")
    return Trace(root)


def test_a_frame_dynamo_gave_up_on_is_grouped_by_the_break_inside(tmp_path: Path) -> None:
    """Dynamo's 'Failed to handle graph break gracefully. Skipping the function and falling back
    to eager. Graph break encountered:' was taken as the break's cause: info grouped the
    nonzero() breaks of a MoE's expert loop apart from the other nonzero() breaks, diff said
    'graph break added: … (Failed to handle … Graph break encountered:)' — no cause at all —
    and a second break reported after it (the loop's) gave the first its explanation. The
    cause is the break's own; the frame ran eagerly, all of it."""
    for second in (False, True):
        t = _skipped_frame(tmp_path / f"t{second}", second)
        (b,) = [b for bs in trace_breaks(t).values() for b in bs]
        assert b.cause == "Dynamic shape operator", b.cause
        assert b.explanation == ("Operator `aten.nonzero.default`'s output shape depends on "
                                 "input Tensor data."), b.explanation
        assert "capture_dynamic_output_shape_ops = True" in (b.advice or ""), b.advice
        assert b.eager.startswith("Dynamo skipped forward at the break (line 78 (expert_hit = "
                                  "torch.greater"), b.eager
        assert "its code ran eagerly, all of it" in b.eager, b.eager
