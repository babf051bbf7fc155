"""The one door (``tuidebug.trace.open``): every command takes every form of input — a trace
folder, a ``tuidebug pack`` archive, a TORCH_TRACE log, a job folder with a rank — and says
clearly what it cannot open.

The fast tests read traces the real compiler wrote once (``tests/fixtures/cuda_*``) and archives
packed from them; the slow ones use session fixtures that run the compiler."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.conftest import ROOT, pythonpath
from tuidebug.errors import TraceError, UnpackError
from tuidebug.trace.open import open_input, trace_dir
from tuidebug.trace.archive.pack import pack

FIXTURES = ROOT / "tests" / "fixtures"
REFUSED = "there is no terminal to ask on"


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``tuidebug ARGS`` in a child process, with no terminal (stdin is /dev/null)."""
    e = dict(os.environ, PYTHONPATH=pythonpath(), **(env or {}))
    return subprocess.run([sys.executable, "-m", "tuidebug.cli", *args], cwd=cwd, env=e,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)


def errors(p: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in p.stderr.splitlines() if line.startswith("tuidebug: error:")]


@pytest.fixture
def archive_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Archives unpack into this test's own cache (in this process and in CLI children)."""
    env = {"TUIDEBUG_ARCHIVE_CACHE": str(tmp_path / "archive-cache")}
    monkeypatch.setenv("TUIDEBUG_ARCHIVE_CACHE", env["TUIDEBUG_ARCHIVE_CACHE"])
    return env


def packed(src: Path, tmp_path: Path) -> Path:
    """A copy of trace ``src`` packed as ``tuidebug pack`` packs it."""
    out = tmp_path / f"{src.name}.tar.gz"
    pack(src, out)
    return out


# -- the door itself --------------------------------------------------------------------------------

def test_each_form_becomes_a_trace(tmp_path: Path, archive_cache: dict[str, str]) -> None:
    src = FIXTURES / "cuda_mlp_autotune"
    folder = open_input(src)
    assert (folder.kind, folder.trace, folder.job) == ("trace", src, None)
    archived = open_input(packed(src, tmp_path))
    assert archived.kind == "archive" and archived.job is None and archived.trace is not None
    assert archived.trace.is_relative_to(tmp_path / "archive-cache")
    assert (archived.trace / "manifest.json").read_bytes() == (src / "manifest.json").read_bytes()


def test_what_is_no_trace_is_said_clearly(tmp_path: Path, archive_cache: dict[str, str]) -> None:
    with pytest.raises(TraceError, match="no such file or directory"):
        open_input(tmp_path / "nothing-here")
    (tmp_path / "notes.txt").write_text("not a trace\n")
    with pytest.raises(TraceError, match=r"notes.txt is not a trace: expected a trace folder, "
                                         r"a \.tar\.gz"):
        open_input(tmp_path / "notes.txt")
    (tmp_path / "bad.tar.gz").write_bytes(b"\x1f\x8b" + b"\x00" * 64)  # gzip's magic, no gzip
    with pytest.raises(UnpackError, match="not a readable .tar.gz"):
        open_input(tmp_path / "bad.tar.gz")


@pytest.fixture
def job(tmp_path: Path) -> Path:
    """A job folder (rank_0/, rank_1/ and their records) as a real 2-rank NCCL job wrote it."""
    with tarfile.open(FIXTURES / "nccl_fsdp2_job.tgz") as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    found = [p.parent for p in (tmp_path / "unpacked").rglob("job.json")]
    assert len(found) == 1
    return found[0]


def test_a_job_opens_at_a_rank(job: Path) -> None:
    whole = open_input(job)  # no rank named: the lowest rank's trace, the job beside it
    assert (whole.kind, whole.job, whole.rank, whole.trace) == ("job", job, 0, job / "rank_0")
    one = open_input(job, 1)
    assert (one.kind, one.job, one.rank, one.trace) == ("job", job, 1, job / "rank_1")
    notes: list[str] = []
    assert trace_dir(job, on_note=notes.append) == job / "rank_0"
    assert notes == [f"{job} is a distributed job: the trace of rank 0 is read"]
    with pytest.raises(TraceError, match="a job directory without a trace of rank 7"):
        open_input(job, 7)


# -- every command through it -----------------------------------------------------------------------

def test_svg_diff_perfetto_on_an_archive(tmp_path: Path, archive_cache: dict[str, str]) -> None:
    src = FIXTURES / "cuda_mlp_autotune"
    archive = packed(src, tmp_path)
    p = cli("svg", str(archive), "-o", "g.svg", cwd=tmp_path, env=archive_cache)
    assert p.returncode == 0, p.stderr  # was: "not a trace directory"
    assert f"[tuidebug] unpacked {archive} → " in p.stderr
    assert (tmp_path / "g.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    p = cli("diff", "--json", str(archive), str(src), cwd=tmp_path, env=archive_cache)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    changes = d["summary"]["kernel_changes"]
    assert changes["changed"] == 0 and changes["unchanged"] == d["summary"]["kernels"]["a"] > 0
    p = cli("perfetto", str(archive), "-o", "p.json", cwd=tmp_path, env=archive_cache)
    assert p.returncode == 0, p.stderr
    assert json.loads((tmp_path / "p.json").read_text())["traceEvents"]


def test_minify_and_bisect_on_an_archive_stop_at_the_consent(
        tmp_path: Path, archive_cache: dict[str, str]) -> None:
    archive = packed(FIXTURES / "cuda_fail_runtime", tmp_path)
    for command in ("minify", "bisect"):
        p = cli(command, str(archive), cwd=tmp_path, env=archive_cache)
        assert p.returncode == 2, p.stderr
        assert f"[tuidebug] unpacked {archive} → " in p.stderr
        (line,) = errors(p)
        assert REFUSED in line and f"pass --yes to {command}" in line
        assert not (tmp_path / "repro.py").exists()


def test_svg_and_info_on_a_job_and_its_ranks(job: Path, tmp_path: Path) -> None:
    p = cli("svg", str(job), "--rank", "1", "-o", "r1.svg", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "r1.svg").stat().st_size > 0
    p = cli("svg", str(job), "-o", "r0.svg", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert f"{job} is a distributed job: the trace of rank 0 is read" in p.stderr
    p = cli("info", str(job), "--rank", "5", cwd=tmp_path)
    assert p.returncode == 2
    assert errors(p) == [f"tuidebug: error: {job} is a job directory without a trace of rank 5"]
    p = cli("pack", str(job), cwd=tmp_path)
    assert p.returncode == 2 and "choose a rank with --rank N" in errors(p)[0]


def test_an_archive_of_no_trace_is_one_clear_line(tmp_path: Path,
                                                  archive_cache: dict[str, str]) -> None:
    """A .tgz of a job folder (not a `tuidebug pack` archive; its ranks share files by hard
    links): refused with why, by every command alike."""
    for command in ("svg", "info", "diff"):
        args = [str(FIXTURES / "nccl_fsdp2_job.tgz")] * (2 if command == "diff" else 1)
        p = cli(command, *args, cwd=tmp_path, env=archive_cache)
        assert p.returncode == 2, p.stderr
        (line,) = errors(p)
        assert "link in archive" in line and "(a packed trace has none)" in line, line


async def test_the_tui_compares_with_an_archive(open_ui, tmp_path: Path,
                                               archive_cache: dict[str, str]) -> None:
    """C (compare with…) takes what the commands take: here a packed trace, unpacked once."""
    from tuidebug.tui.screens.modals import InputScreen

    src = FIXTURES / "cuda_mlp_autotune"
    archive = packed(src, tmp_path)
    async with open_ui(src, notifications=True) as ui:
        await ui.press("C")
        assert isinstance(ui.app.screen, InputScreen)
        ui.app.screen.query_one("#input-value").value = str(tmp_path / "nothing-here")
        await ui.press("enter")
        assert isinstance(ui.app.screen, InputScreen)  # refused at the prompt
        assert "no such file or directory" in ui.text()
        ui.app.screen.query_one("#input-value").value = str(archive)
        await ui.press("enter")
        assert await ui.wait_for(lambda: ui.app.current_mode == "compare", timeout=60)
        assert ui.app.compare_with is not None
        assert ui.app.compare_with.is_relative_to((tmp_path / "archive-cache").resolve())
        assert any(f"unpacked {archive}" in n for n in ui.notifications())


# -- with the real compiler ---------------------------------------------------------------------------

@pytest.mark.slow
def test_recompile_an_archive_stops_at_the_consent_beside_it(
        mlp_trace: Path, tmp_path: Path, archive_cache: dict[str, str]) -> None:
    archive = packed(mlp_trace, tmp_path)
    p = cli("recompile", str(archive), "--set", "max_fusion_size=1", cwd=tmp_path,
            env=archive_cache)
    assert p.returncode == 2, p.stderr
    (line,) = errors(p)
    assert REFUSED in line and "pass --yes to recompile" in line
    assert "mlp.py" in p.stderr  # the plan: the traced script, as the archived manifest says
    assert not list(tmp_path.glob("*max_fusion_size*"))  # nothing ran, nothing written


@pytest.mark.slow
def test_svg_diff_on_a_torch_trace_log(torch_trace_logs: dict[str, Path], tmp_path: Path) -> None:
    log = copied_log(torch_trace_logs["mlp"], tmp_path)
    p = cli("svg", str(log), "-o", "log.svg", cwd=tmp_path)
    assert p.returncode == 0, p.stderr  # was: "not a trace directory"
    assert f"[tuidebug] imported {log} → " in p.stderr
    assert (tmp_path / "log.svg").stat().st_size > 0
    p = cli("diff", "--json", str(log), str(log), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    changes = d["summary"]["kernel_changes"]
    assert changes["changed"] == 0 and changes["unchanged"] == d["summary"]["kernels"]["a"] > 0


@pytest.mark.slow
def test_minify_and_recompile_on_a_torch_trace_log(torch_trace_logs: dict[str, Path],
                                                  tmp_path: Path) -> None:
    log = copied_log(torch_trace_logs["failing"], tmp_path)
    p = cli("minify", str(log), cwd=tmp_path)
    assert f"[tuidebug] imported {log} → " in p.stderr
    assert p.returncode == 2, p.stderr
    (line,) = errors(p)
    assert REFUSED in line and "pass --yes to minify" in line
    log = copied_log(torch_trace_logs["mlp"], tmp_path)
    p = cli("recompile", str(log), "--set", "max_fusion_size=1", cwd=tmp_path)
    assert p.returncode == 2
    (line,) = errors(p)
    assert "was imported from a TORCH_TRACE log, which does not record the script" in line


def copied_log(src: Path, tmp_path: Path) -> Path:
    """The logs of ``src`` in a folder of this test's own (the import is made beside it)."""
    dst = tmp_path / f"{src.name}-log"
    dst.mkdir()
    for f in src.iterdir():
        if f.is_file():
            shutil.copy2(f, dst / f.name)
    return dst


def test_a_rank_folder_named_itself_knows_its_job(tmp_path: Path) -> None:
    """``tuidebug trace --nproc-per-node`` prints each rank's folder (``rank 1: ok →
    JOB/rank_1``); opened by that path, the TUI showed the rank as a lone trace, titled
    ``rank_1``, with no ranks screen. ``job_of`` finds its job; a trace elsewhere has none."""
    from tests.trace.test_rank_reasons import DDP_BREAK, _rank
    from tuidebug.trace.open import job_of

    job = tmp_path / "job"
    _rank(job, 0, {"0/0": [DDP_BREAK]})
    _rank(job, 1, {"0/0": [DDP_BREAK]})
    assert job_of(job / "rank_1") == job.resolve()
    assert open_input(job / "rank_1").job is None  # info on it is that rank's trace alone
    lone = tmp_path / "lone" / "trace"  # a trace not named as a rank: in no job
    lone.parent.mkdir()
    shutil.copytree(job / "rank_0", lone)
    assert job_of(lone) is None
