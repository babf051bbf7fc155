"""The UI's pure logic (tuidebug.tui.model, and the trace queries it shows) on real traces."""

from __future__ import annotations

from pathlib import Path

from tuidebug.trace.queries import failure
from tuidebug.trace.format.reader import GraphMeta, Trace
from tuidebug.tui import model


def test_stage_view_marks_what_the_pass_recorded(transformer_trace: Path) -> None:
    trace = Trace(transformer_trace)
    g = trace.graphs[0]
    changed = [s for s in g.stages if s.kind == "pass" and s.changed and s.file]
    assert changed, "the transformer's forward graph has passes that changed it"
    for stage in changed:
        view = model.stage_view(g, stage)
        recorded = g.stage_changes(stage)
        marks = {m: {ln.node for ln in view.lines if ln.mark == m}
                 for m in (model.ADDED, model.CHANGED, model.REMOVED)}
        assert marks[model.ADDED] == set(recorded["added"])
        assert marks[model.CHANGED] == set(recorded["changed"])
        assert marks[model.REMOVED] == set(recorded["removed"])
        # every node of the snapshot is shown once, plus the removed ones
        graph = g.stage_graph(stage)
        assert len(view.lines) == len(graph) + len(recorded["removed"])


def test_unchanged_pass_shows_the_previous_snapshot(transformer_trace: Path) -> None:
    g = Trace(transformer_trace).graphs[0]
    stage = next(s for s in g.stages if s.kind == "pass" and not s.file)
    view = model.stage_view(g, stage)
    assert view.shown is not None and view.shown.index < stage.index
    assert "changed nothing" in view.note
    assert all(ln.mark == model.SAME for ln in view.lines)
    assert len(view.lines) == len(g.stage_graph(view.shown))


def test_phase_durations() -> None:
    # format v1: durations, ordered by when each phase started; what is not a number left out
    meta = GraphMeta.from_json({"phase_times_s": {"b": 3.0, "a": 1.0, "c": 0.5, "d": "x",
                                                  "e": float("nan"), "f": True},
                                "phase_starts_s": {"a": 0.0, "b": 1.0, "c": 4.0}})
    assert meta.phase_durations() == [("a", 1.0), ("b", 3.0), ("c", 0.5)]


def test_phase_durations_of_a_real_trace_add_up(transformer_trace: Path) -> None:
    graphs = Trace(transformer_trace).graphs
    assert len(graphs) == 2, [g.id for g in graphs]
    for g in graphs:
        durations = g.meta.phase_durations()
        assert [p for p, _ in durations][:1] in (["dynamo"], ["partition"])
        assert all(d >= 0 for _, d in durations)
        assert model.total_compile_s(g) == sum(d for _, d in durations)


def test_error_report_of_a_failed_compile(failing_trace: Path) -> None:
    r = failure.error_report(Trace(failing_trace))
    assert r.status == "failed"
    assert r.phase == "kernel_compile"
    assert r.type and "CppCompileError" in r.type
    assert any(f"tuidebug minify {failing_trace}" in h for h in r.hints)
    assert "dynamo" in r.phases_done and "kernel_compile" not in r.phases_done
    assert any("error" in line.lower() for line in failure.key_error_lines(r.message))


def test_error_report_of_a_crashed_capture(crashed_trace: Path) -> None:
    r = failure.error_report(Trace(crashed_trace))
    assert r.status == "crashed"
    assert r.phase == "lowering"
    assert "died during phase 'lowering'" in r.message
    assert any("minify" in h for h in r.hints)


def test_autotune_rows_fastest_first(autotune_trace: Path) -> None:
    g = Trace(autotune_trace).graphs[0]
    assert g.autotune, "max_autotune with the C++ GEMM template records tuned ops"
    for entry in g.autotune:
        rows = model.autotune_rows(entry)
        times = [c["time_ms"] for c in rows if not c.get("error")]
        assert times == sorted(times)
        assert model.winner_name(entry) == entry["winner"]


def test_graph_lines_search_reads_what_is_drawn(accuracy_trace: Path) -> None:
    """Each line of the pass stepper: the text search reads (``plain``) is the text drawn
    (``rich``), numerics verdicts included — on every stage of the relu bug's graph, with its
    real verdicts, and with a verdict under the name of a node a stage removed (as a name a
    later pass reuses): a removed line shows no verdict, so search must not find one there."""
    from tuidebug.trace.queries.numerics import graph_numerics
    from tuidebug.tui.screens.stage_lines import GraphLines

    trace = Trace(accuracy_trace)
    (g,) = trace.graphs
    judged = graph_numerics(trace, g.id).nodes
    assert judged, "the accuracy trace's nodes were judged"
    verdict = next(iter(judged.values()))
    checked = removed = 0
    for stage in g.stages:
        view = model.stage_view(g, stage)
        gone = {ln.node for ln in view.lines if ln.mark == model.REMOVED}
        removed += len(gone)
        for changes_only in (False, True):
            lines = GraphLines(view, set(), changes_only,
                               {**judged, **{name: verdict for name in gone}})
            for i in range(len(lines)):
                assert lines.plain(i) == lines.rich(i).plain, (stage.name, i)
                checked += 1
    assert checked and removed, (checked, removed)


def test_a_stage_name_from_the_trace_is_drawn_inert() -> None:
    """Stage and pass-subsystem names come from the trace (meta.json): a control sequence in
    one is shown (``\\x1b``), never sent to the terminal."""
    from tuidebug.trace.format.graph_meta import StageInfo
    from tuidebug.tui.screens.stage_lines import stage_options, stage_prompt

    s = StageInfo(3, "evil\x1b]52;c;AAAA\x07pass", "pass", "sub\x1b[2Jsystem", None, True,
                  1, 0, 0, "stages/003-x.json", 4)
    shown = stage_prompt(s).plain if hasattr(stage_prompt(s), "plain") else str(stage_prompt(s))
    drawn = " ".join(str(getattr(o.prompt, "plain", o.prompt)) for o in stage_options([s]))
    for text in (shown, drawn):
        assert "\x1b" not in text and "\x07" not in text, text
    assert "\\x1b]52" in drawn and "\\x1b[2J" in drawn, drawn


def test_an_ok_trace_whose_last_compile_made_no_graph_got_to_its_kernels(
        mlp_trace: Path, copy_trace) -> None:
    """The manifest's phase is the last compile's: a last resume function with nothing to
    compile (a real GPT-2 + AdamW step: 8/0, after torch's own break in opt.step()) left it at
    ``dynamo``, and the errors screen said compilation got no further than Dynamo though every
    graph compiled to kernels (found by a new user)."""
    import json

    path = copy_trace(mlp_trace, "ok-last-dynamo")
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["status"] == "ok" and manifest["graphs"]
    manifest.update(phase="dynamo", current_graph=None)
    (path / "manifest.json").write_text(json.dumps(manifest))
    r = failure.error_report(Trace(path))
    assert r.phase == "kernel_compile", r.phase
    assert r.phases_done == list(r.phases[:r.phases.index("kernel_compile")])
    manifest.update(graphs=[])  # no graph at all: Dynamo is as far as it got
    (path / "manifest.json").write_text(json.dumps(manifest))
    assert failure.error_report(Trace(path)).phase == "dynamo"
