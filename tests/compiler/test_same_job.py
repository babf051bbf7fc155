"""Tracing never changes the outcome of the user's job (``tests/fixtures/same_job.py``, run
plainly and under ``tuidebug trace --profile``: one tiny module and one tiny function,
compiled once): another thread's output while ``--profile`` times the calls, and what a
script can observe of what ``torch.compile`` returned, are as without tuidebug."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, pythonpath

pytestmark = pytest.mark.slow
SCRIPT = ROOT / "tests" / "fixtures" / "same_job.py"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    out = tmp_path_factory.mktemp("same") / "trace"
    plain = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                           timeout=600)
    def trace(*extra: str) -> subprocess.CompletedProcess[str]:
        p = subprocess.run(
            [sys.executable, "-m", "tuidebug.cli", "trace", *extra, "-o",
             str(out.with_name(out.name + "".join(extra))), str(SCRIPT)],
            capture_output=True, text=True, timeout=900,
            env=dict(os.environ, PYTHONPATH=pythonpath()))
        assert p.returncode == 0, p.stderr[-3000:]
        return p

    assert plain.returncode == 0, plain.stderr[-3000:]
    # with the eager check only (no --profile: no timed calls of the compiled module), and with
    # --profile (the whole call timed, compiled and eager, right after the first call)
    checked, traced = trace(), trace("--profile", "3")
    return {"plain": plain, "checked": checked, "traced": traced,
            "trace": out.with_name(out.name + "--profile3")}


def _ticks(text: str, word: str) -> list[int]:
    # found anywhere: two threads printing at once may glue a line to another's (print writes
    # the text, then the newline: 'eager, interleavedetick 2193')
    return sorted(int(n) for n in re.findall(rf"{word} (\d+)", text))


def test_other_threads_output_is_intact_while_the_calls_are_timed(runs) -> None:
    """While ``--profile`` times the whole call (compiled and eager, dozens of times), the
    script's other thread goes on printing to stdout and stderr: every line reaches its
    stream (on main the timing swapped the process's ``sys.stdout``/``sys.stderr`` for the
    null device, and the other thread's lines of that window were lost). The timed thread's
    own prints during the repeats are dropped: the forward's print is there as often as
    untraced."""
    plain, traced = runs["plain"], runs["traced"]
    (n,) = (int(x) for x in re.findall(r"^ticks (\d+)$", traced.stdout, re.M))
    assert n > 0
    assert _ticks(traced.stdout, "tick") == list(range(n)), "a tick line went missing"
    assert _ticks(traced.stderr, "etick") == list(range(n)), "an etick line went missing"
    calls = json.loads((runs["trace"] / "profile.json").read_text())["calls"]
    assert [c["callable"] for c in calls] == ["Net", "body"]  # both timed: the window was open
    assert all(c["rounds"] >= 3 for c in calls), calls
    # (not the source line info quotes: print("forward ran"))
    ran = [len(re.findall(r'forward ran(?!")', p.stdout)) for p in (traced, plain)]
    assert ran == [3, 3], ran


def test_what_torch_compile_returned_is_the_scripts_to_see(runs) -> None:
    """Every ``fact`` the script prints of what torch.compile returned is the untraced one,
    traced with the eager check alone and with ``--profile``: the module's type, no hooks on
    it (main registered one forward hook, two with --profile), its state_dict, deepcopy and
    pickling; the function's type and ``__wrapped__`` (main's wrapper had the compiled
    function as its ``__wrapped__``); ``torch.compiler.disable`` of each runs the original
    eagerly (of main's function wrapper it ran the compiled code: 1.0, not 2.0); the outputs
    are the same and no tensor of the call is left alive (main held the first graph's output,
    never returned: alive 1 without --profile)."""
    def facts(text: str) -> dict[str, str]:
        return dict(re.findall(r"^fact (\w+) (.*)$", text, re.M))

    plain = facts(runs["plain"].stdout)
    assert len(plain) == 13, plain
    assert facts(runs["checked"].stdout) == plain
    assert facts(runs["traced"].stdout) == plain
    assert plain["module_hooks"] == "0" and plain["function_wraps_body"] == "True"
    assert plain["disabled_function"] == "2.0" and plain["alive"] == "0"


def test_the_eager_check_names_outputs_by_what_the_call_returned(runs) -> None:
    """The eager check's listener still hears the user's call: the function's one output is
    named by where its call returned it (``['y']``)."""
    from tuidebug.trace.format.reader import Trace

    t = Trace(runs["trace"])
    checks = t.runtime["checks"]
    names = [o.get("name") for c in checks.values() for o in c["outputs"]]
    assert len(checks) == 3 and "['y']" in names, names


def test_a_rerun_ends_with_the_scripts_negative_exit_as_python_does(tmp_path: Path) -> None:
    """``advise --try`` and the numerics re-runs start ``run_script`` without ``--own-exit``:
    a script that compiled and then called ``sys.exit(-1)`` must end with 255 as under
    ``python``, not die of a signal (it died of SIGHUP: -1 read as a signal number)."""
    script = tmp_path / "neg_exit.py"
    script.write_text("import sys, torch\n"
                      "f = torch.compile(lambda x: torch.relu(x) + 1)\n"
                      "f(torch.ones(4))\n"
                      "sys.exit(-1)\n")
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           timeout=600, env=dict(os.environ, PYTHONPATH=pythonpath()))
    rerun = subprocess.run([sys.executable, "-m", "tuidebug.compiler.run_script", "--out",
                            str(tmp_path / "t"), "--no-check", str(script)],
                           capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, PYTHONPATH=pythonpath()))
    assert plain.returncode == 255
    assert rerun.returncode == 255, (rerun.returncode, rerun.stderr[-2000:])
