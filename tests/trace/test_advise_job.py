"""``advise JOB`` (no ``--rank``) reads the lowest rank and says where the job's ranks first
diverge when another rank made a compile that one did not: it computes that divergence alone
(``divergence.first_divergence``, not the whole ``analyze_job``: no progress log, collective or
run time read), and the command it prints can be pasted into a shell whatever the job's path
holds. Jobs written with the torch-free writer."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from tests.conftest import pythonpath
from tests.trace.test_rank_reasons import _rank
from tuidebug.trace.jobs.divergence import first_divergence
from tuidebug.trace.jobs.ranks import analyze_job


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
