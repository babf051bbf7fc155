"""The ranks screen on a job of many compiles (a torch.compile(DDP(GPT-2)) job compiles 27 times
per rank): the first divergence, a recompile listed after every compile of the reference rank,
is scrolled into view, beside the rank, status and group columns that stay in view. It was
27 columns to the right of a 140-column terminal: no red cell in sight under a 'first
divergence: compile 0/1' line. A job written with the torch-free writer."""

from __future__ import annotations

from pathlib import Path

from tests.trace.test_rank_reasons import DDP_BREAK, ITEM_BREAK, _rank


async def test_the_diverging_compile_is_scrolled_into_view(open_ui, tmp_path: Path) -> None:
    from textual.widgets import DataTable

    from tuidebug.tui.screens.ranks import DIVERGING

    job = tmp_path / "job"
    frames = {f"{i}/0": [DDP_BREAK] for i in range(30)}
    _rank(job, 0, frames)
    _rank(job, 1, {**frames, "0/1": [ITEM_BREAK]})
    async with open_ui(job / "rank_0", (140, 40), job=job.resolve(), start="ranks") as ui:
        app = ui.app
        assert await ui.wait_for(lambda: app.screen.query_one(DataTable).row_count == 2, 60)
        await ui.settle()
        table = app.screen.query_one(DataTable)
        labels = [str(c.label) for c in table.ordered_columns]
        assert labels[:3] == ["rank", "status", "group"] and labels[-1] == "0/1", labels
        assert table.get_row_at(1)[len(labels) - 1].style == DIVERGING
        header = next(ln for ln in ui.text().splitlines() if "rank" in ln and "status" in ln)
        assert header.split()[:3] == ["rank", "status", "group"], header
        assert header.split()[-1] == "0/1", header  # in view, at the right edge
