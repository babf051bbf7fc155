"""``tuidebug serve JOBDIR``: a distributed job in the browser, on its ranks screen, as
``tuidebug open JOBDIR`` shows it (serve refused it: "not a tuidebug trace (no manifest.json)")."""

from __future__ import annotations

from typing import Any

from tests.tui.test_serve import HOOK, browser, serve, wait_for  # noqa: F401  (fixtures)


def test_a_job_is_served_on_its_ranks_screen(browser: Any, serve: Any, graph_job) -> None:  # noqa: F811
    job, _ = graph_job
    server = serve(str(job), "--rank", "2")
    page = browser.new_page(viewport={"width": 1400, "height": 800})
    page.add_init_script(HOOK)
    page.goto(server.url)
    wait_for(page, r"ranks of .*open: rank 2", "first divergence", "R Ranks")
    page.click(".xterm-screen")
    page.keyboard.press("1")  # a screen of the open rank: its overview
    wait_for(page, r"compiled graphs", f"{job.name} rank 2")
    page.close()
