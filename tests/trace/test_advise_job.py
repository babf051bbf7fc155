"""``advise JOB`` (no ``--rank``) reads the lowest rank and says where the job's ranks first
diverge when another rank made a compile that one did not: it computes that divergence alone
(``divergence.first_divergence``, not the whole ``analyze_job``: no progress log, collective or
run time read), and the command it prints can be pasted into a shell whatever the job's path
holds. Jobs written with the torch-free writer."""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import shlex
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import pythonpath
from tests.trace.test_rank_reasons import _rank
from tuidebug.trace.jobs.divergence import first_divergence
from tuidebug.trace.jobs.progress import progress_path
from tuidebug.trace.jobs.ranks import analyze_job

_IN_OPEN = 0x20


def _advise(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuidebug.cli", "advise", *args],
                          env=dict(os.environ, PYTHONPATH=pythonpath()), text=True,
                          capture_output=True, timeout=120, stdin=subprocess.DEVNULL)


def test_the_command_advise_prints_for_another_rank_is_quoted(tmp_path: Path) -> None:
    """A job folder named ``my job $HOME`` was printed bare: pasted, the shell split it at the
    space and expanded ``$HOME``. Quoted, the pasted line names the job and the rank."""
    job = tmp_path / "my job $HOME (it's)"
    _rank(job, 0, {"0/0": []}, functions={"0/0": "step"})
    _rank(job, 1, {"0/0": [], "0/1": []}, functions={"0/0": "step", "0/1": "step"})
    out = _advise(str(job))
    assert out.returncode == 0, out.stderr
    said = next((ln for ln in out.stderr.splitlines() if "which rank 0 did not" in ln), None)
    assert said is not None, out.stderr
    command = said.split("(where the ranks first diverge): ", 1)[1]
    assert shlex.split(command) == ["tuidebug", "advise", str(job), "--rank", "1"], said


def test_the_first_divergence_alone_is_the_job_analysis_divergence(tmp_path: Path) -> None:
    """The same answer as ``analyze_job``'s: a compile on one rank only, ranks that agree,
    a rank with no trace."""
    only = tmp_path / "only"
    _rank(only, 0, {"0/0": []}, functions={"0/0": "step"})
    _rank(only, 1, {"0/0": [], "0/1": []}, functions={"0/0": "step", "0/1": "step"})
    same = tmp_path / "same"
    for r in (0, 1):
        _rank(same, r, {"0/0": []}, functions={"0/0": "step"})
    missing = tmp_path / "missing"
    _rank(missing, 0, {"0/0": []}, functions={"0/0": "step"})
    kinds = {}
    for job in (only, same, missing):
        got = first_divergence(job)
        assert got == analyze_job(job)["divergence"], (job, got)
        kinds[job.name] = got and got["kind"]
    assert kinds == {"only": "compile_only_on_some_ranks", "same": None,
                     "missing": "no_trace"}, kinds


class _Opens:
    """The names of the files opened in a folder, told by the kernel (Linux ``inotify``,
    ``IN_OPEN``): a real filesystem signal of what a command read, whatever opened them."""

    def __init__(self, folder: Path) -> None:
        self.libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK)
        assert self.fd >= 0, ctypes.get_errno()
        wd = self.libc.inotify_add_watch(self.fd, os.fsencode(folder), _IN_OPEN)
        assert wd >= 0, ctypes.get_errno()

    def names(self) -> list[str]:
        """The files opened since last asked."""
        out: list[str] = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return out
            i = 0
            while i < len(data):
                _, mask, _, size = struct.unpack_from("iIII", data, i)
                name = data[i + 16:i + 16 + size].rstrip(b"\0").decode()
                if mask & _IN_OPEN and name:
                    out.append(name)
                i += 16 + size

    def close(self) -> None:
        os.close(self.fd)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
def test_advise_job_reads_no_progress_log(tmp_path: Path) -> None:
    """``advise JOB`` answers from the ranks' traces alone: the job's progress logs (what
    ``analyze_job`` reads for where each rank was and which rank the others waited for) are
    not opened, as the kernel tells. The same watch sees ``analyze_job`` open them: were
    ``advise`` back on the whole analysis, this fails."""
    job = tmp_path / "job"
    _rank(job, 0, {"0/0": []}, functions={"0/0": "step"})
    _rank(job, 1, {"0/0": [], "0/1": []}, functions={"0/0": "step", "0/1": "step"})
    logs = {progress_path(job, r).name for r in (0, 1)}
    for r in (0, 1):
        progress_path(job, r).write_text("".join(json.dumps(e) + "\n" for e in (
            {"event": "collective", "op": "all_reduce", "seq": 1, "group": "0", "t": 1.0 + r},
            {"event": "done", "seq": 1, "group": "0", "t": 3.0})))
    opens = _Opens(progress_path(job, 0).parent)
    try:
        analyze_job(job)
        assert logs <= set(opens.names()), "the watch must see analyze_job open the logs"
        out = _advise(str(job))
        seen = opens.names()
    finally:
        opens.close()
    assert out.returncode == 0, out.stderr
    assert "which rank 0 did not" in out.stderr, out.stderr  # the divergence, still told
    assert seen and not logs & set(seen), seen  # the job's records read, no progress log
