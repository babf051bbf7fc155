"""Corrupt and untrusted traces: every command opens what it can, names the damage, and never
executes or unpickles anything that came with the trace."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT, plain, pythonpath
from tests.faults.conftest import Case
from tuidebug.trace.format.reader import Trace


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuidebug.cli", *args], capture_output=True,
                          text=True, cwd=cwd or ROOT, timeout=300,
                          env=dict(os.environ, PYTHONPATH=pythonpath()))


def tui_visit_all(trace: Path) -> subprocess.CompletedProcess[str]:
    """Open the trace in the real app (headless), visit every screen, print what it shows."""
    code = textwrap.dedent(f"""
        import asyncio, sys
        from tuidebug.trace.format.reader import Trace
        from tuidebug.tui.app import TuidebugApp
        async def main():
            app = TuidebugApp(Trace({str(trace)!r}))
            async with app.run_test(size=(160, 45)) as pilot:
                for key in "123456":
                    await pilot.press(key)
                    await pilot.pause(0.2)
                await pilot.press("1")
                await pilot.pause(0.2)
                print("SCREEN", app.screen.__class__.__name__)
                print("TORCH", "torch" in sys.modules)
        asyncio.run(main())
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=pythonpath()))


def damage(trace: Path) -> dict[str, str]:
    """Truncated JSON, a missing snapshot, a future format version, binary garbage in a code file
    and a 200 MB code file. Returns {kind: relative path damaged}."""
    t = Trace(trace)
    g = t.graphs[0]
    snaps = g.snapshots()
    truncated = plain(g.dir / snaps[-1].file)
    truncated.write_text(truncated.read_text()[:200])
    missing = plain(g.dir / snaps[0].file)
    missing.unlink()
    kernel = next(k for k in g.kernels if k.file)
    (g.dir / kernel.file).write_bytes(os.urandom(4096) + b"\x00")
    with open(g.dir / "code" / "wrapper.py", "w") as f:
        line = "# " + "x" * 1000 + "\n"
        for _ in range(200_000):
            f.write(line)
    m = json.loads((trace / "manifest.json").read_text())
    m["format_version"] = 7
    (trace / "manifest.json").write_text(json.dumps(m))
    rel = lambda p: str(p.relative_to(trace))  # noqa: E731
    return {"truncated": rel(truncated), "missing": rel(missing), "binary": rel(g.dir / kernel.file)}


def test_damaged_trace_opens_everywhere(mlp_trace: Path, copy_trace, tmp_path: Path,
                                        case: Case) -> None:
    t0 = copy_trace(mlp_trace, "damaged")
    names = damage(t0)
    info = cli("info", str(t0))
    assert info.returncode in (0, 1) and "Traceback" not in info.stderr, info.stderr
    out = info.stdout + info.stderr
    for rel in names.values():
        assert rel in out, (rel, out)
    assert "format version 7" in out
    svg = cli("svg", str(t0), "--stage", "pre_grad", "-o", str(tmp_path / "g.svg"))
    assert "Traceback" not in svg.stderr, svg.stderr
    ui = tui_visit_all(t0)
    assert ui.returncode == 0, ui.stderr[-3000:]
    assert "TORCH False" in ui.stdout
    case.survived = True
    case.data_lost = not Trace(t0).graphs[0].kernels  # the undamaged parts are still there


def test_untrusted_trace_is_never_executed(mlp_trace: Path, copy_trace, tmp_path: Path,
                                           case: Case) -> None:
    t0 = copy_trace(mlp_trace, "evil")
    marker = tmp_path / "PWNED"
    payload = f"__import__('pathlib').Path({str(marker)!r}).write_text('pwned')"

    class Evil:
        def __reduce__(self):
            return (eval, (payload,))

    g = Trace(t0).graphs[0]
    (t0 / "runtime.json").write_bytes(pickle.dumps(Evil()))
    (g.dir / "autotune.jsonl").write_bytes(pickle.dumps(Evil()) + b"\n")
    (g.dir / "repro" / "fx_graph_runnable.py").write_text(payload + "\n")
    (g.dir / "code" / "wrapper.py").write_text(payload + "\n")
    snap = plain(g.dir / g.snapshots()[-1].file)
    data = json.loads(snap.read_text())
    for n in data["nodes"]:
        n["target"] = payload
        n["args"] = [{"repr": payload}]
        n["source"] = {"file": payload, "line": 1, "fn": payload, "code": payload}
    snap.write_text(json.dumps(data))
    kernels = json.loads((g.dir / "code" / "kernels.json").read_text())
    kernels["kernels"].append({"name": payload, "kind": "cpp", "file": "../../../../etc/passwd"})
    (g.dir / "code" / "kernels.json").write_text(json.dumps(kernels))

    assert cli("info", str(t0)).returncode in (0, 1)
    assert "Traceback" not in cli("info", "--json", str(t0)).stderr
    cli("svg", str(t0), "-o", str(tmp_path / "e.svg"))
    cli("svg", str(t0), "--kernels", "-o", str(tmp_path / "k.svg"))
    cli("diff", str(mlp_trace), str(t0))
    ui = tui_visit_all(t0)
    assert ui.returncode == 0, ui.stderr[-3000:]
    case.survived = True
    assert not marker.exists(), "a payload from the trace was executed"
    case.data_lost = False
