"""Recompile faults driven through the TUI with Pilot: the worker killed under a job, a job that
hangs (killed at the app's timeout, or cancelled with ``x``). Each must be reported on screen,
leave the UI working and the open trace byte-identical. Real worker, real compiles, no mocks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import pythonpath
from tests.faults.conftest import Case
from tests.tui.pilot import UI, digest
from tuidebug.compiler.worker import RecompileJob
from tuidebug.tui.screens.consent import ConfirmScreen

HANG_ENV = "TUIDEBUG_TEST_HANG_MARKER"
HANGING = "compiled; now hanging"

# Compiles and runs a tiny function; then, only while the file named by $TUIDEBUG_TEST_HANG_MARKER
# exists, hangs for an hour. Traced without the marker; recompiled (in the worker) with it.
HANG_SCRIPT = f"""
import os
import time

import torch

def f(x):
    return (x * 2).relu() + 1

print(torch.compile(f)(torch.randn(8)).sum().item())
if os.path.exists(os.environ.get({HANG_ENV!r}, "")):
    print({HANGING!r}, flush=True)
    time.sleep(3600)
"""


@pytest.fixture(scope="module")
def hang_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real trace of HANG_SCRIPT (which stays where the trace's command points)."""
    root = tmp_path_factory.mktemp("hang")
    script = root / "hang_model.py"
    script.write_text(textwrap.dedent(HANG_SCRIPT))
    out = root / "trace"
    env = {k: v for k, v in os.environ.items() if k != HANG_ENV}
    env["PYTHONPATH"] = pythonpath()
    proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", "trace", "-o", str(out),
                           str(script)], env=env, capture_output=True, text=True, timeout=600)
    if not (out / "manifest.json").exists() or proc.returncode != 0:
        raise RuntimeError(f"tracing {script} failed (rc={proc.returncode}):\n"
                           f"{proc.stdout}\n{proc.stderr}")
    return out


def _running(pid: int | None) -> bool:
    """The process exists and is not a zombie (an orphan's zombie may never be reaped here)."""
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def _set_flag(ui: UI, name: str, value: str) -> None:
    """On the flags screen (7): filter to ``name``, select it, ``s``, type ``value``, enter."""
    await ui.press("7")
    assert ui.app.current_mode == "flags"
    assert await ui.wait_for(lambda: ui.app.screen.registry is not None, 60)
    ui.app.screen.action_focus_filter()
    await ui.pilot.press(*name)
    await ui.press("enter")
    ui.app.screen.query_one("#flag-list").select_id(name)
    await ui.press("s")
    ui.app.screen.query_one("#input-value").value = value
    await ui.press("enter")
    assert name in ui.app.pending_flags, ui.text()


async def _recompile(ui: UI, until: str = "running", timeout: float = 300) -> RecompileJob:
    """Press ``r`` on the flags screen; wait until the new job is ``running`` (or ``done``)."""
    assert ui.app.current_mode == "flags"
    before = ui.app.recompile_job
    await ui.pilot.press("r")
    assert await ui.wait_for(lambda: isinstance(ui.app.screen, ConfirmScreen), 30)
    await ui.pilot.press("y")  # what will run was shown; the user agrees
    assert await ui.wait_for(lambda: ui.app.recompile_job is not before, 30), ui.notifications()
    job = ui.app.recompile_job
    if until == "running":
        ok = await ui.wait_for(lambda: job.state != "queued", timeout, poll=0.02)
        assert ok and job.state == "running", (job.summary(), ui.app.recompile_worker.log_tail())
    else:
        assert await ui.wait_for(lambda: job.done, timeout), job.summary()
    return job


async def _still_responds(ui: UI, job: RecompileJob) -> None:
    """Keys still switch screens, and each screen paints its content."""
    g = ui.app.current_graph
    assert g is not None
    await ui.press("1")
    assert ui.app.current_mode == "overview"
    assert g.id in ui.text() and "time per compile phase" in "\n".join(ui.lines("#overview"))
    await ui.press("2")
    assert ui.app.current_mode == "passes"
    assert f"{g.id}: {len(g.stages)} stages" in ui.text()
    await ui.press("7")
    assert ui.app.current_mode == "flags"
    text = ui.text()
    assert "size_asserts" in text
    assert job.summary()[:30] in text, text  # the status line says how the job ended


def _reported(ui: UI, state: str) -> None:
    """An error notification about the job is on screen (a toast titled ``recompile STATE``)."""
    notes = [n for n in ui.app._notifications if n.title == f"recompile {state}"]
    assert notes and notes[-1].severity == "error", ui.notifications()
    assert f"recompile {state}" in ui.text(), ui.text()


@pytest.mark.slow  # recompiles
async def test_worker_killed_mid_recompile_is_reported_in_the_tui(
        open_ui, mlp_trace: Path, copy_trace, case: Case) -> None:
    src = copy_trace(mlp_trace, "mlp")
    before = digest(src)
    async with open_ui(src, notifications=True) as ui:
        await _set_flag(ui, "size_asserts", "false")
        job = await _recompile(ui, "running")
        # poll often: the worker must die while Dynamo/Inductor work, not after the job is done
        assert await ui.wait_for(lambda: job.done or job.phase not in (None, "starting"), 120,
                                 poll=0.02), job.summary()
        assert not job.done, job.summary()
        worker = ui.app.recompile_worker
        first_pid = worker.pid
        os.kill(first_pid, signal.SIGKILL)  # the worker dies while it compiles

        assert await ui.wait_for(lambda: job.done, 60), job.summary()
        assert job.state == "crashed", job.summary()
        assert "worker process died" in job.error
        assert await ui.wait_for(lambda: not _running(job.pid), 10), "the job's process lives on"
        await ui.settle()
        _reported(ui, "crashed")
        assert ui.app.current_mode == "flags"  # a crash does not switch to the compare screen
        await _still_responds(ui, job)
        case.data_lost = digest(src) != before
        assert not case.data_lost, "the open trace was modified"

        # the worker was restarted: the same recompile now goes through
        again = await _recompile(ui, "done", 600)
        assert again.state == "ok", (again.summary(), worker.log_tail())
        assert worker.pid != first_pid and worker.restarts == 1
        assert await ui.wait_for(lambda: ui.app.current_mode == "compare", 60)
        case.survived = True
    case.data_lost = digest(src) != before
    assert not case.data_lost


@pytest.fixture
def hanging(hang_trace: Path, copy_trace, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, str]]:
    """A copy of the hang trace whose recompile will hang, and its digest before."""
    src = copy_trace(hang_trace, "hang")
    marker = tmp_path / "hang.marker"
    marker.touch()
    monkeypatch.setenv(HANG_ENV, str(marker))  # before the app starts its worker: jobs inherit it
    return src, digest(src)


async def test_hanging_recompile_hits_the_timeout_in_the_tui(
        open_ui, hanging: tuple[Path, dict[str, str]], case: Case) -> None:
    src, before = hanging
    async with open_ui(src, notifications=True, recompile_timeout=20) as ui:
        await _set_flag(ui, "size_asserts", "false")
        job = await _recompile(ui, "done", 300)
        assert job.state == "timeout", job.summary()
        assert HANGING in job.output, list(job.output)  # killed in the hang, not while compiling
        assert "timed out after 20s" in job.error
        assert not _running(job.pid), "the hung job's process is still running"
        await ui.settle()
        _reported(ui, "timeout")
        await _still_responds(ui, job)
        case.survived = True
    case.data_lost = digest(src) != before
    assert not case.data_lost, "the open trace was modified"


async def test_hanging_recompile_is_cancelled_with_x(
        open_ui, hanging: tuple[Path, dict[str, str]], case: Case) -> None:
    src, before = hanging
    # the default timeout (600 s): only x can end this job
    async with open_ui(src, notifications=True) as ui:
        await _set_flag(ui, "size_asserts", "false")
        job = await _recompile(ui, "running")
        assert await ui.wait_for(lambda: HANGING in job.output or job.done, 120), job.summary()
        assert not job.done, job.summary()
        await ui.press("x")
        assert await ui.wait_for(lambda: job.done, 30), job.summary()
        assert job.state == "cancelled", job.summary()
        assert await ui.wait_for(lambda: not _running(job.pid), 10), "the job's process lives on"
        await ui.settle()
        _reported(ui, "cancelled")
        await _still_responds(ui, job)
        case.survived = True
    case.data_lost = digest(src) != before
    assert not case.data_lost, "the open trace was modified"
