"""The numerics check's verdicts on screen (the committed ``accuracy`` trace: Inductor's relu bug
``relu → x + 1``, its kernels judged on the mismatch): each judged kernel marked in the code
screen's list, the first diverging one with its errors; its wrong buffer's node and user line in
the provenance; the FX nodes marked on the pass stepper's lowered graph; enter on the overview's
first diverging kernel opens its code with the line that went wrong."""

from __future__ import annotations

from pathlib import Path

from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.numerics import first_divergences, graph_numerics
from tuidebug.tui.messages import ShowNode
from tuidebug.tui.widgets.lists import PickList
from tests.tui.test_painted import pane


def _first(trace: Path):
    (fd,) = first_divergences(Trace(trace))
    return fd


def test_graph_numerics_marks_each_judged_kernel_and_node(accuracy_trace: Path) -> None:
    fd = _first(accuracy_trace)
    judged = graph_numerics(Trace(accuracy_trace), fd.graph)
    assert judged.kernels, "no kernel judged in the accuracy trace"
    first = [k for k in judged.kernels.values() if k.first]
    assert [k.kernel for k in first] == [fd.kernel] and first[0].err_compiled == fd.err_compiled
    assert all(not k.ok for k in judged.kernels.values())  # relu is wrong in every block
    (wrong,) = fd.buffers
    node = judged.nodes[wrong.node]
    assert node.first and not node.ok and node.kernel == fd.kernel
    assert node.source and node.source["code"] == "return x + torch.tanh(h)"
    right = [n for n in judged.nodes.values() if n.ok]
    assert right and not any(n.first for n in right)  # layer norm's mean: right, not flagged
    assert graph_numerics(Trace(accuracy_trace), "no-such-graph").kernels == {}


async def test_the_kernel_list_marks_each_judged_kernel(open_ui, accuracy_trace: Path) -> None:
    fd = _first(accuracy_trace)
    async with open_ui(accuracy_trace, size=(100, 30)) as ui:
        await ui.press("4")
        # at 100 columns the list is narrow: every judged row still shows its mark
        kernels = [ln for ln in pane(ui, "#kernels") if ln.startswith("cpp_")]
        assert len(kernels) == 3 and all("✗" in ln for ln in kernels), kernels
        assert sum("✗ first 0.31 vs 4.4e-08" in ln for ln in kernels) == 1, kernels
        lst = ui.app.screen.query_one(PickList)
        rows = {o.id: o.prompt.plain for o in (lst.get_option_at_index(i)
                                                for i in range(lst.option_count)) if o.id}
        marked = {k: r for k, r in rows.items() if "✗" in r}
        assert len(marked) == 3, rows  # the three generated kernels: all wrong
        assert f"✗ first {fd.err_compiled:.2g} vs {fd.err_eager:.2g}" in rows[fd.kernel], rows
        assert sum("first" in r for r in rows.values()) == 1
        # only the first is known to be wrong: the two after it may carry its error forward
        # (the pane's title, cut at this width; its whole text:)
        title = ui.app.screen.query_one("#kernels-title").content
        assert "3 kernels (✗ first, 2 ✗ after it)" in str(getattr(title, "plain", title)), title
        assert lst.select_id(fd.kernel)
        await ui.settle()
        prov = ui.lines("#provenance")
        assert any(ln.startswith("numerics") and "the first diverging kernel" in ln
                   for ln in prov), prov
        # the cursor on the user line that went wrong: enter opens it
        assert ui.cursor_line("#provenance").startswith("wrong   add_3"), prov
        assert "failing_compile.py:42  return x + torch.tanh(h)" in ui.cursor_line("#provenance")


async def test_enter_on_the_first_diverging_kernel_opens_its_code(open_ui,
                                                                   accuracy_trace: Path) -> None:
    fd = _first(accuracy_trace)
    async with open_ui(accuracy_trace) as ui:
        view = ui.app.screen.query_one("#overview")
        lines = ui.lines("#overview")
        at = next(i for i, ln in enumerate(lines) if "first diverging kernel:" in ln)
        view.move_to(at)
        await ui.press("enter")
        assert ui.app.screen.SCREEN_NAME == "code"
        assert ui.app.screen.selected() == fd.kernel
        assert "failing_compile.py:42" in ui.cursor_line("#provenance")
        assert ui.lines("#code-view"), "the kernel's code is shown"


async def test_the_pass_stepper_marks_the_wrong_nodes(open_ui, accuracy_trace: Path) -> None:
    fd = _first(accuracy_trace)
    (wrong,) = fd.buffers
    async with open_ui(accuracy_trace) as ui:
        ui.app.post_message(ShowNode(fd.graph, wrong.node))
        await ui.settle()
        assert ui.app.screen.SCREEN_NAME == "passes"
        line = ui.cursor_line("#graph-view")
        assert line.lstrip().startswith(wrong.node), line
        assert f"✗ first diverging {wrong.err_compiled:.3g} vs eager {wrong.err_eager:.3g}" \
            in line, line
        detail = ui.app.screen.query_one("#node-detail").render()
        assert str(detail).startswith("numerics  ✗ first diverging"), detail
        marked = [ln for ln in ui.lines("#graph-view") if "✗" in ln]
        assert len(marked) > 1 and sum("first diverging" in ln for ln in marked) == 1, marked
        # an earlier snapshot (before the post-grad passes) carries no mark: its names may
        # stand for other values
        ui.app.screen._select_stage(0)
        await ui.settle()
        assert not any("✗" in ln for ln in ui.lines("#graph-view"))


async def test_the_overview_shows_the_classification(open_ui, accuracy_trace: Path,
                                                     copy_trace) -> None:
    """A trace ``tuidebug numerics`` classified (numerics.json, from the real classification of
    the relu bug): the overview shows the verdict under the first diverging kernel, as info."""
    from tuidebug.trace.format.writer import write_numerics
    from tuidebug.trace.queries.numerics_classes import CONTROL, classify

    t = copy_trace(accuracy_trace, "classified")
    (c,) = classify(Trace(t), {CONTROL: Trace(accuracy_trace)})  # reproduced: the same again
    write_numerics(t, {"compiles": [c.to_json()]})
    async with open_ui(t) as ui:
        lines = [ln.strip() for ln in ui.lines("#overview")]
    first = next(i for i, ln in enumerate(lines) if ln.startswith("first diverging kernel:"))
    said = next(i for i, ln in enumerate(lines) if ln.startswith("classified: "))
    assert first < said and lines[said].startswith("classified: a wrong kernel — "), lines
    control = next(i for i, ln in enumerate(lines) if ln.startswith("control ("))
    assert lines[control].startswith("control (same settings): stays: "), lines[control]
    random = lines.index("fallback_random=True: not run: its graph draws no random numbers")
    assert said < control < random, lines
