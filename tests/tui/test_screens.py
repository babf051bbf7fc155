"""Each screen, driven with keys on a real trace; assertions on what it paints."""

from __future__ import annotations

from pathlib import Path

from tuidebug.trace.queries import failure, provenance
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.verdict import format_duration
from tuidebug.tui import model


async def test_overview_shows_graphs_timings_and_config(open_ui, transformer_trace: Path) -> None:
    trace = Trace(transformer_trace)
    async with open_ui(transformer_trace) as ui:
        text = ui.text()
        assert "OK" in text
        assert len(trace.graphs) == 2, [g.id for g in trace.graphs]
        for g in trace.graphs:
            assert g.id in text
        lines = "\n".join(ui.lines("#overview"))
        assert "time per compile phase" in lines
        all_lines = ui.lines("#overview")
        timings = all_lines[next(i for i, ln in enumerate(all_lines) if "time per compile phase" in ln):]
        for g in trace.graphs:  # each graph's row of phase times ends with the total
            row = next(ln for ln in timings if ln.strip().startswith(g.id))
            assert row.rstrip().endswith(format_duration(model.total_compile_s(g)))
            slowest = max(g.meta.phase_durations(), key=lambda pd: pd[1])
            assert format_duration(slowest[1]) in row
        changed = trace.config.get("changed") or {}
        assert "trace.provenance_tracking_level" in changed  # tuidebug sets it in every trace
        assert f"config differences from defaults ({len(changed)})" in lines
        for flag, v in changed.items():  # one row each: flag, value, default
            row = next(ln for ln in all_lines if ln.strip().startswith(flag + " "))
            assert row.split()[1:3] == [repr(v["value"]), repr(v["default"])], row
        assert "set by tuidebug" in lines
        assert "problems reading the trace (0)" in lines


async def test_overview_enter_on_a_graph_opens_the_pass_stepper(open_ui, transformer_trace: Path) -> None:
    trace = Trace(transformer_trace)
    backward = trace.graphs[1]
    async with open_ui(transformer_trace) as ui:
        view = ui.app.screen.query_one("#overview")
        row = next(i for i, ln in enumerate(ui.lines("#overview"))
                   if ln.strip().startswith(backward.id))
        view.move_to(row)
        await ui.press("enter")
        assert ui.app.current_mode == "passes"
        assert ui.app.current_graph.id == backward.id
        assert f"{backward.id}: {len(backward.stages)} stages" in ui.text()


async def test_overview_enter_on_a_compile_shows_its_guards(open_ui, transformer_trace: Path) -> None:
    trace = Trace(transformer_trace)
    cid, c = next(iter(trace.compiles.items()))
    guard_line = next(ln for ln in str(c["guards"]).splitlines() if "TENSOR_MATCH" in ln)
    async with open_ui(transformer_trace) as ui:
        lines = ui.lines("#overview")
        row = next(i for i, ln in enumerate(lines) if ln.strip().startswith(f"{cid}  "))
        assert str(c["metrics"]["guard_count"]) in lines[row]  # the guards column
        ui.app.screen.query_one("#overview").move_to(row)
        await ui.press("enter")
        shown = "\n".join(ui.lines("#file-view"))
        assert f"compile {cid}:" in shown and "── guards" in shown
        assert guard_line in shown  # Dynamo's guard text, as recorded
        await ui.press("escape")
        assert ui.app.current_mode == "overview" and not ui.app.screen.query("#file-view")


async def test_pass_stepper_shows_added_removed_and_changed_nodes(open_ui, transformer_trace: Path) -> None:
    g = Trace(transformer_trace).graphs[0]
    target = next(s for s in g.stages if s.kind == "pass" and s.file and s.added)
    recorded = g.stage_changes(target)
    async with open_ui(transformer_trace) as ui:
        await ui.press("2")
        screen = ui.app.screen
        for _ in range(len(g.stages)):
            if screen.current_stage().index == target.index:
                break
            await ui.press("right_square_bracket")
        assert screen.current_stage().index == target.index
        text = ui.text()
        assert f"[{target.index}] {target.name}" in text
        assert f"+{len(recorded['added'])} added" in text
        lines = ui.lines("#graph-view")
        for name in recorded["added"]:
            assert any(ln.startswith(f"+ {name}:") or ln == f"+ {name}" for ln in lines), name
        for name in recorded["removed"]:
            assert any(ln.startswith(f"- {name}") for ln in lines), name
        for name in recorded["changed"]:
            assert any(ln.startswith(f"~ {name}") or ln.startswith("~ return") for ln in lines)
        # the cursor is on the first change, so it is on screen
        first = ui.cursor_line("#graph-view")
        assert first[:2] in ("+ ", "- ", "~ ")
        assert first[2:40] in text
        # changes only
        await ui.press("c")
        only = ui.lines("#graph-view")
        assert len(only) == sum(len(v) for v in recorded.values())
        assert all(ln[:2] in ("+ ", "- ", "~ ") for ln in only)


async def test_next_and_previous_pass_keys(open_ui, transformer_trace: Path) -> None:
    g = Trace(transformer_trace).graphs[0]
    async with open_ui(transformer_trace) as ui:
        await ui.press("2")
        screen = ui.app.screen
        assert screen.current_stage().index == g.stages[0].index
        await ui.press("n", "n")
        assert screen.current_stage().index == g.stages[2].index
        assert f"[2] {g.stages[2].name}" in ui.text()
        assert not g.stages[2].file, "the transformer's stage 2 is a pre-grad pass that changes nothing"
        assert "this pass changed nothing" in ui.text()
        await ui.press("p")
        assert screen.current_stage().index == g.stages[1].index
        # ] and [ step over the passes that changed the graph (what the title's "N changed"
        # counts); a stage (aot_joint, aot_forward, post_grad) differs from the snapshot
        # before it, but is no pass's change
        changed = [s for s in g.stages if s.kind == "pass" and s.changed and s.file]
        assert len(changed) >= 2
        assert any(s.kind == "stage" and s.file and s.index < changed[0].index and
                   any(g.stage_changes(s).values()) for s in g.stages[2:])
        assert f"{len(changed)} changed" in ui.text()
        await ui.press("right_square_bracket")
        assert screen.current_stage().index == changed[0].index
        await ui.press("right_square_bracket")
        assert screen.current_stage().index == changed[1].index
        await ui.press("left_square_bracket")
        assert screen.current_stage().index == changed[0].index
        await ui.press("left_square_bracket")
        assert screen.current_stage().index == changed[0].index
        assert "no earlier pass changed the graph" in ui.notifications()


async def test_ir_screen_shows_fusion_side_by_side_and_rejections(open_ui, transformer_trace: Path) -> None:
    g = Trace(transformer_trace).graphs[0]
    pre, post = model.ir_nodes(g.ir_pre), model.ir_nodes(g.ir_post)
    group = next(n for n in post if len(n.get("members") or []) > 1)
    reason = next(d["reason"] for d in g.fusion if d["action"] == "rejected")
    async with open_ui(transformer_trace) as ui:
        await ui.press("3")
        text = ui.text()
        assert f"{len(pre)} scheduler nodes before fusion → {len(post)} after" in text
        assert "pre-fusion" in text and "post-fusion" in text
        assert group["name"] in "\n".join(ui.lines("#post-view"))
        assert reason in text
        # moving onto a member of a fused group moves the post-fusion cursor to the group
        pre_view = ui.app.screen.query_one("#pre-view")
        member = group["members"][1]
        pre_view.move_to(next(i for i, n in enumerate(pre) if n["name"] == member))
        await ui.settle()
        assert ui.cursor_line("#post-view").startswith(group["name"])
        assert f"fusion decisions about {member}" in ui.text()
        await ui.press("r")
        assert all(ln.startswith("rejected") for ln in ui.lines("#fusion-view"))
        await ui.press("t")
        assert any(ln.startswith("op0: ") for ln in ui.lines("#pre-view"))


async def test_code_screen_shows_kernel_source_and_provenance(open_ui, transformer_trace: Path) -> None:
    g = Trace(transformer_trace).graphs[0]
    kernel = next(k for k in provenance.kernel_infos(g) if k.kind != "extern" and k.source)
    source = g.code(kernel.file)
    src = kernel.source[0]
    async with open_ui(transformer_trace) as ui:
        await ui.press("4")
        ui.app.screen.goto_kernel(kernel.name)
        await ui.settle()
        assert ui.lines("#code-view") == source.expandtabs(4).rstrip("\n").split("\n")
        text = ui.text()
        assert kernel.file in text
        assert source.splitlines()[0] in text
        prov = "\n".join(ui.lines("#provenance"))
        assert f"{Path(src['file']).name}:{src['line']}" in prov
        for fx in kernel.fx_nodes:
            assert f"fx node {fx}" in prov
        # the wrapper
        await ui.press("w")
        assert "wrapper.py" in ui.text()
        assert any("def call(" in ln for ln in ui.lines("#code-view"))


async def test_jump_from_kernel_to_fx_nodes_and_source_line(open_ui, transformer_trace: Path) -> None:
    g = Trace(transformer_trace).graphs[0]
    kernel = next(k for k in provenance.kernel_infos(g) if k.kind != "extern" and k.source)
    src = kernel.source[0]
    async with open_ui(transformer_trace) as ui:
        await ui.press("4")
        ui.app.screen.goto_kernel(kernel.name)
        await ui.settle()
        # s: the user's source line
        await ui.press("s")
        assert ui.cursor_line("#code-view").strip() == str(src["code"]).strip()
        assert f"source: {src['file']}:{src['line']}" in ui.text()
        # f: the kernel's FX nodes in the pass stepper, on the last snapshot
        await ui.press("f")
        assert ui.app.current_mode == "passes"
        screen = ui.app.screen
        assert screen.current_stage().index == g.snapshots()[-1].index
        assert screen.marks == set(kernel.fx_nodes)
        assert ui.cursor_line("#graph-view").startswith(f"  {kernel.fx_nodes[0]}")
        assert f"kernels {kernel.name}" in ui.text() or kernel.name in ui.text()


async def test_jump_from_fx_node_to_its_kernel(open_ui, transformer_trace: Path) -> None:
    g = Trace(transformer_trace).graphs[0]
    node, kernels = next((n, ks) for n, ks in g.provenance["fx_to_kernels"].items()
                         if len(ks) == 1 and g.kernel(ks[0]) and g.kernel(ks[0]).file)
    async with open_ui(transformer_trace) as ui:
        await ui.press("2")
        screen = ui.app.screen
        screen.goto_node(node)
        await ui.settle()
        assert ui.cursor_line("#graph-view").startswith(f"  {node}:")
        assert kernels[0] in ui.text()  # the node's detail lists its kernel
        await ui.press("enter")
        assert ui.app.current_mode == "code"
        assert ui.app.screen.selected() == kernels[0]
        assert ui.lines("#code-view")[0] == g.code(g.kernel(kernels[0]).file).splitlines()[0]


async def test_autotune_empty_state(open_ui, transformer_trace: Path) -> None:
    async with open_ui(transformer_trace) as ui:
        await ui.press("5")
        text = ui.text()
        assert "No autotuning was recorded" in text
        assert "max_autotune=true" in text


async def test_autotune_choices_and_winner(open_ui, autotune_trace: Path) -> None:
    g = Trace(autotune_trace).graphs[0]
    entry = g.autotune[0]
    async with open_ui(autotune_trace) as ui:
        await ui.press("5")
        text = ui.text()
        assert f"{len(g.autotune)} tuned ops" in text
        assert f"winner {entry['winner']}" in text
        for c in entry["choices"]:
            assert c["name"] in text
            if c.get("time_ms") is not None:
                assert f"{c['time_ms']:.4f} ms" in text
        winner_line = next(ln for ln in ui.lines("#choices-view") if entry["winner"] in ln and "★" in ln)
        assert "1.00×" in winner_line


async def test_failed_trace_shows_phase_error_and_minify_hint(open_ui, failing_trace: Path) -> None:
    async with open_ui(failing_trace) as ui:
        text = ui.text()
        assert "FAILED" in text
        assert "kernel_compile ✗" in text
        assert f"tuidebug minify {failing_trace}" in text
        await ui.press("6")
        text = ui.text()
        assert "phase   kernel_compile" in text
        assert "CppCompileError" in text
        assert f"tuidebug minify {failing_trace}" in text
        errors = "\n".join(ui.lines("#errors-view"))
        assert "traceback" in errors
        # the pass stepper and code still open: the trace has graphs up to the failure
        await ui.press("2")
        assert ui.app.screen.stage_view is not None and ui.lines("#graph-view")


async def test_crashed_trace_shows_how_far_it_got(open_ui, crashed_trace: Path) -> None:
    async with open_ui(crashed_trace) as ui:
        text = ui.text()
        assert "CRASHED" in text
        assert "lowering ✗" in text and "post_grad ✓" in text
        await ui.press("6")
        assert "died during phase 'lowering'" in ui.text()
        await ui.press("4")
        await ui.press("w")
        assert "wrapper: not recorded" in ui.text()


async def test_failed_kernel_compile_points_into_the_kernel(open_ui, failing_trace: Path) -> None:
    site = failure.error_report(Trace(failing_trace)).site
    assert site is not None, "the planted C++ error is found in a kernel the trace kept"
    async with open_ui(failing_trace) as ui:
        assert f"the compiler error is in kernel {site.kernel}" in "\n".join(ui.lines("#overview"))
        view = ui.app.screen.query_one("#overview")
        view.move_to(next(i for i, ln in enumerate(ui.lines("#overview"))
                          if "the compiler error is in kernel" in ln))
        await ui.press("enter")
        assert ui.app.current_mode == "code"
        assert ui.app.screen.selected() == site.kernel
        assert ui.app.screen.query_one("#code-view").cursor == site.line - 1
        assert site.code in ui.cursor_line("#code-view")
        # the view scrolls to that line once laid out (TextView retries after the refresh that
        # applies the new source's size: tests/tui/test_textview.py)
        assert await ui.wait_for(lambda: site.code in ui.text(), 15, poll=0.1), \
            ui.text() + "\n" + ui.layout()


async def test_svg_of_the_pass_stepper_names_the_stage_on_screen(open_ui, transformer_trace: Path,
                                                                  tmp_path: Path) -> None:
    """The TUI asks the SVG renderer for the stage on screen by its one label
    (``trace.stages.stage_label``): the drawing's title names the same stage and snapshot."""
    from tuidebug.trace.queries.stages import previous_snapshot, stage_label
    from tuidebug.viewers import svg

    g = Trace(transformer_trace).graphs[0]
    unchanged = next(s for s in g.stages if s.kind == "pass" and not s.file and s.index > 0)
    changed = next(s for s in g.stages if s.kind == "pass" and s.file and any(
        g.stage_changes(s).values()))
    async with open_ui(transformer_trace) as ui:
        await ui.press("2", *["n"] * unchanged.index)
        screen = ui.app.screen
        assert screen.current_stage().index == unchanged.index
        shown = screen.stage_view.shown
        assert f"[{unchanged.index}] {unchanged.name}" in ui.text()
        assert "this pass changed nothing" in ui.text()
        assert screen.stage_view.note.endswith(f"as of [{shown.index}] {shown.name}")
        req = screen.svg_request()
        assert req["stage"] == stage_label(unchanged) and "diff" not in req
        title = svg.export(transformer_trace, out=tmp_path / "a.svg", **req).dot.dot.source
        assert (f"pass {unchanged.index} {unchanged.name} (changed nothing; graph as of "
                f"{stage_label(shown)})") in title
        await ui.press(*["n"] * (changed.index - unchanged.index))
        assert screen.current_stage().index == changed.index
        req = screen.svg_request()
        assert req == {"graph_id": g.id, "stage": stage_label(changed), "diff": True}
        title = svg.export(transformer_trace, out=tmp_path / "b.svg", **req).dot.dot.source
        assert f"diff {stage_label(previous_snapshot(g, changed))} → {stage_label(changed)}" in title


async def test_a_script_that_raised_after_compiling_is_said_as_info_says_it(
        open_ui, mlp_trace: Path, copy_trace) -> None:
    """The compile was fine, the script raised: the overview and the title bar say SCRIPT
    FAILED with what the script raised (they said OK, and nothing of the script), as ``info``
    does; the compile's own progress is not shown as a failure."""
    import json

    t = copy_trace(mlp_trace, "raised")
    manifest = json.loads((t / "manifest.json").read_text())
    manifest["script_error"] = {"type": "ValueError", "message": "bad shape\nsecond line",
                                "after_compiling": True}
    (t / "manifest.json").write_text(json.dumps(manifest))
    async with open_ui(t) as ui:
        text = ui.text()
        overview = "\n".join(ui.lines("#overview"))
        assert text.count("SCRIPT FAILED") >= 2, text  # the title bar's badge and the overview
        assert " OK " not in text, text
        assert "script  raised ValueError after compiling: bad shape" in overview, overview
        assert "second line" not in overview and "how far compilation got" not in overview
