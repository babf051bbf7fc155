"""A trace's config that names a program, path, module or callable is applied only when the user
confirms that flag by name (docs/security.md): typed at the terminal's prompt, typed in the TUI's
consent dialog, or ``--allow-flag NAME``. Otherwise it is left out, named, and the run goes on."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.faults import hostile
from tests.faults.conftest import Case
from tuidebug.compiler import recompile, trace_config
from tuidebug.compiler.consent import Plan, ask


def test_split_sorts_a_trace_config_and_checks_the_confirmed_value() -> None:
    cfg = {"cpp.cxx": [None, "/tmp/evil"], "max_fusion_size": 3, "no.such_flag": 1,
           "max_autotune": "yes"}
    s = trace_config.split(cfg)
    assert s.apply == {"max_fusion_size": 3}
    assert s.confirm == {"cpp.cxx": [None, "/tmp/evil"]}
    assert set(s.left_out) == {"no.such_flag", "max_autotune"}
    assert trace_config.split(cfg, ["cpp.cxx"]).apply["cpp.cxx"] == [None, "/tmp/evil"]
    # a value confirmed in a dialog applies only while the trace still says that value
    assert "cpp.cxx" in trace_config.split(cfg, {"cpp.cxx": [None, "/tmp/evil"]}).apply
    assert "cpp.cxx" in trace_config.split(cfg, {"cpp.cxx": [None, "/tmp/other"]}).confirm


def test_the_prompt_applies_a_risky_flag_only_when_its_name_is_typed() -> None:
    plan = Plan("recompile", "python", ["x.py"], "/w", {"max_fusion_size": 3},
                confirm={"cpp.cxx": [None, "/tmp/evil\x1b[2J"]}, left_out={"nope": "not a flag"})
    text = "\n".join(plan.lines())
    assert "needs your confirmation by name: cpp.cxx=" in text and "\x1b" not in text
    assert "left out (not applied from the trace): nope (not a flag)" in text

    def answer(typed: str, yes: bool = False) -> tuple[dict, str]:
        err = io.StringIO()
        got = ask(plan, yes=yes, stdin=io.StringIO(typed), stderr=err, interactive=lambda: True)
        return got, err.getvalue()

    got, err = answer("cpp.cxx\ny\n")
    assert got == {"cpp.cxx": [None, "/tmp/evil\x1b[2J"]} and "Type cpp.cxx to apply it" in err
    got, err = answer("y\ny\n")  # the habitual "y" is not the flag's name
    assert got == {} and "leaving out cpp.cxx" in err and "--allow-flag cpp.cxx" in err
    got, err = answer("cpp.cxx\n", yes=True)  # --yes never confirms a flag by name
    assert got == {} and "leaving out cpp.cxx" in err and "Type" not in err


def _marker_compiler(tmp: Path, marker: Path) -> Path:
    """A C++ compiler that leaves ``marker`` behind, then is the real one."""
    cxx = tmp / "evil-cxx.sh"
    cxx.write_text(f"#!/bin/sh\necho \"$TUIDEBUG_TEST_RUN\" >> '{marker}'\nexec g++ \"$@\"\n")
    cxx.chmod(0o755)
    return cxx


@pytest.mark.slow  # recompiles
def test_cli_recompile_runs_a_trace_compiler_only_when_allowed_by_name(
        mlp_trace: Path, copy_trace, tmp_path: Path, case: Case) -> None:
    """A real recompile of a trace whose config sets ``cpp.cxx`` to a program that leaves a
    marker: with --yes alone the flag is left out, named, and the marker never appears; with
    --allow-flag cpp.cxx Inductor runs that program (so the first check could have failed)."""
    case.note = "cpp.cxx from a trace (CLI)"
    trace = copy_trace(mlp_trace, "mlp")
    marker = tmp_path / "COMPILER_RAN"
    cxx = _marker_compiler(tmp_path, marker)
    m = json.loads((trace / "manifest.json").read_text())
    m["config_overrides"] = {"cpp.cxx": [None, str(cxx)]}
    (trace / "manifest.json").write_text(json.dumps(m))

    def start(name: str, *extra: str) -> subprocess.Popen[bytes]:
        env = dict(os.environ, PYTHONPATH=str(ROOT), TUIDEBUG_TEST_RUN=name,
                   TORCHINDUCTOR_CACHE_DIR=str(tmp_path / f"cache-{name}"))
        with open(tmp_path / f"{name}.err", "wb") as err:
            return subprocess.Popen([sys.executable, "-m", "tuidebug.cli", "recompile", "--yes",
                                     str(trace), "--set", "max_fusion_size=2", "-o",
                                     str(tmp_path / name), "--no-code", *extra], env=env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=err)

    # the two recompiles run side by side; the marker names the run that ran the program
    left_out, allowed = start("left-out"), start("allowed", "--allow-flag", "cpp.cxx")
    left_out.wait(600)
    allowed.wait(600)
    err_left = (tmp_path / "left-out.err").read_text()
    err_allowed = (tmp_path / "allowed.err").read_text()
    assert left_out.returncode == 0, err_left[-3000:]
    assert "needs your confirmation by name: cpp.cxx=" in err_left
    assert "leaving out cpp.cxx" in err_left, err_left[-3000:]
    ran = set(marker.read_text().split()) if marker.exists() else set()
    assert "left-out" not in ran, "the trace's compiler ran without being confirmed by name"
    assert "cpp.cxx" not in json.loads((tmp_path / "left-out" / "manifest.json").read_text())[
        "config_overrides"]
    assert allowed.returncode == 0, err_allowed[-3000:]
    assert ran == {"allowed"}, "--allow-flag cpp.cxx did not apply the trace's compiler"
    case.survived = True
    case.data_lost = False


async def test_tui_dialog_applies_a_risky_flag_only_when_its_name_is_typed(
        tmp_path: Path, open_ui, case: Case) -> None:
    """The TUI's consent dialog names the trace's cpp.cxx and offers a field for its name: y
    alone, or a wrong name, leaves it out; typing cpp.cxx and enter applies it (nothing runs
    here: the confirmed recompile is recorded, and its spec checked)."""
    from tuidebug.tui.screens.consent import ConfirmScreen

    case.note = "cpp.cxx from a trace (TUI)"
    marker = tmp_path / "PAYLOAD_RAN"
    h = hostile.build("runs_on_open", tmp_path / "traces", tmp_path / "outside", marker)
    value = json.loads((h.path / "manifest.json").read_text())["config_overrides"]["cpp.cxx"]
    calls: list[recompile.RecompileSpec] = []
    async with open_ui(h.path) as ui:
        ui.app.recompile_confirmed = calls.append  # the very spec that would run

        async def dialog() -> str:
            ui.app.start_recompile({"max_fusion_size": 2})
            await ui.settle()
            assert isinstance(ui.app.screen, ConfirmScreen), ui.text()
            return ui.text()

        text = await dialog()
        assert "needs your confirmation by name: cpp.cxx=" in text, text
        assert "type cpp.cxx below to apply it" in text and "tab" in text, text
        await ui.press("y")  # y: runs, without the flag
        assert len(calls) == 1 and not isinstance(ui.app.screen, ConfirmScreen)
        assert "cpp.cxx" not in calls[-1].overrides and "cpp.cxx" in calls[-1].confirm
        await dialog()
        await ui.press("tab")
        await ui.pilot.press(*"cpp.cx")  # not its name
        await ui.press("enter")
        assert "cpp.cxx" not in calls[-1].overrides and "cpp.cxx" in calls[-1].confirm
        await dialog()
        await ui.press("tab")
        await ui.pilot.press(*"cpp.cxx")
        await ui.settle()
        assert "cpp.cxx" in ui.text()
        await ui.press("enter")
        assert calls[-1].overrides["cpp.cxx"] == value and not calls[-1].confirm
        assert calls[-1].overrides["max_fusion_size"] == 2
        await dialog()
        await ui.press("escape")  # cancel: nothing is recorded
        assert len(calls) == 3
    # the confirmed spec is the one --allow-flag builds, and crosses to the child unchanged
    allowed = recompile.recompile_spec(h.path, {"max_fusion_size": 2}, out=calls[-1].out,
                                       allowed={"cpp.cxx": value})
    assert calls[-1].overrides == allowed.overrides and calls[-1].confirm == allowed.confirm
    assert recompile.RecompileSpec.from_json(calls[-1].to_json()) == calls[-1]
    assert not marker.exists()
    case.survived = True
    case.data_lost = False
