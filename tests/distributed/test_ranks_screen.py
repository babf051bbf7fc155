"""The ranks screen of the TUI on a real 4-rank job (rank 1's graph differs): the table, the
first divergence highlighted, the diff of two ranks, and switching rank on the same screen."""

from __future__ import annotations

from tuidebug.tui.screens.ranks import DIVERGING, REFERENCE


async def test_ranks_screen_shows_the_job_and_switches_rank(open_ui, graph_job) -> None:
    from textual.widgets import DataTable

    job, _ = graph_job
    async with open_ui(job / "rank_0", job=job.resolve(), start="ranks") as ui:
        app = ui.app
        assert await ui.wait_for(lambda: app.screen.query_one(DataTable).row_count == 4, 60)
        await ui.settle()
        screen = ui.text()
        assert "ranks of" in screen and "open: rank 0" in screen
        assert "first divergence: graph 0_0-inference first differs at stage dynamo" in screen
        assert "- y:" in screen and "+ y:" in screen
        table = app.screen.query_one(DataTable)
        col = [str(c.label) for c in table.columns.values()].index("0/0")
        cell = {r: table.get_row_at(i)[col] for i, r in enumerate((0, 1, 2, 3))}
        assert cell[1].style == DIVERGING and cell[0].style == REFERENCE == cell[2].style
        assert cell[0].plain == cell[2].plain == cell[3].plain != cell[1].plain
        # enter on rank 1: the compare screen diffs rank 0 against rank 1
        await ui.press("down", "enter")
        assert app.current_mode == "compare"
        assert app.compare_with == job.resolve() / "rank_1"
        assert await ui.wait_for(lambda: any(
            "rank_1" in ln for ln in ui.lines("#compare-view")), 60)
        # R: back to the ranks screen; o on rank 2 opens it on the compare screen
        await ui.press("R")
        assert app.current_mode == "ranks"
        await ui.press("down", "o")
        assert await ui.wait_for(lambda: app.trace.root.name == "rank_2", 30)
        await ui.settle()
        assert app.current_mode == "compare"
        assert app.current_graph is not None and app.current_graph.id == "0_0-inference"
        await ui.press("R")
        assert "open: rank 2" in ui.text()


async def test_the_open_rank_is_known_when_the_job_was_opened_by_a_relative_path(
        open_ui, graph_job, monkeypatch) -> None:
    """``tuidebug open DIR`` from DIR's folder: the open rank is rank 0 (it was none: enter on
    rank 0's row diffed rank 0 against itself)."""
    from pathlib import Path

    from textual.widgets import DataTable

    job, _ = graph_job
    monkeypatch.chdir(job.parent)
    async with open_ui(Path(job.name) / "rank_0", job=job.resolve(), start="ranks") as ui:
        app = ui.app
        assert await ui.wait_for(lambda: app.screen.query_one(DataTable).row_count == 4, 60)
        await ui.settle()
        assert "open: rank 0" in ui.text()
        await ui.press("enter")  # on rank 0's own row: against the other side of the divergence
        assert app.current_mode == "compare" and app.compare_with == job.resolve() / "rank_1"


def _ranks_tab_highlighted(app) -> bool | None:
    """Whether the title bar paints the ranks tab highlighted (None: no ranks tab)."""
    strip = app.screen._compositor.render_strips()[0]
    for seg in strip:
        if "R Ranks" in seg.text:
            return bool(seg.style and seg.style.reverse)
    return None


async def test_ranks_screen_is_a_tab_and_says_what_its_cells_are(open_ui, graph_job) -> None:
    """A new user on the ranks screen: the title bar names the job and the rank (not the folder
    ``rank_0``) and shows the ranks screen as a tab, highlighted, also on a 120-column terminal;
    the table says what its hash cells mean."""
    from textual.widgets import DataTable

    job, _ = graph_job
    for size in ((200, 50), (120, 40)):
        async with open_ui(job / "rank_0", size, job=job.resolve(), start="ranks") as ui:
            app = ui.app
            assert await ui.wait_for(lambda: app.screen.query_one(DataTable).row_count == 4, 60)
            await ui.settle()
            title = ui.text().splitlines()[0]
            assert "rank 0" in title and "rank_0" not in title, title
            if size[0] >= 200:
                assert f"{job.name} rank 0" in title, title
            assert _ranks_tab_highlighted(app) is True, title
            assert "–: not compiled on that rank" in " ".join(ui.text().split())
            await ui.press("1")  # another screen: the ranks tab is still there, not highlighted
            assert _ranks_tab_highlighted(app) is False, ui.text().splitlines()[0]


async def test_compile_ids_from_the_ranks_are_shown_inert(open_ui, graph_job, tmp_path) -> None:
    """A compile id (a rank manifest's string) is a column of the table: shown as written, its
    markup not interpreted and its control characters visible."""
    import json
    import shutil

    from textual.widgets import DataTable

    src, _ = graph_job
    job = tmp_path / "job"
    shutil.copytree(src, job, ignore=shutil.ignore_patterns("*.log"))
    hostile = "[b]0/0[/b]\x1b[2J"
    for r in range(4):
        path = job / f"rank_{r}" / "manifest.json"
        m = json.loads(path.read_text())
        for c in m["compiles"]:
            c["id"] = hostile if c["id"] == "0/0" else c["id"]
        path.write_text(json.dumps(m))
    async with open_ui(job / "rank_0", job=job.resolve(), start="ranks", size=(200, 40)) as ui:
        app = ui.app
        assert await ui.wait_for(lambda: app.screen.query_one(DataTable).row_count == 4, 60)
        await ui.settle()
        labels = [c.label for c in app.screen.query_one(DataTable).columns.values()]
        assert any("[b]0/0[/b]" in lab.plain for lab in labels), [lab.plain for lab in labels]
        assert not any("\x1b" in lab.plain for lab in labels)
        assert "[b]0/0[/b]" in ui.text()


def test_a_rank_folder_that_is_a_link_out_of_the_job_is_not_opened(graph_job, tmp_path) -> None:
    """rank_1/ a link to a trace outside the job: info --rank 1 and open --rank 1 refuse it, as
    the cross-rank analysis already did (a path out of the job folder is never followed)."""
    import shutil

    from tests.distributed.test_ranks import _cli

    src, _ = graph_job
    job = tmp_path / "job"
    shutil.copytree(src, job, ignore=shutil.ignore_patterns("*.log"))
    outside = tmp_path / "outside"
    shutil.move(str(job / "rank_1"), outside)
    (job / "rank_1").symlink_to(outside, target_is_directory=True)
    for cmd in (["info", "--rank", "1", str(job)], ["open", "--rank", "1", str(job)]):
        p = _cli(*cmd)
        assert p.returncode == 2 and "without a trace of rank 1" in p.stderr, (cmd, p.stderr)
    assert _cli("info", "--rank", "2", str(job)).returncode == 0
