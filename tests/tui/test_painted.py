"""What a person sees at 160, 120 and 80 columns: one-line list rows, the node detail, help
headings, whole numbers in tables, failure and crash hints, the error-site hint."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.text import Text

from tuidebug.trace.queries import failure, provenance
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.verdict import format_duration
from tuidebug.tui import model
from tuidebug.tui.widgets.lists import PickList, Row


def pane(ui, selector: str) -> list[str]:
    """The painted rows of one widget, cropped to its columns."""
    region = ui.app.screen.query_one(selector).region
    rows = ui.text().split("\n")[region.y:region.y + region.height]
    return [r[region.x:region.x + region.width] for r in rows]


def test_row_keeps_its_tail_and_cuts_its_head() -> None:
    row = Row(Text("fix_auto_functionalized_dtype_views"), Text("  +3 -1"))
    assert row.fit(80).plain == "fix_auto_functionalized_dtype_views  +3 -1"
    cut = row.fit(20).plain
    assert len(cut) == 20 and cut.endswith("…  +3 -1") and cut.startswith("fix_auto")
    kernel = Row(Text("cpp_fused_add_native_layer_norm_relu_2"), Text("  cpp 140l"), middle=True)
    cut = kernel.fit(30).plain
    assert len(cut) == 30 and cut.startswith("cpp_fused") and "…" in cut
    assert cut.endswith("relu_2  cpp 140l")
    assert Row(Text("abc"), Text("  a long tail here")).fit(8).plain.endswith("…")
    assert kernel.plain == "cpp_fused_add_native_layer_norm_relu_2  cpp 140l"  # search sees all
    # a path cut at its start: its file name and line stay (a Hugging Face path was cut to
    # '.venv/lib/python3.11/site-package…')
    path = Row(Text("/work/main/.venv/lib/python3.11/site-packages/transformers/utils/generic.py"),
               Text(":937"), start=True)
    cut = path.fit(24).plain
    assert cut == "…rs/utils/generic.py:937" and len(cut) == 24, cut
    assert path.fit(200).plain == path.plain


@pytest.mark.parametrize("width", [80, 120])
async def test_the_compiles_where_column_keeps_the_file_and_line(open_ui, transformer_trace: Path,
                                                                  width: int) -> None:
    compiles = Trace(transformer_trace).compiles
    async with open_ui(transformer_trace, size=(width, 40)) as ui:
        text = "\n".join(ui.lines("#overview"))
    seen = 0
    for c in compiles.values():
        m = c.get("metrics") or c.get("summary") or {}
        if not m.get("co_filename"):
            continue
        name = Path(m["co_filename"]).name
        assert f"{name}:{m['co_firstlineno']}" in text, (name, text)
        seen += 1
    assert seen, compiles


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_list_rows_are_one_line_with_an_ellipsis(open_ui, transformer_trace: Path,
                                                        size) -> None:
    g = Trace(transformer_trace).graphs[0]
    long = max((s for s in g.stages), key=lambda s: len(s.name))
    async with open_ui(transformer_trace, size=size) as ui:
        await ui.press("2")
        lst = ui.app.screen.query_one("#stages", PickList)
        lst.select_id(str(g.stages.index(long)))
        await ui.settle()
        rows = [r.rstrip() for r in pane(ui, "#stages")]
        painted = [r for r in rows if r.strip()]
        # every row is a stage (index first) or a subsystem heading: nothing wrapped
        assert all(re.match(r"^ *\d+ \S", r) or r.startswith("    ") for r in painted), rows
        row = next(r for r in painted if re.match(rf"^ *{long.index} ", r))
        assert long.name not in row and row.endswith("…"), row
        # the search still finds the whole name
        assert lst.search(long.name[-10:], include_current=True)

        await ui.press("4")
        kernels = [k for k in provenance.kernel_infos(ui.app.current_graph) if k.kind != "extern"]
        rows = [r.rstrip() for r in pane(ui, "#kernels") if r.strip()]
        assert rows[0] == "wrapper.py"
        for k in kernels:  # each on one line, its kind and size kept, its end kept
            row = next(r for r in rows if r.endswith(f"  {k.kind} {k.lines}l") and
                       r.split("  ")[0].endswith(k.name[-3:]))
            assert k.name in row or "…" in row, row
        assert any("…" in r for r in rows), rows
        assert all(not r.startswith(" ") for r in rows), rows  # no wrapped continuations


async def test_node_detail_shows_the_kernels_line_at_120_columns(open_ui, transformer_trace: Path) -> None:
    g = Trace(transformer_trace).graphs[0]
    final = g.final_graph()
    # a node with a long source line (it wraps at 120 columns) and a kernel
    node = max((n for n in final.nodes if provenance.kernels_for_node(g, n.name)
                and (n.source or {}).get("file")),
               key=lambda n: len(str((n.source or {}).get("code"))) + len(n.module or ""))
    async with open_ui(transformer_trace, size=(120, 40)) as ui:
        await ui.press("2")
        ui.app.screen.goto_node(node.name)
        await ui.settle()
        detail = "\n".join(pane(ui, "#node-detail"))
        assert node.name in detail
        assert "(enter or k: open)" in detail, detail
        assert provenance.kernels_for_node(g, node.name)[0][:20] in detail


async def test_a_stage_marks_changes_since_the_previous_snapshot(open_ui, transformer_trace: Path) -> None:
    g = Trace(transformer_trace).graphs[0]
    pos, stage = next((i, s) for i, s in enumerate(g.stages) if s.kind == "stage" and s.file
                      and i > 0 and g.stage_changes(s)["added"])
    async with open_ui(transformer_trace) as ui:
        await ui.press("2")
        ui.app.screen.query_one("#stages", PickList).select_id(str(pos))
        await ui.settle()
        text = ui.text()
        assert f"[{stage.index}] {stage.name}" in text
        assert "since the previous snapshot" in text  # the title, and the marked node's detail
        assert "by this pass" not in text
        detail = "\n".join(pane(ui, "#node-detail"))
        assert "since the previous snapshot)" in detail, detail


async def test_help_headings_are_whole(open_ui, transformer_trace: Path) -> None:
    from tuidebug.tui.screens.modals import SCOPE_TITLES

    async with open_ui(transformer_trace, size=(120, 40)) as ui:
        await ui.press("question_mark")
        text = ui.text()
        ui.app.screen.query_one("VerticalScroll").scroll_end(animate=False, immediate=True)
        await ui.settle()
        text += ui.text()
        assert "In every list and text view" in text  # was cut to its first 16 columns
        assert "Everywhere" in text and "Compare (8)" in text
        assert len(SCOPE_TITLES) > 2
    from rich.console import Console

    from tuidebug.tui.screens.modals import help_table

    console = Console(width=110, record=True)
    console.print(help_table())
    whole = console.export_text()
    for screen in ("Shapes (9)", "Autotune (5)", "Overview (1)"):  # every screen has help
        assert screen in whole, screen
    from tuidebug.tui import keymap
    from tuidebug.tui.screens.modals import SCREEN_ABOUT

    for name in (*keymap.SCREENS, "ranks"):  # a screen added later gets its section too
        assert name in SCOPE_TITLES and SCOPE_TITLES[name] in whole, name
    flat = " ".join(whole.split())
    for name in ("shapes", "autotune"):  # what the screen shows, not only its keys
        assert " ".join(SCREEN_ABOUT[name][0][1].split()[:6]) in flat, name


async def test_tables_keep_numbers_whole_at_80_columns(open_ui, transformer_trace: Path) -> None:
    trace = Trace(transformer_trace)
    async with open_ui(transformer_trace, size=(80, 24)) as ui:
        lines = ui.lines("#overview")
        table = lines[next(i for i, ln in enumerate(lines) if "time per compile phase" in ln):]
        assert len(trace.graphs) == 2, [g.id for g in trace.graphs]
        for g in trace.graphs:
            timings = next(ln for ln in table if ln.startswith(f" {g.id} "))
            assert timings.rstrip().endswith(format_duration(model.total_compile_s(g))), timings
            for _, d in g.meta.phase_durations():
                assert format_duration(d) in timings, (format_duration(d), timings)
        assert not any(re.search(r"\d\.…", ln) for ln in lines), lines
        # the table is wider than the view: it scrolls sideways
        view = ui.app.screen.query_one("#overview")
        assert view.virtual_size.width > view.size.width
        before = ui.text()
        await ui.press("right", "right")
        assert ui.text() != before


async def test_accuracy_failure_shows_every_compile_phase_done(open_ui, accuracy_trace: Path) -> None:
    r = failure.error_report(Trace(accuracy_trace))
    assert r.phase == "accuracy" and r.phases[-1] == "accuracy"
    async with open_ui(accuracy_trace) as ui:
        for screen in ("1", "6"):
            await ui.press(screen)
            text = ui.text()
            assert "kernel_compile ✓ → runtime ✓ → accuracy ✗" in text, text
            assert "dynamo ✓" in text and " ·" not in text
            assert f"tuidebug minify {accuracy_trace}" in text


async def test_accuracy_verdict_shows_the_rule_and_a_row_per_output(open_ui,
                                                                    accuracy_trace: Path) -> None:
    """At 80 columns: MISMATCH with the judge's reason, and the per-output table (dtype, shape,
    compiled and eager error against float64, the rule, FAIL) whole."""
    async with open_ui(accuracy_trace, size=(80, 24)) as ui:
        lines = ui.lines("#overview")
        i = next(i for i, ln in enumerate(lines) if "compiled vs eager" in ln)
        block = "\n".join(lines[i:i + 8])
        assert "eager check 0/0: MISMATCH  output 0: RMSE vs float64: compiled" in block, block
        header = next(ln for ln in lines[i:] if "compiled↔fp64" in ln)
        assert all(h in header for h in ("dtype", "shape", "eager↔fp64", "rule")), header
        row = next(ln for ln in lines[i:] if "FAIL" in ln)
        assert "float32" in row and "[16,4]" in row and "rmse-fp64" in row, row
        assert max(len(ln) for ln in (header, row)) <= 80
        j = next(j for j in range(i, len(lines)) if "first diverging kernel" in lines[j])
        first = " ".join(ln.strip() for ln in lines[j:j + 3])
        assert "first diverging kernel: cpp_fused" in first, first  # the relu bug's kernel
        assert " TEST " in ui.text().splitlines()[0]  # the planted bug, on the title bar at 80


async def test_crashed_trace_suggests_running_it_again_not_minify(open_ui, crashed_trace: Path) -> None:
    trace = Trace(crashed_trace)
    last = trace.graphs[-1].stages[-1]
    async with open_ui(crashed_trace, notifications=True) as ui:
        lines = "\n".join(ui.lines("#overview"))
        assert f"tuidebug minify {crashed_trace}" not in lines
        assert "run it again" in lines
        assert "minify needs a failed trace" in lines
        assert f"after [{last.index}] {last.name}" in lines
        await ui.press("6")
        assert "run it again" in "\n".join(ui.lines("#errors-view"))
        await ui.press("m")
        notes = " ".join(ui.notifications())
        assert "crashed" in notes and "did not fail" not in notes
        assert ui.app.screen.task_running is None


@pytest.mark.parametrize("screen,view", [("1", "#overview"), ("6", "#errors-view")])
async def test_enter_on_any_line_of_the_error_site_hint(open_ui, failing_trace: Path, screen,
                                                        view) -> None:
    site = failure.error_report(Trace(failing_trace)).site
    assert site is not None
    async with open_ui(failing_trace, size=(80, 24)) as ui:
        await ui.press(screen)
        # the cursor starts on the hint, which wraps at 80 columns
        assert "the compiler error is in kernel" in ui.cursor_line(view)
        start = ui.app.screen.query_one(view).cursor
        assert "enter opens it" not in ui.lines(view)[start]
        await ui.press("down")
        assert "the compiler error is in kernel" not in ui.cursor_line(view)
        await ui.press("enter")
        assert ui.app.current_mode == "code"
        assert ui.app.screen.selected() == site.kernel
        assert ui.app.screen.query_one("#code-view").cursor == site.line - 1


async def test_restarted_frames_name_their_function_and_reasons_fit_80_columns(
        open_ui, graph_break_trace: Path) -> None:
    """``0/0`` restarted as ``0/0_1``: the same frame, so the same function and place (it
    showed ``–``/``?``); a recompile reason wraps within 80 columns, whole."""
    async with open_ui(graph_break_trace, size=(80, 24)) as ui:
        lines = ui.lines("#overview")
        start = next(i for i, ln in enumerate(lines) if "Dynamo compiles" in ln)
        rows: dict[str, list[str]] = {}
        for ln in lines[start + 2:]:
            if not ln.strip() or "recompiled because:" in ln or "graph breaks:" in ln:  # notes
                break
            rows[ln.split()[0]] = ln.split()
        assert {"0/0", "0/0_1"} <= set(rows), rows
        assert rows["0/0"][1] == rows["0/0_1"][1] == "forward", lines[start:start + 9]
        assert rows["0/0"][2] == rows["0/0_1"][2] and rows["0/0"][2].endswith("graph_break.py:34")
        assert rows["0/0"][3] == "restart"
        i = next(i for i, ln in enumerate(lines) if "0/1 recompiled because:" in ln)
        assert all(len(ln) <= 80 for ln in lines[i:i + 3])
        reason = " ".join(ln.strip() for ln in lines[i:i + 2])
        assert "tensor 'x' size mismatch at index 0. expected 4, actual 16" in reason, reason


async def test_a_compile_that_hit_the_recompile_limit_says_so(open_ui, dynamic_trace: Path) -> None:
    """``3/2`` hit the recompile limit: no metrics of its own, so its row took ``–`` and its
    guards ``None``; its reasons (recorded as one JSON list of the frame's failures) showed as
    JSON. It is the frame of ``3/0``, each reason is a line, and why it failed is said; enter on
    its row names its function too."""
    async with open_ui(dynamic_trace, size=(200, 50)) as ui:
        lines = ui.lines("#overview")
        row = next(ln for ln in lines if ln.split()[:1] == ["3/2"]).split()
        first = next(ln for ln in lines if ln.split()[:1] == ["3/0"]).split()
        assert row[1:3] == first[1:3] and row[1] == "limited", row
        # its compile time is two words ("19.4 ms"); its Inductor time is unknown: "—"
        assert "None" not in row and row[4] in ("s", "ms", "µs") and row[5] == "—", row
        reasons = [ln.strip() for ln in lines if ln.strip().startswith("3/2 recompiled because:")]
        assert any("because: 3/1: tensor 'x' size mismatch at index 0" in r for r in reasons)
        assert not any(r.endswith("[") or r.startswith('"') for r in reasons), reasons
        assert any("3/2 failed: Unsupported: Dynamo recompile limit exceeded" in ln
                   for ln in lines), lines
        view = ui.app.screen.query_one("#overview")
        view.move_to(next(i for i, ln in enumerate(lines) if ln.split()[:1] == ["3/2"]))
        await ui.press("enter")
        text = ui.text()
        assert "compile 3/2: limited at" in text and "dynamic_shapes.py:33" in text, text
        assert "failed: Unsupported: Dynamo recompile limit exceeded" in text


def _overview_kernels(ui, graph_id: str) -> str:
    """The overview's kernels column for ``graph_id``, as shown."""
    lines = ui.lines("#overview")
    head = next(i for i, ln in enumerate(lines) if ln.split()[:3] == ["graph", "kind", "status"])
    cols = lines[head].split()
    row = next(ln.split() for ln in lines[head + 1:] if ln.split()[:1] == [graph_id])
    return row[cols.index("kernels") - 1]


async def test_the_overview_and_errors_screen_count_kernels_as_info_does(
        open_ui, accuracy_trace: Path) -> None:
    """The relu bug's graph: 3 generated kernels and 9 extern calls (addmm). The overview's
    kernels column and the errors screen said 12 kernels (meta.json's count of both); they now
    say what info says."""
    from tuidebug.trace.queries.summary import trace_summary

    (g,) = trace_summary(Trace(accuracy_trace))["graphs"]
    assert g["kernels"] and g["extern_calls"], g
    async with open_ui(accuracy_trace, size=(160, 45)) as ui:
        assert _overview_kernels(ui, g["id"]) == str(g["kernels"])
        await ui.press("6")
        text = ui.text()
        assert f"{g['kernels']} kernels, {g['extern_calls']} extern calls" in text, text


@pytest.mark.parametrize("which", ["accuracy", "crashed"])
async def test_the_code_screen_counts_kernels_as_the_overview_does(
        open_ui, which: str, accuracy_trace: Path, crashed_trace: Path) -> None:
    """One count of the kernels Inductor generated (``provenance.generated_kernels``): the
    overview's column, the code screen's title and info agree — also where the kernel index is
    gone and only meta.json's count is left (the crashed copy: the code screen said 0 there,
    the overview 4)."""
    from tuidebug.trace.queries.summary import trace_summary

    path = accuracy_trace if which == "accuracy" else crashed_trace
    (g,) = trace_summary(Trace(path))["graphs"]
    async with open_ui(path, size=(160, 45)) as ui:
        shown = _overview_kernels(ui, g["id"])
        assert shown == str(g["kernels"]) and g["kernels"] > 0, (shown, g)
        await ui.press("4")
        title = str(ui.app.screen.query_one("#kernels-title").content)
        assert title.startswith(f"{g['id']}: {shown} kernels"), title
        if which == "crashed":  # nothing to list: the title says why
            assert "no kernel index" in title, title
        else:
            assert f", {g['extern_calls']} extern calls" in title, title


async def test_the_overview_is_drawn_again_at_a_new_width(open_ui, transformer_trace: Path) -> None:
    """The overview's tables are rendered into lines in a worker (off the UI thread), at the
    view's width; a resize draws them again at the new width, a wrapped line included."""
    async with open_ui(transformer_trace, size=(160, 40)) as ui:
        wide = ui.lines("#overview")
        assert any(len(ln.rstrip()) > 100 for ln in wide), "a line wider than 100 columns"
        await ui.pilot.resize_terminal(100, 40)
        await ui.settle()
        narrow = ui.lines("#overview")
        assert narrow != wide
        view = ui.app.screen.query_one("#overview")
        assert view.size.width == 100
        fits = [ln for ln in wide if len(ln.rstrip()) <= 90]
        assert fits and all(ln in narrow for ln in fits[:5]), "lines that fit stay as they were"
