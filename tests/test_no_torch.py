"""A real virtual environment without torch: the viewer commands work, the compiler commands
say how to get torch, and a newer torch than tested runs with a one-line notice.

The venv is made with ``python -m venv`` and holds only the viewer's dependencies (textual,
textual-serve, rich, graphviz, sympy and what they need), linked from this environment's
site-packages (no network), plus this checkout on its path as an editable install would put it.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tuidebug.compiler.torch_version import check
from tuidebug.errors import CliError

FIXTURE = ROOT / "tests" / "fixtures" / "cuda_mlp_autotune"
VIEWER_DEPS = ["textual", "textual-serve", "rich", "graphviz", "sympy"]


def _closure(names: list[str]) -> list[importlib.metadata.Distribution]:
    seen: dict[str, importlib.metadata.Distribution] = {}
    todo = list(names)
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in seen:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # an optional requirement for another platform or Python
        seen[name] = dist
        for req in dist.requires or []:
            if "extra ==" in req:
                continue
            todo.append(re.match(r"[A-Za-z0-9._-]+", req).group(0))  # type: ignore[union-attr]
    assert "torch" not in seen
    return list(seen.values())


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("venv-no-torch") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = Path(subprocess.run(
        [str(root / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True).stdout.strip())
    for dist in _closure(VIEWER_DEPS):
        base = Path(dist.locate_file(""))
        for top in {Path(str(f)).parts[0] for f in dist.files or []}:
            src = base / top
            if top != ".." and src.exists() and not (site / top).exists():
                (site / top).symlink_to(src)
    (site / "tuidebug-checkout.pth").write_text(str(ROOT) + "\n")
    return root


def run(venv: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(venv / "bin" / "python"), *args], capture_output=True, text=True,
                          env=env, timeout=timeout, cwd=venv.parent)


def test_the_venv_has_no_torch(venv: Path) -> None:
    p = run(venv, "-c", "import torch")
    assert p.returncode == 1 and "No module named 'torch'" in p.stderr
    p = run(venv, "-c", "import tuidebug, textual, textual_serve; print(tuidebug.__file__)")
    assert p.returncode == 0 and p.stdout.strip() == str(ROOT / "tuidebug" / "__init__.py")


def test_viewer_commands_without_torch(venv: Path, tmp_path: Path) -> None:
    info = run(venv, "-m", "tuidebug", "info", str(FIXTURE), "--json")
    assert info.returncode == 0, info.stderr
    assert '"status": "ok"' in info.stdout
    archive = tmp_path / "t.tar.gz"
    assert run(venv, "-m", "tuidebug", "pack", str(FIXTURE), "-o", str(archive)).returncode == 0
    info = run(venv, "-m", "tuidebug", "info", str(archive))
    assert info.returncode == 0 and "0_0-inference" in info.stdout, info.stderr
    diff = run(venv, "-m", "tuidebug", "diff", str(FIXTURE), str(FIXTURE))
    assert diff.returncode == 0, diff.stderr
    svg = run(venv, "-m", "tuidebug", "svg", str(FIXTURE), "-o", str(tmp_path / "g.svg"))
    assert svg.returncode == 0, svg.stderr
    assert (tmp_path / "g.svg").exists() or (tmp_path / "g.dot").exists()
    bad = tmp_path / "not-a-log"
    bad.mkdir()
    imp = run(venv, "-m", "tuidebug", "import", str(bad), "-o", str(tmp_path / "imp"))
    assert imp.returncode == 2 and "Traceback" not in imp.stderr


def test_every_screen_opens_without_torch(venv: Path) -> None:
    """``open``'s app on every screen, driven by Pilot in the torch-free venv."""
    code = f"""
import asyncio, sys
from tuidebug.trace.format.reader import Trace
from tuidebug.tui.app import TuidebugApp
async def main():
    app = TuidebugApp(Trace({str(FIXTURE)!r}))
    async with app.run_test(size=(120, 40)) as pilot:
        for key in "12345678":
            await pilot.press(key)
            await pilot.pause(0.3)
        print("screens", type(app.screen).__name__)
    print("torch imported:", "torch" in sys.modules)
asyncio.run(main())
"""
    p = run(venv, "-c", code, timeout=180)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "torch imported: False" in p.stdout


def test_serve_without_torch(venv: Path) -> None:
    """The server starts and a websocket session gets the app drawn, in the torch-free venv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.Popen([str(venv / "bin" / "python"), "-m", "tuidebug", "serve",
                             str(FIXTURE)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        m = re.search(r"at (http://\S+/)", line)
        assert m, line + proc.stderr.read()  # type: ignore[union-attr]
        drawn = asyncio.run(_session_output(m.group(1)))
        assert b"cuda_mlp_autotune" in drawn
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=15)


async def _session_output(url: str) -> bytes:
    import aiohttp

    out = b""
    async with aiohttp.ClientSession() as s:
        async with s.ws_connect(url + "ws?width=120&height=40", origin=url.rstrip("/")) as ws:
            deadline = time.monotonic() + 60
            while b"cuda_mlp_autotune" not in out and time.monotonic() < deadline:
                msg = await ws.receive(timeout=60)
                if msg.type == aiohttp.WSMsgType.BINARY:
                    out += msg.data
                elif msg.type != aiohttp.WSMsgType.TEXT:
                    break
    return out


def test_compiler_commands_say_how_to_get_torch(venv: Path, tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("print('never run')\n")
    for args in (["trace", "-o", str(tmp_path / "o"), str(script)], ["flags", "max_fusion"],
                 ["recompile", str(FIXTURE), "--set", "max_fusion_size=1"],
                 ["minify", str(FIXTURE)], ["demo", "--no-open"]):
        p = run(venv, "-m", "tuidebug", *args)
        assert p.returncode == 2, (args, p.stderr)
        lines = [ln for ln in p.stderr.splitlines() if ln.startswith("tuidebug: error:")]
        assert len(lines) == 1 and "needs PyTorch" in lines[0], p.stderr
        assert "pip install 'tuidebug[compiler]'" in lines[0]
    assert not (tmp_path / "o").exists()


def test_torch_versions() -> None:
    assert check("2.13.0+cpu", "trace") is None
    assert check("2.15.1", "trace") is None
    notice = check("2.16.0.dev20270101+cu130", "trace")
    assert notice and notice.count("\n") == 0 and "2.16.0" in notice and "newer" in notice
    with pytest.raises(CliError, match="needs torch 2.11 or newer; this environment has 2.9.1"):
        check("2.9.1", "trace")
    with pytest.raises(CliError, match="needs PyTorch"):
        check(None, "recompile")
