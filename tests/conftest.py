"""Shared fixtures: real traces, compiled once per test session and shared by every test.

Each fixture runs the real compiler (``tuidebug trace`` on a bundled example, in a child
process) — no mocks. Tests must not modify these traces; copy them first (``copy_trace``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from tuidebug.trace.importers import trace_logs

# ``open_ui`` (driving the TUI with Pilot) for the TUI tests and the faults suite alike
pytest_plugins = ["tests.tui.pilot"]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def pythonpath() -> str:
    """PYTHONPATH for child processes: this checkout first, then what the caller had."""
    extra = os.environ.get("PYTHONPATH")
    return str(ROOT) + (os.pathsep + extra if extra else "")


def digest(root: Path) -> dict[str, str]:
    """A sha256 per file under ``root``: equal before and after means not a byte changed."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def trace_example(out: Path, example: str, *args: str, extra: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``tuidebug trace`` on a bundled example; returns the finished process."""
    env = dict(os.environ, PYTHONPATH=pythonpath())
    cmd = [sys.executable, "-m", "tuidebug.cli", "trace", "-o", str(out), *(extra or []),
           str(EXAMPLES / example), *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)


def _make(tmp_path_factory: pytest.TempPathFactory, name: str, example: str, *args: str,
          extra: list[str] | None = None) -> Path:
    out = tmp_path_factory.mktemp("traces") / name
    proc = trace_example(out, example, *args, extra=extra)
    if not (out / "manifest.json").exists():
        raise RuntimeError(f"tracing {example} wrote no trace:\n{proc.stdout}\n{proc.stderr}")
    (out.parent / f"{name}.log").write_text(f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return out


@pytest.fixture(scope="session")
def transformer_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One transformer block trained for one step: forward and backward graphs."""
    return _make(tmp_path_factory, "transformer", "transformer_block.py")


@pytest.fixture(scope="session")
def dynamic_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/dynamic_shapes.py: automatic dynamic (0/0, 0/1), a dimension marked dynamic
    then specialized (1/0), an unbacked symbol from .item() (2/0), the recompile limit hit
    (3/0, 3/1, then 3/2 refused)."""
    return _make(tmp_path_factory, "dynamic", "dynamic_shapes.py", extra=["--no-check"])


@pytest.fixture(scope="session")
def mlp_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make(tmp_path_factory, "mlp", "mlp.py")


@pytest.fixture(scope="session")
def profiled_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The MLP traced with ``--profile 3``: kernels, FX nodes and lines measured, compiled and
    eager (every profile test shares it)."""
    return _make(tmp_path_factory, "profiled", "mlp.py", extra=["--profile", "3"])


@pytest.fixture(scope="session")
def profiled_training_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A training step of examples/transformer_block.py's model (tests/fixtures/train_step.py)
    traced with ``--profile 3``: forward and backward measured, compiled and eager. The
    script's own output is in ``profiled_training.log`` beside the trace."""
    return _make(tmp_path_factory, "profiled_training",
                 str(ROOT / "tests" / "fixtures" / "train_step.py"), extra=["--profile", "3"])


@pytest.fixture(scope="session")
def failing_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A compile that fails (C++ compile error planted with inject_relu_bug_TESTING_ONLY)."""
    return _make(tmp_path_factory, "failing", "failing_compile.py")


@pytest.fixture(scope="session")
def accuracy_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A compile that succeeds and runs, but whose outputs differ from eager (an injected
    ``relu → x + 1``): failed in phase "accuracy", after every compile phase."""
    return _make(tmp_path_factory, "accuracy", "failing_compile.py", "--bug", "accuracy")


@pytest.fixture(scope="session")
def graph_break_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make(tmp_path_factory, "graph_break", "graph_break.py")


# -- what PyTorch itself writes (for the importers) ------------------------------------------------

DDP_SCRIPT = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
r = dist.get_rank()
f = torch.compile(lambda x: torch.relu(x) * (r + 1) + 1)
y = f(torch.randn(8))
dist.all_reduce(y)
print("rank", r, float(y.sum()))
dist.destroy_process_group()
"""


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    """This environment without the compiler's logging switches, plus ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("TORCH_TRACE", "TORCH_COMPILE_DEBUG", "TORCH_COMPILE_DEBUG_DIR",
                        "TORCH_LOGS")}
    env.update(extra)
    return env


def _start(cmd: list[str], env: dict[str, str], cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    fh = open(log, "wb")
    return subprocess.Popen(cmd, env=env, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT)


TORCH_TRACE_REUSE_ENV = "TUIDEBUG_TEST_TORCH_TRACE_LOGS"


@pytest.fixture(scope="session")
def torch_trace_logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """TORCH_TRACE directories of real runs, two at a time (this machine has 2 cores).

    Set TUIDEBUG_TEST_TORCH_TRACE_LOGS=DIR to keep them in DIR and reuse them in later
    sessions (the runs take minutes); by default they are made afresh in a temp directory."""
    reuse = os.environ.get(TORCH_TRACE_REUSE_ENV)
    base = Path(reuse) if reuse else tmp_path_factory.mktemp("torch_trace")
    names = ("transformer", "graph_break", "failing", "mlp", "ddp", "mlp_cached")
    if reuse and all(trace_logs(base / n) for n in names):
        return {n: base / n for n in names}
    base.mkdir(parents=True, exist_ok=True)
    cache = base / "inductor-cache"
    py = sys.executable
    ddp = base / "ddp.py"
    ddp.write_text(DDP_SCRIPT)
    torchrun = [py, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                "--master_port", str(29500 + os.getpid() % 400)]
    specs = {
        "transformer": [py, str(EXAMPLES / "transformer_block.py")],
        "graph_break": [py, str(EXAMPLES / "graph_break.py")],
        "failing": [py, str(EXAMPLES / "failing_compile.py")],
        "mlp": [py, str(EXAMPLES / "mlp.py")],
        "ddp": torchrun + [str(ddp)],
    }
    after = {"mlp_cached": ("mlp", [py, str(EXAMPLES / "mlp.py")])}  # same cache: hits
    out: dict[str, Path] = {}
    queue = list(specs.items())
    running: list[tuple[str, subprocess.Popen[bytes]]] = []
    deadline = time.time() + 1500

    def launch(name: str, cmd: list[str]) -> None:
        d = base / name
        env = clean_env({"TORCH_TRACE": str(d), "TORCHINDUCTOR_CACHE_DIR": str(cache),
                    "PYTHONPATH": str(ROOT)})
        running.append((name, _start(cmd, env, base, base / f"{name}.out")))
        out[name] = d

    while queue or running or after:
        while queue and len(running) < 2:
            launch(*queue.pop(0))
        for name, proc in list(running):
            if proc.poll() is not None:
                running.remove((name, proc))
                for a, (dep, cmd) in list(after.items()):
                    if dep == name:
                        del after[a]
                        queue.append((a, cmd))
        if not queue and not running and after:
            raise RuntimeError(f"dependencies never ran: {after}")
        if time.time() > deadline:
            for _, p in running:
                p.kill()
            raise RuntimeError("example runs took too long")
        time.sleep(0.5)
    for name, d in out.items():
        if not trace_logs(d):
            raise RuntimeError(f"{name} wrote no TORCH_TRACE log:\n"
                               f"{(base / f'{name}.out').read_text(errors='replace')[-3000:]}")
    return out




@pytest.fixture(scope="session")
def compiler_texts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Real compiler text, with what it describes (``tests/fixtures/compiler_texts.py``, run
    once, under TORCH_COMPILE_DEBUG=1): ``graphs`` (printed FX graphs of a Dynamo and an ATen
    graph, each with its GraphModule's nodes), ``log`` (the run's TORCH_TRACE log), ``model``
    (the Inductor folder of the compiled graph: ir_pre_fusion.txt, ir_post_fusion.txt,
    output_code.py …). Set TUIDEBUG_TEST_COMPILER_TEXTS=DIR to keep them in DIR and reuse them."""
    reuse = os.environ.get("TUIDEBUG_TEST_COMPILER_TEXTS")
    cwd = Path(reuse) if reuse else tmp_path_factory.mktemp("compiler_texts")
    if not (reuse and (cwd / "graphs.json").is_file()):
        _compiler_texts(cwd)
    debug = cwd / "torch_compile_debug"
    (log,) = (debug / "tlparse").iterdir()
    (model,) = [d for d in debug.glob("run_*/torchinductor/model__*") if d.is_dir()]
    return {"graphs": json.loads((cwd / "graphs.json").read_text()), "log": log,
            "model": model, "dir": cwd}


def _compiler_texts(cwd: Path) -> None:
    shutil.rmtree(cwd, ignore_errors=True)
    cwd.mkdir(parents=True)
    env = clean_env({"TORCH_COMPILE_DEBUG": "1", "PYTHONPATH": pythonpath(),
                     "TORCHINDUCTOR_CACHE_DIR": str(cwd / "inductor-cache")})
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "fixtures" / "compiler_texts.py")],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0 or not (cwd / "graphs.json").is_file():
        raise RuntimeError(f"compiler_texts.py failed:\n{proc.stdout}\n{proc.stderr[-3000:]}")


@pytest.fixture
def copy_trace(tmp_path: Path):
    """Copy a shared trace so that a test can damage or modify it."""
    def copy(src: Path, name: str = "copy") -> Path:
        dst = tmp_path / name
        shutil.copytree(src, dst)
        return dst
    return copy


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """GPU tests run only where CUDA is available (never in CI)."""
    gpu_items = [i for i in items if "gpu" in i.keywords]
    if not gpu_items:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in gpu_items:
        item.add_marker(skip)


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
