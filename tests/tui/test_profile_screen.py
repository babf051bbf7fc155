"""The profile screen on the shared profiled trace: rows by time, compiled next to eager, the
four tables, enter jumping to the kernel's code or the FX node; a trace without a profile."""

from __future__ import annotations

import re

from pathlib import Path

from tuidebug.trace.queries.profile import profile_view
from tuidebug.trace.format.reader import Trace
from tuidebug.tui.keymap import SCREENS, screen_key
from tuidebug.viewers.profile_view import duration

KEY = screen_key(SCREENS.index("profile"))


async def test_kernels_lines_and_modules_by_time(open_ui, profiled_trace: Path) -> None:
    view = profile_view(Trace(profiled_trace))
    assert view is not None
    async with open_ui(profiled_trace) as ui:
        await ui.press(KEY)
        assert ui.app.current_mode == "profile"
        text = ui.text()
        assert "where the time goes (3 runs on cpu)" in text
        # the totals wrap, not cut at the pane's edge: their last words are on screen
        words = " ".join(text.split())
        assert "are in the whole call's verdict above" in words
        # the whole call's verdict heads the pane (the first words of its headline)
        assert view.calls, "the profiled trace measured no whole call"
        assert " ".join(view.calls[0].text.split()[:3]) in words
        assert re.search(r"Python/launch/other \d+%", words), words[:600]
        assert f"kernel calls ({len(view.kernels)}) by time" in text
        painted = [ln for ln in text.splitlines()]
        top = view.kernels[0]
        row = next(ln for ln in painted if top.key in ln)
        assert duration(top.compiled_s) in row and top.kind in row
        # rows in the order of their time
        order = [next(i for i, ln in enumerate(painted) if r.key in ln) for r in view.kernels]
        assert order == sorted(order)
        await ui.press("t", "t")  # nodes, then lines: compiled | eager
        text = ui.text()
        assert f"source lines ({len(view.lines)}) by time: compiled | eager" in text
        first = view.lines[0]
        row = next(ln for ln in text.splitlines() if f"mlp.py:{first.line}" in ln)
        assert duration(first.compiled_s) in row and duration(first.eager_s) in row
        await ui.press("t")
        assert f"modules ({len(view.modules)})" in ui.text()
        assert any(ln.strip().startswith("fc1 ") for ln in ui.text().splitlines())


async def test_enter_jumps_to_the_kernel_or_the_node(open_ui, profiled_trace: Path) -> None:
    view = profile_view(Trace(profiled_trace))
    assert view is not None
    async with open_ui(profiled_trace) as ui:
        await ui.press(KEY, "enter")  # the top kernel call
        assert ui.app.current_mode == "code"
        assert view.kernels[0].kernel in ui.text()
        await ui.press(KEY, "t", "enter")  # the top FX node: the pass stepper on it
        assert ui.app.current_mode == "passes"
        node = next(r for r in view.nodes if r.node)
        assert node.node in ui.text()


async def test_a_trace_without_a_profile_says_how_to_get_one(open_ui, mlp_trace: Path) -> None:
    async with open_ui(mlp_trace) as ui:
        await ui.press(KEY)
        text = ui.text()
        assert "This trace was not profiled." in text
        assert "tuidebug trace --profile 10 SCRIPT" in text
        assert f" {KEY} Prof" in text or f" {KEY} Profile" in text


async def test_backward_rows_have_their_phase(open_ui, profiled_training_trace: Path) -> None:
    view = profile_view(Trace(profiled_training_trace))
    assert view is not None
    async with open_ui(profiled_training_trace) as ui:
        await ui.press(KEY)
        text = ui.text()
        assert "backward: compiled" in text
        assert f"kernel calls ({len(view.kernels)}) by time: phase | compiled" in text
        painted = text.splitlines()
        shown = [r for r in view.kernels if len(r.key) <= 40]  # names no pane cuts
        for r in shown[:5]:  # the top rows, forward and backward, each with its phase
            row = next(ln for ln in painted if r.key in ln.split())
            assert duration(r.compiled_s) in row and f" {r.phase} " in row
        bwd = next(r for r in shown if r.phase == "bwd")
        assert any(bwd.key in ln.split() and " bwd " in ln for ln in painted)
        await ui.press("t", "t")  # source lines: a line of the backward, compiled | eager
        painted = ui.text().splitlines()
        line = next(r for r in view.lines if r.phase == "bwd" and r.line)
        row = next(ln for ln in painted if f"transformer_block.py:{line.line}" in ln
                   and " bwd " in ln)
        assert duration(line.compiled_s) in row and duration(line.eager_s) in row


def test_a_name_longer_than_the_column_is_cut_so_the_columns_line_up() -> None:
    """Names are padded to the longest, at most 72 columns; a longer one (a backward kernel of
    a conv+BatchNorm training step, 103 characters) was not cut, and pushed its row's phase,
    kind and time right of every other row's."""
    from rich.console import Console

    from tuidebug.trace.queries.profile import Row
    from tuidebug.tui.screens.profile import row_prompt

    long = ("cpp_fused_add_convolution_backward_div_expand_native_batch_norm_backward_"
            "threshold_backward_unsqueeze_1")
    rows = [Row(key=long, compiled_s=47.4e-6, kind="cpp", phase="bwd"),
            Row(key="extern_kernels.mm:1", compiled_s=44.1e-6, kind="extern", phase="bwd")]
    console = Console(width=200, color_system=None)
    painted = []
    for r in rows:
        with console.capture() as cap:
            console.print(row_prompt("kernels", r, 72, phased=True))
        painted.append(cap.get().rstrip("\n"))
    assert len({ln.index(" bwd ") for ln in painted}) == 1, painted
    assert painted[0].startswith(long[:40]) and painted[0].split()[0].endswith("unsqueeze_1"), \
        painted  # cut in the middle: a kernel name differs at its end


def test_a_whole_call_not_measured_says_why_on_the_profile_screen() -> None:
    """``info`` printed "whole call of Qwen2ForCausalLM not measured: past_key_values
    (StaticCache) …" among its notes; the profile screen showed the graphs' totals with no word
    of the whole call."""
    from tuidebug.trace.queries.profile import ProfileView
    from tuidebug.viewers.profile_view import whole_text

    view = ProfileView(compiles=["0/0"], notes=[
        "whole call of Qwen2ForCausalLM not measured: past_key_values (StaticCache) holds "
        "tensors the call may change in place or replace"])
    text = whole_text(view).plain
    assert "whole call of Qwen2ForCausalLM not measured: past_key_values" in text, text
    assert "verdict above" not in text and "are not in them (no whole call measured)" in text


def test_kernels_of_two_compiles_say_their_graph() -> None:
    """A rank that recompiled (``torch.compile(DDP(GPT-2))``, rank 1 fed a longer batch):
    its kernel table held ``extern_kernels.addmm:4`` twice, 177 µs and 56.9 µs, with nothing to
    tell the two compiles' calls apart (``info`` gives them a graph column)."""
    from rich.console import Console

    from tuidebug.trace.queries.profile import Row
    from tuidebug.tui.screens.profile import row_name, row_prompt
    from tuidebug.viewers.profile_view import several_compiles

    rows = [Row(key="extern_kernels.addmm:4", compiled_s=177e-6, kind="extern",
                graph="6_0_1-forward"),
            Row(key="extern_kernels.addmm:4", compiled_s=56.9e-6, kind="extern",
                graph="6_1_1-forward")]
    graphs = several_compiles(r.graph for r in rows)
    assert graphs and not several_compiles(["0_0-forward", "0_0-backward"])
    names = [row_name("kernels", r, graphs) for r in rows]
    assert names == ["6_0_1-forward extern_kernels.addmm:4",
                     "6_1_1-forward extern_kernels.addmm:4"], names
    console = Console(width=200, color_system=None)
    with console.capture() as cap:
        console.print(row_prompt("kernels", rows[1], 40, graphs=graphs))
    assert cap.get().startswith("6_1_1-forward extern_kernels.addmm:4"), cap.get()
