"""``tuidebug info``'s rendering (``viewers/info.py``) of real traces: a finished one, a failed
one, a damaged one, and one whose script raised after compiling."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.summary import summary_status, trace_summary
from tuidebug.viewers.summary_text import phase_text
from tuidebug.viewers.info import render_summary


def rendered(path: Path, width: int = 200) -> tuple[str, dict]:
    s = trace_summary(Trace(path))
    console = Console(file=io.StringIO(), width=width, record=True, color_system=None)
    render_summary(s, console)
    return console.export_text(), s


def row_of(text: str, graph_id: str) -> list[str]:
    return next(ln.split() for ln in text.splitlines() if ln.split()[:1] == [graph_id])


def test_a_finished_trace_one_row_per_graph(transformer_trace: Path) -> None:
    text, s = rendered(transformer_trace)
    assert text.splitlines()[0].startswith(f"trace {transformer_trace}  OK")
    assert f"torch {s['versions']['torch']}" in text.splitlines()[0]
    assert "compiled graphs" in text
    for g in s["graphs"]:
        cells = row_of(text, g["id"])
        assert cells[1:4] == [g["kind"], g["status"], str(g["nodes"])]
        assert cells[4] == f"{g['passes_changed']}/{g['passes_run']}"
        assert cells[5:7] == [str(g["kernels"]), str(g["extern_calls"])]
        assert f"{g['kernels_with_source']}/{g['kernels']}" in cells
        changed = g["changed_passes"]
        assert changed, f"{g['id']}: some pass changed the graph"
        line = next(ln for ln in text.splitlines()
                    if ln.strip().startswith(f"{g['id']} passes that changed it:"))
        assert line.split("changed it: ", 1)[1].split(", ") == changed
    assert "Dynamo compiles" in text
    for c in s["compiles"]:
        assert any(ln.split()[:2] == [c["id"], str(c["function"])] for ln in text.splitlines())
    assert "problem:" not in text and "error " not in text


def test_graph_ids_are_whole_at_80_columns(dynamic_trace: Path) -> None:
    """``tuidebug info | less`` and 80-column terminals: rich cut the ten columns to fit, and
    the graph ids (what --graph takes) became ``0_0-inferen…``; every cell stays whole."""
    text, s = rendered(dynamic_trace, width=80)
    assert len(s["graphs"]) >= 5, s["graphs"]  # 0/0, 0/1, 1/0, 2/0, 3/0, 3/1
    for g in s["graphs"]:
        cells = row_of(text, g["id"])
        assert cells[1:3] == [g["kind"], g["status"]], cells
        assert not any("…" in c for c in cells), cells
    assert all(len(ln) <= 80 for ln in text.splitlines())


def test_a_failed_trace_says_where_and_why(failing_trace: Path) -> None:
    text, s = rendered(failing_trace)
    assert f"trace {failing_trace}  FAILED" in text
    err = s["error"]
    line = next(ln for ln in text.splitlines() if ln.startswith("error "))
    assert phase_text(err["phase"]) in line and str(err["type"]) in line
    assert str(err["message"]).strip().splitlines()[0][:60] in line


def test_problems_of_a_damaged_trace_are_listed(mlp_trace: Path, copy_trace) -> None:
    t = copy_trace(mlp_trace, "damaged")
    gdir = next((t / "graphs").iterdir())
    (gdir / "meta.json").write_text("{not json")
    text, s = rendered(t)
    assert s["problems"]
    problems = [ln for ln in text.splitlines() if ln.startswith("problem: ")]
    assert problems and any("meta.json" in p and "corrupt JSON" in p for p in problems)


def test_a_script_that_raised_after_compiling(mlp_trace: Path, copy_trace) -> None:
    """The compile was fine, the script was not: ``info --json``'s status says the script
    failed (not ``ok`` beside a ``script_error``), and the text says the same."""
    t = copy_trace(mlp_trace, "raised")
    manifest = json.loads((t / "manifest.json").read_text())
    assert manifest["status"] == "ok" and "script_error" not in manifest
    manifest["script_error"] = {"type": "ValueError", "message": "bad shape\nsecond line",
                                "after_compiling": True}
    (t / "manifest.json").write_text(json.dumps(manifest))
    text, s = rendered(t)
    assert s["status"] == "script_failed" and s["script_error"]["type"] == "ValueError", s
    assert "error" not in s  # the compile itself did not fail
    head = text.splitlines()[0]
    assert "SCRIPT FAILED (COMPILED OK; THE SCRIPT RAISED)" in head and " OK " not in head, head
    assert "script raised ValueError after compiling: bad shape" in text
    assert "second line" not in text


def test_a_script_that_exited_non_zero_after_compiling(mlp_trace: Path, copy_trace) -> None:
    t = copy_trace(mlp_trace, "exited")
    manifest = json.loads((t / "manifest.json").read_text())
    manifest["script_exit_code"] = 3
    (t / "manifest.json").write_text(json.dumps(manifest))
    text, s = rendered(t)
    assert s["status"] == "script_failed" and s["script_exit_code"] == 3, s
    assert "SCRIPT FAILED (COMPILED OK; THE SCRIPT EXITED WITH CODE 3)" in text.splitlines()[0]
    ok, s_ok = rendered(mlp_trace)  # the same trace, its script fine: ok, and said so
    assert s_ok["status"] == "ok" and "SCRIPT" not in ok.splitlines()[0]


def test_a_rank_whose_script_exited_non_zero_is_script_failed(mlp_trace: Path,
                                                                failing_trace: Path) -> None:
    """A launcher's rank (cli/distributed) sees the script's exit code itself: the one rule of
    ``summary_status`` says script_failed only where the compile was fine."""
    ok, failed = Trace(mlp_trace), Trace(failing_trace)
    assert summary_status(ok) == "ok" and summary_status(ok, exit_code=0) == "ok"
    assert summary_status(ok, exit_code=1) == "script_failed"
    assert summary_status(ok, exit_code=-9) == "script_failed"
    assert summary_status(failed, exit_code=1) == failed.status == "failed"


def test_profile_tables_keep_their_times_whole_on_a_narrow_console(profiled_trace: Path) -> None:
    """A narrow console (``tuidebug trace`` piped, a small terminal): rich cut every column of
    the profile tables alike, times included (``11…`` for a GPT-2 kernel); only the names give
    way now, a kernel's keeping its end (``…view_7``: kernels differ there)."""
    from tuidebug.viewers.profile_view import duration

    s = trace_summary(Trace(profiled_trace))
    kernels = s["profile"]["kernels"]
    assert len(kernels) >= 2, kernels
    for width in (200, 44):
        text, _ = rendered(profiled_trace, width=width)
        rows = text.splitlines()
        head = next(i for i, ln in enumerate(rows) if ln.split()[:1] == ["kernel"])
        shown = rows[head + 1:head + 1 + min(len(kernels), 8)]
        assert len(shown) == min(len(kernels), 8), (width, rows)
        for k, row in zip(kernels, shown):
            cells = row.split()
            assert " ".join(cells[-3:-1]) == duration(k["compiled_s"]), (width, row)
            assert cells[-4] == k["kind"], (width, row)
            name, key = " ".join(cells[:-4]), str(k["key"])
            assert name == key or (name.startswith(key[:4]) and "…" in name
                                   and name.endswith(key[-3:])), (width, row, key)
        assert all(len(ln) <= width for ln in rows), width


def test_profile_kernels_of_several_compiles_name_their_graph(profiled_trace: Path) -> None:
    """A recompile's graph has the same kernel names as the first compile's (bert_lengths of
    bench/real_models.py listed cpp_fused_…_slice_0 twice, unexplained): with kernels of two
    compiles the table names each row's graph; calls per run read 1, not 1.0."""
    from tuidebug.viewers.profile_view import render_profile

    s = trace_summary(Trace(profiled_trace))
    p = s["profile"]
    one = io.StringIO()
    render_profile(p, Console(file=one, width=200, color_system=None))
    rows = [ln.split() for ln in one.getvalue().splitlines()]
    head = next(r for r in rows if r[:1] == ["kernel"])
    assert "graph" not in head  # one compile: nothing to tell apart
    assert all(r[-1] == "1" for r in rows[rows.index(head) + 1:][:len(p["kernels"])]
               if r and r[0] in {k["key"] for k in p["kernels"]}), rows
    again = [dict(k, graph="0_1-inference") for k in p["kernels"]]  # as a recompile's
    two = io.StringIO()
    render_profile(dict(p, kernels=[x for pair in zip(p["kernels"], again) for x in pair]),
                   Console(file=two, width=200, color_system=None))
    rows = [ln.split() for ln in two.getvalue().splitlines()]
    head = next(r for r in rows if r[:1] == ["kernel"])
    assert head[1] == "graph"
    first = rows[rows.index(head) + 1:rows.index(head) + 3]
    assert first[0][0] == first[1][0] and {first[0][1], first[1][1]} == {
        p["kernels"][0]["graph"], "0_1-inference"}, first


def test_info_lists_the_kernel_calls_judged(accuracy_trace: Path) -> None:
    """Under the first diverging kernel: each kernel call judged, in execution order, with its
    error against float64, eager's and the verdict (the relu bug: every call differs)."""
    text, s = rendered(accuracy_trace)
    (entry,) = s["numerics"].values()
    assert len(entry["kernels"]) == 8
    lines = text.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.split()[:2] == ["kernel", "call"])
    assert lines[head].split()[2:] == ["graph", "compiled↔fp64", "eager↔fp64", "verdict"]
    rows = [ln.split() for ln in lines[head + 1:head + 9]]
    first = entry["kernels"][0]
    assert rows[0][0] == first["kernel"] and rows[0][-2:] == ["FIRST", "DIVERGING"], rows[0]
    # the graph column names which graph (its id), not only its kind
    assert first["graph"] == "0_0-inference" and first["kind"] == "inference"
    assert rows[0][1:4] == [first["graph"], f"{first['err_compiled']:.3g}",
                            f"{first['err_eager']:.3g}"], rows[0]
    assert [r[-1] for r in rows[1:]] == ["differs"] * 7, rows
    assert rows[2][1] == "#2"  # the second call of the same kernel
    # only the first is known wrong: the table says the others may carry its error forward
    assert lines[head + 9].strip().startswith("a kernel that differs after the first diverging "
                                              "one may only carry its error forward"), lines


def test_a_trace_from_before_output_names_reads_output_n(accuracy_trace: Path,
                                                         copy_trace) -> None:
    t = copy_trace(accuracy_trace, "unnamed")
    runtime = json.loads((t / "runtime.json").read_text())
    (check,) = runtime["checks"].values()
    for o in check["outputs"]:
        o.pop("name", None)
    (t / "runtime.json").write_text(json.dumps(runtime))
    text, _ = rendered(t)
    row = next(ln.split() for ln in text.splitlines() if "FAIL" in ln.split())
    assert row[:2] == ["output", "0"], row


def test_info_prints_the_classification_under_the_first_diverging_kernel(
        accuracy_trace: Path, copy_trace) -> None:
    """A trace ``tuidebug numerics`` classified (numerics.json, written here from the real
    classification of the committed relu bug: float32 throughout, no random numbers, so no
    re-run could explain it): ``info`` prints the verdict and why right under the first
    diverging kernel, then each re-run's outcome, before the table of kernel calls — the lines
    ``tuidebug numerics`` prints (one renderer); without numerics.json, no such line."""
    from tuidebug.trace.format.writer import write_numerics
    from tuidebug.trace.queries.numerics_classes import CONTROL, WRONG_KERNEL, classify
    from tuidebug.viewers.numerics_report import numerics_report

    before, _ = rendered(accuracy_trace)
    assert "classified:" not in before
    t = copy_trace(accuracy_trace, "classified")
    (c,) = classify(Trace(t), {CONTROL: Trace(accuracy_trace)})  # reproduced: the same again
    write_numerics(t, {"compiles": [c.to_json()]})
    text, s = rendered(t)
    (entry,) = s["numerics"].values()
    assert entry["classified"]["verdict"] == WRONG_KERNEL, entry["classified"]
    lines = [ln.strip() for ln in text.splitlines()]
    first = next(i for i, ln in enumerate(lines) if ln.startswith("first diverging kernel: "))
    said = next(i for i, ln in enumerate(lines) if ln.startswith("classified: "))
    table = next(i for i, ln in enumerate(lines) if ln.split()[:2] == ["kernel", "call"])
    assert first < said < table, lines[first:table + 1]
    said_text = " ".join(lines[said:table])
    assert said_text.startswith("classified: a wrong kernel — neither precision casts nor "
                                "random numbers can explain it; the control run saw it again: "
                                "with the same settings cpp_fused"), said_text
    control = next(i for i in range(said, table) if lines[i].startswith("control ("))
    assert lines[control].startswith("control (same settings): stays: with the same settings "
                                     "cpp_fused"), lines[control]
    casts = next(i for i in range(said, table) if lines[i].startswith("emulate_precision"))
    assert said < control < casts
    assert lines[casts:casts + 2] == [
        "emulate_precision_casts=True: not run: every value its kernels wrote is float32 or "
        "wider: there is no cast to a narrower float to elide",
        "fallback_random=True: not run: its graph draws no random numbers"], lines[said:table]
    console = Console(file=io.StringIO(), width=200, record=True, color_system=None)
    for line in numerics_report(Trace(t)):
        console.print(line)
    report = [ln.strip() for ln in console.export_text().splitlines()]
    at = report.index(lines[first])
    assert report[at:at + table - first] == lines[first:table], (report, lines[first:table])


def test_the_check_line_sets_no_eager_time_beside_the_compiled_one(mlp_trace: Path) -> None:
    """The eager check's two times are one cold first call each, with no spread, and the eager
    one pays its warm-up: side by side ("compiled 1.2 ms, eager 25 ms") they read as a 20x
    speed-up never measured. ``info`` and the overview show the compiled call's time alone,
    say it was timed once and point to --profile (a correct trace: the mlp's 'match')."""
    from tuidebug.trace.queries.verdict import format_duration
    from tuidebug.tui.screens.overview import overview_renderables

    text, s = rendered(mlp_trace)
    check = s["accuracy"]["0/0"]
    assert check["eager_s"] is not None and check["first_call_s"] is not None, check
    eager = format_duration(check["eager_s"])
    console = Console(file=io.StringIO(), width=200, record=True, color_system=None)
    for r in overview_renderables(Trace(mlp_trace)):
        console.print(r)
    overview = console.export_text()
    for shown in (text, overview):
        line = next(ln for ln in shown.splitlines() if "eager check 0/0: match" in ln)
        assert line.rstrip().endswith(
            f"compiled first call {format_duration(check['first_call_s'])}, timed once "
            "(--profile compares compiled with eager)"), line
        assert eager not in line, line
        assert not any(w in shown.lower() for w in ("faster", "slower", "speedup")), shown


def test_one_gradient_judged_is_one_gradient() -> None:
    """A compiled function of one input that requires grad: '1 gradient judged' (it read
    '1 gradients judged'), more read 'gradients'."""
    from tuidebug.viewers.summary_text import accuracy_verdict

    check = {"close": True, "detail": "output 0: within 0.0001", "rule": "allclose",
             "gradients": {"outputs": [{"name": "x.grad"}]}}
    assert accuracy_verdict(check)[1].endswith("; 1 gradient judged")
    check["gradients"]["outputs"].append({"name": "y.grad"})
    assert accuracy_verdict(check)[1].endswith("; 2 gradients judged")


def test_a_script_that_raised_before_any_graph_is_not_said_compiled_ok(tmp_path: Path) -> None:
    """``torch.compile(fullgraph=True)`` on a function that prints: Dynamo raises Unsupported
    before any graph. The head said "SCRIPT FAILED (COMPILED OK; THE SCRIPT RAISED)" above
    "script raised Unsupported before compiling anything"."""
    from tuidebug.trace.format.writer import TraceWriter
    w = TraceWriter(tmp_path / "t", command=["tuidebug", "trace", "s12.py"])
    w.write_compile("0/0", {"graphs": [], "metrics": {"co_name": "f", "fail_type": "Unsupported",
                                                     "fail_reason": "Failed to trace builtin "
                                                                    "operator"}})
    w.add_compile("0/0", {"graphs": []})
    w.update(script_error={"type": "Unsupported", "message": "Failed to trace builtin operator",
                           "after_compiling": False})
    w.finish("ok")
    text, s = rendered(tmp_path / "t")
    head = text.splitlines()[0]
    assert s["status"] == "script_failed", s["status"]
    assert "SCRIPT FAILED (NOTHING COMPILED; THE SCRIPT RAISED)" in head, head
    assert "COMPILED OK" not in text


def test_a_compile_dynamo_refused_after_its_graph_compiled_is_not_said_compiled_ok(
        tmp_path: Path) -> None:
    """``torch._dynamo.mark_dynamic(x, 0)`` and ``if x.shape[0] == 8:``: Inductor compiles the
    graph, then Dynamo refuses the frame while building its guards (ConstraintViolationError:
    the size marked dynamic was specialized) and torch.compile raises it into the script. The
    head said "SCRIPT FAILED (COMPILED OK; THE SCRIPT RAISED)" above "script raised
    ConstraintViolationError after compiling": the compile had failed, its graph never ran."""
    from tuidebug.trace.format.writer import TraceWriter
    reason = ("Constraints violated (L['x'].size()[0])! For more information, run with "
              "TORCH_LOGS=\"+dynamic\".\n  - You marked L['x'].size()[0] as dynamic but your "
              "code specialized it to be a constant (8).")
    w = TraceWriter(tmp_path / "t", command=["tuidebug", "trace", "mark.py"])
    w.add_graph("0_0-inference", kind="inference", compile_id="0/0")
    w.set_graph_status("0_0-inference", "ok")
    w.write_compile("0/0", {"graphs": ["0_0-inference"], "metrics": {
        "co_name": "f", "co_filename": "/x/mark.py", "co_firstlineno": 3,
        "fail_type": "ConstraintViolationError", "fail_reason": reason,
        "has_guarded_code": False}})
    w.add_compile("0/0", {"graphs": ["0_0-inference"]})
    w.update(script_error={"type": "ConstraintViolationError", "message": reason,
                           "after_compiling": True})
    w.finish("ok")
    text, s = rendered(tmp_path / "t")
    head = text.splitlines()[0]
    assert s["status"] == "script_failed", s["status"]
    assert s["script_error"]["in_compile"] == "0/0", s["script_error"]
    assert "SCRIPT FAILED (DYNAMO'S COMPILE 0/0 FAILED; THE SCRIPT RAISED)" in head, head
    assert "COMPILED OK" not in text
    assert ("script raised ConstraintViolationError in torch.compile: Dynamo's compile 0/0 "
            "(f at mark.py:3) failed after its graph compiled, and the graph never ran: "
            "Constraints violated") in text, text


def test_a_kernel_call_with_nothing_judged_has_no_verdict(tmp_path: Path) -> None:
    """ViT's patch embedding (tuidebug numerics, torch 2.13): cpp_fused_convolution_0 only
    copies the image and the weight into the convolution's layout, buffers no FX node holds;
    nothing of it was compared, and the table said 'ok' with no error beside it, and counted
    it judged. It reads 'not judged', is not counted, and gets no mark in the code screen."""
    from tuidebug.trace.format.reader import Trace
    from tuidebug.trace.format.writer import TraceWriter
    from tuidebug.trace.queries.numerics import graph_numerics, numerics_summary
    from tuidebug.viewers.numerics_view import kernel_table, numerics_lines

    w = TraceWriter(tmp_path / "t", command=["tuidebug", "trace", "vit.py"])
    buf = {"buffer": "buf7", "node": "gelu", "ok": True, "err_compiled": 1.8e-8,
           "err_eager": 1.5e-8, "rule": "allclose"}
    w.write_runtime({"checks": {"0/0": {"close": True, "numerics": {
        "graphs": [{"graph": "0_0-inference", "kind": "inference", "kernels": [
            {"kernel": "cpp_fused_convolution_0", "call": 0, "buffers": [], "ok": True,
             "err_compiled": None, "err_eager": None},
            {"kernel": "cpp_fused_gelu_1", "call": 0, "buffers": [buf], "ok": True,
             "err_compiled": 1.8e-8, "err_eager": 1.5e-8}]}],
        "first": None, "note": "no kernel diverges"}}}})
    w.finish("ok")
    t = Trace(tmp_path / "t")
    entry = numerics_summary(t)["0/0"]
    assert [k["judged"] for k in entry["kernels"]] == [False, True], entry["kernels"]
    text = " ".join(str(getattr(x, "plain", x)) for x in numerics_lines(entry))
    assert "kernels judged: 1, none diverging (1 more wrote no FX node's value" in text, text
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(kernel_table(entry))
    rows = [ln for ln in console.export_text().splitlines() if "cpp_fused" in ln]
    assert len(rows) == 2 and rows[0].rstrip().endswith("not judged"), rows
    assert rows[1].rstrip().endswith("ok"), rows
    assert set(graph_numerics(t, "0_0-inference").kernels) == {"cpp_fused_gelu_1"}
    from tuidebug.trace.queries.numerics_reruns import judged_count

    assert judged_count(t.runtime["checks"]["0/0"]["numerics"]) == 1  # 'classified: … judged'
