"""Shared fixtures: real traces, shared by every test of a session.

Every trace was made by the real compiler (``tuidebug trace`` on a bundled example) — no mocks:
the ones tests only read are committed (tests/fixtures/traces.tar.gz, remade by
``python -m tests.fixtures.make_traces``); the others compile live, once per session, and mark
the tests that use them ``slow``. Tests must not modify these traces; copy them first
(``copy_trace``).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

# Write bytecode, here and in every process the tests start (a trace runs two): with
# PYTHONDONTWRITEBYTECODE set, as on this project's machines, each of those processes compiled
# every tuidebug module from source again, and pytest rewrote every test module's asserts anew.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

from tests.fixtures.make_traces import (COMPILE_DEBUG, COMPILER_TEXTS, DEBUG_RUNS, LOG_RUNS, SPECS,
                                        TORCH_TRACE, TraceSpec, made_info, make_compile_debug,
                                        make_compiler_texts, make_torch_trace_logs, pythonpath,
                                        trace_command)
from tests.fixtures.make_traces import clean_env  # noqa: F401  (the tests import it from here)
from tests.fixtures.make_traces import compiler_texts as read_compiler_texts
from tests.fixtures.make_traces import make as make_trace
from tests.fixtures.make_traces import unpack as unpack_traces

# ``open_ui`` (driving the TUI with Pilot) for the TUI tests and the faults suite alike
pytest_plugins = ["tests.tui.pilot"]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def plain(path: Path) -> Path:
    """``path``, a file of a trace, as a plain file a test may edit as text: where the trace
    stores it compressed (``NAME.gz``, format 2) it is decompressed into ``NAME`` (which the
    reader reads first) and the ``.gz`` removed."""
    from tuidebug.trace.format import compressed

    packed = path.with_name(compressed.packed_name(path.name))
    if not path.exists() and packed.exists():
        path.write_bytes(compressed.read_bytes(path, 1 << 30))
        packed.unlink()
    return path


def plain_files(root: Path) -> Path:
    """Every file under ``root`` (a trace or a job) stored compressed made plain (``plain``)."""
    from tuidebug.trace.format import compressed

    for packed in sorted(root.rglob(f"*{compressed.SUFFIX}")):
        plain(packed.with_name(compressed.logical_name(packed.name)))
    return root


def digest(root: Path) -> dict[str, str]:
    """A sha256 per file under ``root``: equal before and after means not a byte changed."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def trace_example(out: Path, example: str, *args: str, extra: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``tuidebug trace`` on a bundled example; returns the finished process."""
    env = dict(os.environ, PYTHONPATH=pythonpath())
    cmd = trace_command(out, example, tuple(args), tuple(extra or ()))
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)


def trace_script(folder: Path, name: str, text: str, *extra: str
                 ) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """Write ``text`` as ``folder/name.py``, trace it (``extra``: tuidebug's options) into
    ``folder/name`` and assert that it ended well; the trace and the finished process."""
    script = folder / f"{name}.py"
    script.write_text(text)
    out = folder / name
    proc = trace_example(out, str(script), extra=list(extra))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc


def _make(tmp_path_factory: pytest.TempPathFactory, name: str, example: str, *args: str,
          extra: list[str] | None = None) -> Path:
    return make_trace(tmp_path_factory.mktemp("traces") / name,
                      TraceSpec(example, tuple(args), tuple(extra or ())))


# -- the traces every reading test shares ----------------------------------------------------------
#
# ``transformer_trace``, ``mlp_trace`` … are the committed traces (tests/fixtures/traces.tar.gz,
# made by the real compiler with tests/fixtures/make_traces.py), unpacked once per session:
# reading them costs no compile. They are compiled live instead where the installed torch is not
# the one that made them, or when TUIDEBUG_TEST_LIVE_TRACES=1. Tests of capture itself (and
# tests/compiler, tests/minify) ask for ``live_traces`` — a real compile — and are marked slow.

LIVE_TRACES_ENV = "TUIDEBUG_TEST_LIVE_TRACES"


def run_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this test run that every pytest-xdist worker shares (each worker's own
    basetemp is a folder inside it); without xdist, the run's basetemp."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str,
              build: Callable[[Path], object]) -> Path:
    """``build(folder)`` run once per test run, whichever worker asks first; the others wait for
    it and get the same folder (read-only for them all, like every shared trace)."""
    root = run_root(tmp_path_factory) / "made-once"
    root.mkdir(exist_ok=True)
    dest, done = root / name, root / f"{name}.done"
    with _locked(root / f"{name}.lock"):
        if not done.exists():
            if dest.exists():
                shutil.rmtree(dest)  # a worker that failed half-way
            build(dest)
            done.touch()
    return dest


@pytest.fixture(scope="session")
def live_traces(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """name in SPECS → that trace, compiled now by ``tuidebug trace`` — once per test run, however
    many xdist workers ask for it."""
    return lambda name: made_once(tmp_path_factory, f"live-{name}",
                                  lambda dest: make_trace(dest, SPECS[name]))


def live_trace_fixture(name: str) -> Any:
    """A session fixture ``<name>_trace`` that compiles live: a conftest that assigns
    ``transformer_trace = live_trace_fixture("transformer")`` gives its folder live traces."""
    @pytest.fixture(scope="session", name=f"{name}_trace")
    def live(live_traces: Callable[[str], Path]) -> Path:
        return live_traces(name)
    return live


def _live_wanted() -> bool:
    """Compile the shared traces live: asked for, or the installed torch is not the one that
    made the committed ones (they would not be what this torch makes)."""
    made = made_info()["torch"]
    try:
        here = version("torch")
    except PackageNotFoundError:
        here = None
    if here != made:
        warnings.warn(f"the committed traces are torch {made}'s, this is {here}'s: the shared "
                      "traces compile live")
    return os.environ.get(LIVE_TRACES_ENV) == "1" or here != made


@pytest.fixture(scope="session")
def committed(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """The committed archive, unpacked once (None where the shared traces compile live)."""
    if _live_wanted():
        return None
    dest = tmp_path_factory.mktemp("committed")
    unpack_traces(dest)
    return dest


@pytest.fixture(scope="session")
def committed_traces(committed: Path | None,
                     request: pytest.FixtureRequest) -> Callable[[str], Path]:
    """name in SPECS → the committed trace; live where it would not be what this torch makes
    (see above)."""
    if committed is None:
        return request.getfixturevalue("live_traces")
    return lambda name: committed / name


@pytest.fixture(scope="session")
def transformer_trace(committed_traces: Callable[[str], Path]) -> Path:
    """One transformer block trained for one step: forward and backward graphs."""
    return committed_traces("transformer")


@pytest.fixture(scope="session")
def dynamic_trace(committed_traces: Callable[[str], Path]) -> Path:
    """examples/dynamic_shapes.py: automatic dynamic (0/0, 0/1), a dimension marked dynamic
    then specialized (1/0), an unbacked symbol from .item() (2/0), the recompile limit hit
    (3/0, 3/1, then 3/2 refused)."""
    return committed_traces("dynamic")


@pytest.fixture(scope="session")
def mlp_trace(committed_traces: Callable[[str], Path]) -> Path:
    return committed_traces("mlp")


@pytest.fixture(scope="session")
def profiled_trace(committed_traces: Callable[[str], Path]) -> Path:
    """The MLP traced with ``--profile 3``: kernels, FX nodes and lines measured, compiled and
    eager (every profile test shares it)."""
    return committed_traces("profiled")


@pytest.fixture(scope="session")
def profiled_training_trace(committed_traces: Callable[[str], Path]) -> Path:
    """A training step of examples/transformer_block.py's model (tests/fixtures/train_step.py)
    traced with ``--profile 3``: forward and backward measured, compiled and eager. The
    script's own output is in ``profiled_training.log`` beside the trace."""
    return committed_traces("profiled_training")


@pytest.fixture(scope="session")
def failing_trace(committed_traces: Callable[[str], Path]) -> Path:
    """A compile that fails (C++ compile error planted with inject_relu_bug_TESTING_ONLY)."""
    return committed_traces("failing")


@pytest.fixture(scope="session")
def accuracy_trace(committed_traces: Callable[[str], Path]) -> Path:
    """A compile that succeeds and runs, but whose outputs differ from eager (an injected
    ``relu → x + 1``): failed in phase "accuracy", after every compile phase."""
    return committed_traces("accuracy")


@pytest.fixture(scope="session")
def graph_break_trace(committed_traces: Callable[[str], Path]) -> Path:
    return committed_traces("graph_break")


@pytest.fixture(scope="session")
def transformer4_trace(committed_traces: Callable[[str], Path]) -> Path:
    """Four transformer blocks trained for one step: a joint graph of about 950 nodes."""
    return committed_traces("transformer4")


@pytest.fixture(scope="session")
def inplace_trace(committed_traces: Callable[[str], Path]) -> Path:
    """An SGD step (foreach) and a ``torch._foreach_add_``, compiled."""
    return committed_traces("inplace")


# -- what PyTorch itself writes (for the importers) ------------------------------------------------


@pytest.fixture(scope="session")
def torch_trace_logs(committed: Path | None,
                     tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """TORCH_TRACE folders of real runs (make_traces.LOG_RUNS): the transformer block, the graph
    break, the failing compile, the MLP, a 2-rank DDP job, the MLP again from a warm cache."""
    if committed is not None:
        return {name: committed / TORCH_TRACE / name for name in LOG_RUNS}
    return make_torch_trace_logs(tmp_path_factory.mktemp("torch_trace"))


@pytest.fixture(scope="session")
def debug_dirs(committed: Path | None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{example: the working directory of its TORCH_COMPILE_DEBUG=1 run, holding its
    torch_compile_debug/} for make_traces.DEBUG_RUNS (the MLP, the failing compile)."""
    if committed is not None:
        return {name: committed / COMPILE_DEBUG / name for name in DEBUG_RUNS}
    return make_compile_debug(tmp_path_factory.mktemp("compile_debug"))


@pytest.fixture(scope="session")
def compiler_texts(committed: Path | None,
                   tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Real compiler text, with what it describes (``tests/fixtures/compiler_texts.py`` run
    under TORCH_COMPILE_DEBUG=1): see ``make_traces.compiler_texts``."""
    if committed is not None:
        return read_compiler_texts(committed / COMPILER_TEXTS)
    return read_compiler_texts(make_compiler_texts(tmp_path_factory.mktemp("compiler_texts")))


@pytest.fixture
def copy_trace(tmp_path: Path):
    """Copy a shared trace so that a test can damage or modify it."""
    def copy(src: Path, name: str = "copy") -> Path:
        dst = tmp_path / name
        shutil.copytree(src, dst)
        return dst
    return copy


# Fixtures that run the compiler, torchrun or a torch program (or build a venv): a test that uses
# one, directly or through another fixture, is marked ``slow``. Tests whose own body compiles are
# marked in their module. ``pytest -m "not slow"`` is the fast tier.
LIVE_FIXTURES = frozenset({
    "live_traces", "worker", "bug_traces",
    "same_job", "break_job", "shape_job", "graph_job", "collectives_job", "hang_jobs",
    "funcol_logs", "world_of_one", "autotune_trace",
    "cached_traces", "verdict_traces", "real_traces", "mlp_changed", "flaky_trace",
    "hang_trace", "real_config", "venv", "numerics_traces", "five_breaks", "decode_trace",
    "item_trace", "shapebreak_job",
})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that use a compiling fixture are slow; GPU tests run only where CUDA is available
    (never in CI)."""
    slow = pytest.mark.slow
    for item in items:
        if LIVE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(slow)
    _slow_files_first(items)
    gpu_items = [i for i in items if "gpu" in i.keywords]
    if not gpu_items:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: a run without xdist ignores it
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: one worker more than the cores, on a small machine. One file
    (tests/distributed/test_hangs.py) waits on stopped torchrun jobs for most of its time
    (three hangs side by side until their ``--timeout``: about 2.5 minutes of the run, its
    worker idle), and the third worker fills that time with the other files' work."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own setting, as xdist documents it (its hook reads it)
    from tuidebug.machine import cores

    n = cores()
    return n + 1 if n <= 4 else n


def _slow_files_first(items: list[pytest.Item]) -> None:
    """The files that wait on a hung job first (``waits``: their --timeout overlaps the other
    workers' compiles), then the files with slow tests, each file's tests in their order: run
    one file per core (xdist --dist loadfile), the long files start at once and the many short
    ones fill in at the end, instead of a torchrun job's file starting last."""
    files: dict[str, tuple[bool, bool]] = {}
    for item in items:
        path = str(item.path)
        waits, slow = files.get(path, (False, False))
        files[path] = (waits or "waits" in item.keywords, slow or "slow" in item.keywords)
    rank = {path: (not waits, not slow, i) for i, (path, (waits, slow)) in enumerate(files.items())}
    items.sort(key=lambda item: rank[str(item.path)])  # stable: a file's own order is kept


# -- the faults summary: tests that take `case` record whether tuidebug survived and lost data --

_CASES: list["Case"] = []


@dataclass
class Case:
    name: str
    survived: bool = False
    data_lost: bool = True
    note: str = ""


@pytest.fixture
def case(request: pytest.FixtureRequest) -> Iterator[Case]:
    """A fault case. The test sets ``survived`` and ``data_lost`` as it checks them."""
    c = Case(request.node.name)
    _CASES.append(c)
    yield c


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _CASES:
        return
    tr = terminalreporter
    tr.section("faults summary")
    tr.write_line(f"{'case':60} {'survived':>9} {'data lost':>10}")
    for c in _CASES:
        tr.write_line(f"{c.name[:60]:60} {('yes' if c.survived else 'NO'):>9} "
                      f"{('YES' if c.data_lost else 'no'):>10}  {c.note}")
    survived = sum(c.survived for c in _CASES)
    lost = sum(c.data_lost for c in _CASES)
    tr.write_line(f"cases tried: {len(_CASES)}, survived: {survived}, data lost: {lost}")
