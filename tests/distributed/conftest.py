"""Real distributed jobs: ``tuidebug trace --nproc-per-node N`` runs torchrun (gloo, CPU) on
``rank_job.py``; one job per scenario, shared by the session. Tests must not modify them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import made_once, pythonpath

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "rank_job.py"


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=pythonpath())
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "SLURM_PROCID"):
        env.pop(name, None)
    return env


# gloo's teardown, now and then, aborts a rank of the UNTRACED baseline job (CI: SIGABRT after
# this line); torch issue 190489 has the like. Only that baseline, and only a SIGABRT with this
# message, is run once more (with a warning): a traced job is never retried, so an abort that
# tracing causes, however rare, fails its test.
GLOO_ABORT = "terminate called without an active exception"


def plain_job(mode: str, nproc: int = 2) -> subprocess.CompletedProcess[str]:
    """``rank_job.py MODE`` under plain torchrun, untraced: what a traced run must equal."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           "--nproc-per-node", str(nproc), str(SCRIPT), mode]
    proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 and GLOO_ABORT in proc.stderr and "SIGABRT" in proc.stderr:
        import warnings

        warnings.warn(f"gloo's teardown aborted a rank of the untraced {mode} job "
                      f"({GLOO_ABORT!r}); it runs again")
        proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    return proc


def trace_job(out: Path, mode: str, nproc: int = 2,
              extra: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "tuidebug.cli", "trace", "--nproc-per-node", str(nproc),
           "--no-check", *(extra or []), "-o", str(out), str(SCRIPT), mode]
    proc = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    (out.parent / f"{out.name}.log").write_text(
        f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def _job(tmp_path_factory: pytest.TempPathFactory, mode: str,
         nproc: int = 2) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """The job traced once per test run (``made_once``: however many xdist workers ask), and
    how its ``tuidebug trace`` ended."""
    def build(root: Path) -> None:
        root.mkdir()
        proc = trace_job(root / mode, mode, nproc)
        if not (root / mode / "job.json").exists():
            raise RuntimeError(f"tracing the {mode} job wrote no job.json:\n{proc.stdout}\n"
                               f"{proc.stderr}")
        (root / "proc.json").write_text(json.dumps(
            {"args": proc.args, "returncode": proc.returncode, "stdout": proc.stdout,
             "stderr": proc.stderr}))

    root = made_once(tmp_path_factory, f"job-{mode}-{nproc}", build)
    return root / mode, subprocess.CompletedProcess(**json.loads((root / "proc.json").read_text()))


@pytest.fixture(scope="session")
def same_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    return _job(tmp_path_factory, "same")


@pytest.fixture(scope="session")
def break_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    return _job(tmp_path_factory, "break")


@pytest.fixture(scope="session")
def shape_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    return _job(tmp_path_factory, "shape")


@pytest.fixture(scope="session")
def graph_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """4 ranks; rank 1's graph differs from the other three's."""
    return _job(tmp_path_factory, "graph", nproc=4)


@pytest.fixture(scope="session")
def collectives_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """Rank 1 issues two all_reduces (two groups) in the other order; then a DDP model in 3
    buckets on every rank."""
    return _job(tmp_path_factory, "collectives")


# The jobs that hang, each ended by ``tuidebug trace --timeout``: ``hang`` (after compiling, the
# ranks issue their collectives in a rank-dependent order), ``chang`` (a compiled function's
# functional all_reduce, which rank 1 stops calling at the third step: rank 0 waits inside
# compiled code) and ``ddphang`` (a DDP bucket all-reduce rank 1 never joins). A hung job uses no
# CPU while it waits out its timeout, so the three run side by side (``hang_jobs``): the suite
# waits one timeout, not three in a row.
HANG_MODES = ("hang", "chang", "ddphang")
# One timeout for the three: past start-up and compiling a graph with a collective (its C++
# kernel built) on a loaded 2-core machine, the three jobs' six ranks starting together (at 60 s,
# under load 13, a rank was still building its C++ kernel: its stacks at --timeout showed it in
# compile_to_module; one after the other, the jobs had 120, 150 and 90 s)
HANG_TIMEOUT_S = 150


@dataclass(frozen=True)
class HungJob:
    """A job traced with ``--timeout HANG_TIMEOUT_S``: its folder, how its ``tuidebug trace``
    ended, and the seconds that whole ``tuidebug trace`` took."""

    out: Path
    proc: subprocess.CompletedProcess[str]
    took: float


@pytest.fixture(scope="session")
def hang_jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, HungJob]:
    """mode (``HANG_MODES``) → that job, the three traced side by side."""
    root = tmp_path_factory.mktemp("jobs")

    def run(mode: str) -> tuple[str, HungJob]:
        start = time.monotonic()
        proc = trace_job(root / mode, mode, extra=["--timeout", str(HANG_TIMEOUT_S)])
        return mode, HungJob(root / mode, proc, time.monotonic() - start)

    with ThreadPoolExecutor(len(HANG_MODES)) as ex:
        return dict(ex.map(run, HANG_MODES))


@pytest.fixture(scope="session")
def torch_trace_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PyTorch's own TORCH_TRACE logs of a real 2-rank job (plain torchrun, gloo; rank 1 breaks
    the graph), one ``dedicated_log_torch_trace_rank_<N>_….log`` per rank."""
    out = tmp_path_factory.mktemp("logs") / "torch_trace"
    env = dict(os.environ, PYTHONPATH=pythonpath(), TORCH_TRACE=str(out))
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "SLURM_PROCID"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc-per-node", "2", str(SCRIPT), "break"],
                          env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 or not out.is_dir():
        raise RuntimeError(f"the TORCH_TRACE job failed:\n{proc.stdout}\n{proc.stderr}")
    return out


@pytest.fixture(scope="session")
def funcol_logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """PyTorch's own TORCH_TRACE logs of two real 2-rank jobs (plain torchrun, gloo) whose
    compiled function issues c10d functional collectives: ``funcol`` (every rank the same) and
    ``funcol_odd`` (rank 1's reduce_scatter_tensor reduces with "max"; with provenance,
    ``INDUCTOR_PROVENANCE=1``), run side by side."""
    root = tmp_path_factory.mktemp("logs")
    env = dict(os.environ, PYTHONPATH=pythonpath())
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "SLURM_PROCID"):
        env.pop(name, None)
    procs = {}
    # the planted job's logs have Inductor's provenance (with each call's whole stack)
    extra = {"funcol": {}, "funcol_odd": {"INDUCTOR_PROVENANCE": "1"}}
    # a cache of its own: a graph read from the machine's Inductor cache carries the stack of
    # the process that compiled it first (another checkout's paths), not this one's
    env["TORCHINDUCTOR_CACHE_DIR"] = str(root / "inductor-cache")
    env["TRITON_CACHE_DIR"] = str(root / "triton-cache")
    for mode in ("funcol", "funcol_odd"):
        procs[mode] = subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
             "2", str(SCRIPT), mode], env=dict(env, TORCH_TRACE=str(root / mode), **extra[mode]),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = {}
    try:
        for mode, proc in procs.items():
            text, _ = proc.communicate(timeout=600)
            if proc.returncode != 0 or not (root / mode).is_dir():
                raise RuntimeError(f"the {mode} TORCH_TRACE job failed:\n{text}")
            out[mode] = root / mode
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return out


@pytest.fixture(scope="session")
def shapebreak_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """Rank 1 alone recompiles (another input shape), and that compile breaks the graph."""
    return _job(tmp_path_factory, "shapebreak")
