"""Bad input to ``tuidebug trace``: a clear one-line error and a non-zero exit; the CLI where
there is no terminal or the reader of its output goes away."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, ROOT, pythonpath


def tuidebug(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=pythonpath())
    return subprocess.run([sys.executable, "-m", "tuidebug.cli", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=600)


def _error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [l for l in proc.stderr.splitlines() if l.startswith("tuidebug: error:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_missing_script(tmp_path: Path) -> None:
    p = tuidebug("trace", "-o", str(tmp_path / "o"), str(tmp_path / "nope.py"))
    assert p.returncode == 2
    assert "no such script" in _error_line(p)


def _note_line(proc: subprocess.CompletedProcess[str], starts: str) -> str:
    lines = [l for l in proc.stderr.splitlines() if l.startswith(f"[tuidebug] {starts}")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def _plain(script: Path) -> subprocess.CompletedProcess[str]:
    """``python script.py``, untraced: what ``tuidebug trace`` must end as."""
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          cwd=script.parent, timeout=600)


@pytest.mark.slow  # runs torch
@pytest.mark.parametrize("body, said", [
    ("import torch\nraise ValueError('bad config')\n",
     "the script raised an exception before compiling anything"),
    ("import sys, torch\nprint('bye')\nsys.exit(7)\n", "the script exited with code 7"),
    ("import sys, torch\nsys.exit(-1)\n", "the script exited with code 255"),
    ("import torch\nraise KeyboardInterrupt\n", "the script raised an exception"),
])
def test_trace_ends_as_the_script_does(tmp_path: Path, body: str, said: str) -> None:
    """Tracing never changes the outcome of the user's job: ``tuidebug trace`` exits with the
    script's own code (an uncaught KeyboardInterrupt: killed by SIGINT, as Python ends), its
    output the script's; what tuidebug has to say is a note and the trace (on main: exit 3 for
    all but sys.exit(7), which was 1)."""
    s = tmp_path / "s.py"
    s.write_text(body)
    plain = _plain(s)
    p = tuidebug("trace", "-o", str(tmp_path / "o"), str(s))
    assert p.returncode == plain.returncode, p.stderr[-3000:]
    assert p.stdout.startswith(plain.stdout), p.stdout
    assert said in _note_line(p, "the script"), p.stderr
    assert "tuidebug: error:" not in p.stderr, p.stderr
    if "Error" in plain.stderr:
        assert plain.stderr.strip().splitlines()[-1] in p.stderr


@pytest.mark.slow  # runs torch
def test_script_that_never_compiles(tmp_path: Path) -> None:
    s = tmp_path / "plain.py"
    s.write_text("import torch\nprint(torch.ones(2).sum())\n")
    p = tuidebug("trace", "-o", str(tmp_path / "o"), str(s))
    assert p.returncode == 0  # as untraced: nothing compiled is a note, not a failure
    line = _note_line(p, "the script reached")  # what Dynamo did instead: here nothing
    assert "the script reached no Inductor graph" in line, line
    assert "Dynamo was never handed a frame" in line, line


def test_unwritable_output_directory(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):  # root ignores permissions: use a path under a file
            target = tmp_path / "afile"
            target.write_text("x")
            out = target / "trace"
        else:
            out = ro / "trace"
        p = tuidebug("trace", "-o", str(out), str(EXAMPLES / "mlp.py"))
    finally:
        ro.chmod(0o700)
    assert p.returncode == 2
    assert "cannot write the trace" in _error_line(p)


def test_info_on_a_non_trace(tmp_path: Path) -> None:
    p = tuidebug("info", str(tmp_path))
    assert p.returncode == 2
    assert "not a tuidebug trace" in _error_line(p)
    # info names anything the one door opens (a trace, an archive, a log): a missing path is
    # said as the path the user typed, whatever it was meant to be
    p = tuidebug("info", str(tmp_path / "missing"))
    line = _error_line(p)
    assert p.returncode == 2 and f"no such file or directory: {tmp_path / 'missing'}" in line, line


@pytest.mark.slow  # runs torch (its argparse exits before the compile)
def test_options_after_the_script(tmp_path: Path) -> None:
    """``tuidebug trace script.py -o DIR``: -o goes to the script, whose argparse exits with 2
    before compiling; tuidebug says so (not "reached no Inductor graph") and hints at the right
    order."""
    s = tmp_path / "args.py"
    s.write_text("import argparse, torch\nap = argparse.ArgumentParser()\n"
                 "ap.add_argument('--n', type=int)\nap.parse_args()\n"
                 "torch.compile(torch.relu)(torch.randn(4))\n")
    p = tuidebug("trace", str(s), "-o", str(tmp_path / "o"), cwd=tmp_path)
    assert p.returncode == 2  # the script's own (argparse's) code
    line = _note_line(p, "the script exited")
    assert "the script exited with code 2 before compiling" in line
    assert "unrecognized arguments: -o" in line and "reached no Inductor graph" not in line
    assert "tuidebug's options go before the script: tuidebug trace -o DIR" in p.stderr


def test_set_is_validated_before_tracing(tmp_path: Path) -> None:
    s = tmp_path / "s.py"
    s.write_text("raise SystemExit('not run')\n")
    for bad, expected in (("size_assert=0", "unknown Inductor flag 'size_assert'; did you mean: "
                                            "size_asserts"),
                          ("size_asserts=maybe", "size_asserts expects a bool (true/false), got "
                                                 "'maybe'"),
                          ("max_fusion_size", "--set takes NAME=VALUE")):
        p = tuidebug("trace", "-o", str(tmp_path / "o"), "--set", bad, str(s))
        assert p.returncode == 2, p.stderr
        assert expected in _error_line(p)
        assert "Traceback" not in p.stderr and not (tmp_path / "o").exists()


@pytest.mark.slow  # compiles
def test_set_values_are_typed_and_script_errors_shown(tmp_path: Path) -> None:
    """``--set size_asserts=False`` reaches Inductor as the bool False (not the string); a script
    that raises after compiling is reported by ``tuidebug info`` (text and JSON), not as OK."""
    s = tmp_path / "late.py"
    s.write_text("import torch\ntorch.compile(torch.relu)(torch.randn(4))\n"
                 "raise RuntimeError('after compiling')\n")
    out = tmp_path / "o"
    p = tuidebug("trace", "-o", str(out), "--set", "size_asserts=False", "--set",
                 "max_fusion_size=8", str(s))
    assert p.returncode == 1, p.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config_overrides"] == {"size_asserts": False, "max_fusion_size": 8}
    config = json.loads((out / "config.json").read_text())
    assert config["values"]["size_asserts"] is False and config["values"]["max_fusion_size"] == 8
    info = tuidebug("info", "--json", str(out))
    data = json.loads(info.stdout)
    assert data["status"] == "script_failed" and "error" not in data  # the compile was fine
    assert data["script_error"] == {"type": "RuntimeError", "message": "after compiling",
                                    "after_compiling": True}
    text = " ".join(tuidebug("info", str(out)).stdout.split())
    assert "SCRIPT FAILED (COMPILED OK; THE SCRIPT RAISED)" in text
    assert "raised RuntimeError after compiling: after compiling" in text


@pytest.mark.slow  # compiles
def test_a_compile_dynamo_refuses_is_said_to_be_torch_compiles(tmp_path: Path) -> None:
    """``mark_dynamic`` on a size the code specializes: Inductor compiles the graph, then Dynamo
    refuses the frame (ConstraintViolationError) and torch.compile raises it. ``trace`` said
    "the script raised after compiling"; it names the compile that failed, as ``info`` does.
    The exit code is the script's, as untraced."""
    s = tmp_path / "mark.py"
    s.write_text("import torch\n\n\ndef f(x):\n    if x.shape[0] == 8:\n        return x.sin()\n"
                 "    return x.cos()\n\n\nx = torch.randn(8, 4)\n"
                 "torch._dynamo.mark_dynamic(x, 0)\ntorch.compile(f)(x)\n")
    out = tmp_path / "o"
    p = tuidebug("trace", "-o", str(out), str(s))
    assert p.returncode == 1, p.stderr[-3000:]
    assert ("[tuidebug] torch.compile raised: Dynamo's compile 0/0 (f at mark.py:4) failed"
            in p.stderr), p.stderr[-3000:]
    assert "the script raised after compiling" not in p.stderr
    data = json.loads(tuidebug("info", "--json", str(out)).stdout)
    assert data["script_error"]["in_compile"] == "0/0", data["script_error"]
    assert any(a["id"] == "maybe_mark_dynamic x 0" for a in data["advice"]["suggestions"])


def test_info_into_a_closed_pipe(mlp_trace: Path) -> None:
    """``tuidebug info TRACE | head``: the reader goes away; tuidebug stops quietly."""
    env = dict(os.environ, PYTHONPATH=pythonpath())
    for args in (["info", str(mlp_trace)], ["info", "--json", str(mlp_trace)]):
        proc = subprocess.Popen([sys.executable, "-m", "tuidebug.cli", *args], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        proc.stdout.close()  # before tuidebug writes anything
        err = proc.stderr.read()
        assert proc.wait(timeout=60) == 1
        assert err == "", err


def test_info_on_a_trace_imports_only_what_it_reads(mlp_trace: Path) -> None:
    """``tuidebug info TRACE`` starts in well under a second: it imports neither the other
    commands' modules (the compiler's, the MCP server's) nor the importers, the archive reader
    or the job readers, which a trace folder does not need (issue 30: importing them was most of
    info's time). What it prints is the summary, as before."""
    code = ("import sys, io, contextlib\n"
            "from tuidebug.cli import main\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out):\n"
            f"    rc = main(['info', {str(mlp_trace)!r}])\n"
            "print(rc, 'compiled graphs' in out.getvalue())\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('tuidebug'))))\n")
    env = dict(os.environ, PYTHONPATH=pythonpath())
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    status, modules = p.stdout.splitlines()[-2:]
    assert status == "0 True", p.stdout
    loaded = set(modules.split())
    assert "tuidebug.trace.queries.summary" in loaded and "tuidebug.cli.viewing" in loaded
    for unneeded in ("tuidebug.trace.importers", "tuidebug.trace.importers.debug_dir",
                     "tuidebug.trace.archive.unpack", "tuidebug.trace.jobs.job", "tuidebug.mcp",
                     "tuidebug.cli.compiling", "tuidebug.cli.agents", "tuidebug.cli.sharing",
                     "tuidebug.compiler", "tuidebug.trace.diff"):
        assert unneeded not in loaded, unneeded
    # nor what only writing, comparing or timed calls need (stdlib modules of milliseconds each)
    code = code.replace("print(' '.join(sorted(m for m in sys.modules if m.startswith('tuidebug'))))",
                        "print(' '.join(sorted(sys.modules)))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120)
    loaded = set(p.stdout.splitlines()[-1].split())
    assert "json" in loaded
    for unneeded in ("tempfile", "socket", "statistics", "difflib", "hashlib"):
        assert unneeded not in loaded, unneeded


@pytest.mark.slow  # traces the transformer block
def test_demo_without_a_terminal(tmp_path: Path) -> None:
    """No terminal (CI, a pipe): the demo prints the summary and how to open the UI instead of
    waiting in a UI nobody sees."""
    env = dict(os.environ, PYTHONPATH=pythonpath())
    p = subprocess.run([sys.executable, "-m", "tuidebug.cli", "demo", "-o", str(tmp_path / "d")],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "compiled graphs" in p.stdout and "0_0-backward" in p.stdout
    assert f"tuidebug open {tmp_path / 'd'}" in p.stderr


# -- python -m tuidebug, pack, completion ---------------------------------------------------------

FIXTURE = ROOT / "tests" / "fixtures" / "cuda_fail_runtime"


def test_python_dash_m_tuidebug_is_the_command() -> None:
    env = dict(os.environ, PYTHONPATH=pythonpath())
    for args in (["--version"], ["--help"], ["pack", "--help"], ["info", "/nonexistent"]):
        a = subprocess.run([sys.executable, "-m", "tuidebug", *args], capture_output=True,
                           text=True, env=env, timeout=60)
        b = tuidebug(*args)
        assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr)
        assert a.stdout or a.stderr


def test_pack_then_info_reads_the_archive(tmp_path: Path) -> None:
    out = tmp_path / "bug.tar.gz"
    p = tuidebug("pack", str(FIXTURE), "-o", str(out), "--redact")
    assert p.returncode == 0, p.stderr
    assert "redacted" in p.stderr and out.stat().st_size > 1000
    again = tuidebug("pack", str(FIXTURE), "-o", str(out))
    assert again.returncode == 2 and "exists" in _error_line(again)
    env = dict(os.environ, PYTHONPATH=pythonpath(), TUIDEBUG_ARCHIVE_CACHE=str(tmp_path / "c"))
    info = subprocess.run([sys.executable, "-m", "tuidebug", "info", "--json", str(out)],
                          capture_output=True, text=True, env=env, timeout=120)
    data = json.loads(info.stdout)
    assert data["status"] == "failed" and str(tmp_path / "c") in info.stderr
    not_a_trace = tmp_path / "junk.tar.gz"
    not_a_trace.write_bytes(b"\x1f\x8b\x08\x00junk")
    bad = tuidebug("info", str(not_a_trace))
    assert bad.returncode == 2 and "not a readable .tar.gz" in _error_line(bad)


def test_bash_completion_from_the_parser(tmp_path: Path) -> None:
    script = tmp_path / "c.bash"
    script.write_text(tuidebug("completion", "bash").stdout)
    probe = """source "$1"
t() { COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMPREPLY=()
      _tuidebug_complete; echo "${COMPREPLY[*]}"; }
t tuidebug se; t tuidebug serve --al; t tuidebug flags demo --device ""; t tuidebug completion f
t tuidebug serve --port ""
"""
    p = subprocess.run(["bash", "-c", probe, "bash", str(script)], capture_output=True,
                       text=True, timeout=60)
    assert p.stdout.splitlines() == ["serve", "--allow-run", "cpu cuda", "fish", ""], p.stderr


def test_zsh_and_fish_completion(tmp_path: Path) -> None:
    zsh, fish = shutil.which("zsh"), shutil.which("fish")
    if not (zsh or fish):
        pytest.skip("neither zsh nor fish is installed here (apt-get install zsh fish)")
    bin_dir = tmp_path / "bin"  # a `tuidebug` on PATH for the shells to complete
    bin_dir.mkdir()
    (bin_dir / "tuidebug").write_text("#!/bin/sh\n")
    (bin_dir / "tuidebug").chmod(0o755)
    path = f"{bin_dir}:{os.environ['PATH']}"
    if zsh:
        # an interactive zsh in a pseudo-terminal (zpty), typing TAB as a user does. Each step
        # waits for what it expects on the screen (up to 40 s) instead of sleeping a fixed time:
        # on a busy machine compinit took longer than the sleeps, the keys were typed before the
        # prompt and the test saw no completion (it failed under load, passed when idle).
        (tmp_path / "_tuidebug").write_text(tuidebug("completion", "zsh").stdout)
        driver = f"""zmodload zsh/zpty
seen=''
wait_for() {{
  local deadline=$(( SECONDS + 40 )) chunk
  while (( SECONDS < deadline )); do
    if zpty -r -t z chunk; then seen+=$chunk; [[ $seen == *$1* ]] && return 0
    else sleep 0.1; fi
  done
  return 1
}}
zpty z "PATH={path} HOME={tmp_path} zsh -f -i"
zpty -w z 'PS1="READ""Y> "; autoload -U compinit; compinit -u -D; source {tmp_path / '_tuidebug'}'
wait_for 'READY> '
seen=''
zpty -w -n z $'tuidebug ser\\t'
wait_for 'serve'
zpty -w -n z $'--allow\\t'
wait_for '--allow-run'
print -rn -- $seen
zpty -d z
"""
        p = subprocess.run([zsh, "-f", "-c", driver], capture_output=True, text=True,
                           timeout=150)
        typed = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x08", "", p.stdout)
        assert re.search(r"tuidebug serve\s+--allow-run", typed), p.stdout[-2000:]
    if fish:
        (tmp_path / "c.fish").write_text(tuidebug("completion", "fish").stdout)
        p = subprocess.run([fish, "--no-config", "-c", f"source {tmp_path / 'c.fish'}; "
                            "complete -C 'tuidebug pa'; complete -C 'tuidebug serve --allow'"],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, PATH=path, HOME=str(tmp_path)))
        assert p.stdout.splitlines()[0].startswith("pack\t")
        assert p.stdout.splitlines()[1].startswith("--allow-run\t"), p.stdout + p.stderr


@pytest.mark.parametrize("value", ["0", "-3", "nan"])
def test_distributed_timeout_must_be_positive(tmp_path: Path, value: str) -> None:
    """--timeout 0 would stop the job the moment torchrun started it (a negative one too)."""
    p = tuidebug("trace", "--nproc-per-node", "2", "--timeout", value, "-o",
                 str(tmp_path / "o"), str(EXAMPLES / "mlp.py"))
    assert p.returncode == 2 and "--timeout" in p.stderr and "positive" in p.stderr, p.stderr
    assert not (tmp_path / "o").exists()


def test_every_rank_is_profiled_and_refuses_no_check_up_front(tmp_path: Path) -> None:
    """--profile N reaches each rank's ``tuidebug trace`` (it was dropped); with --no-check the
    launcher refuses before torchrun starts any rank."""
    from tuidebug.cli import build_parser
    from tuidebug.cli.distributed import _passed_trace_options

    ns = build_parser().parse_args(["trace", "--nproc-per-node", "2", "--profile", "3", "-o",
                                    str(tmp_path / "o"), "x.py"])
    assert _passed_trace_options(ns)[-2:] == ["--profile", "3"]
    assert "--profile" not in _passed_trace_options(build_parser().parse_args(
        ["trace", "--nproc-per-node", "2", "-o", str(tmp_path / "o"), "x.py"]))
    p = tuidebug("trace", "--nproc-per-node", "2", "--profile", "3", "--no-check", "-o",
                 str(tmp_path / "o"), str(EXAMPLES / "mlp.py"))
    assert p.returncode == 2 and "drop --no-check" in _error_line(p)
    assert not (tmp_path / "o").exists()


def test_perfetto_of_the_current_folder_is_named_for_it(mlp_trace: Path, copy_trace) -> None:
    """``tuidebug perfetto .`` inside a trace: the file is named for the trace's folder (it was
    ``.perfetto.json``, a hidden file)."""
    trace = copy_trace(mlp_trace, "mlp-run")
    p = tuidebug("perfetto", ".", cwd=trace)
    assert p.returncode == 0, p.stderr
    assert (trace / "mlp-run.perfetto.json").is_file() and not (trace / ".perfetto.json").exists()
    assert "wrote mlp-run.perfetto.json" in p.stdout


@pytest.mark.parametrize("n", ["0", "-2"])
def test_nproc_per_node_must_be_at_least_one(tmp_path: Path, n: str) -> None:
    """torchrun itself answers 0 or a negative count with a bare AssertionError traceback."""
    p = tuidebug("trace", "--nproc-per-node", n, "-o", str(tmp_path / "o"),
                 str(EXAMPLES / "mlp.py"))
    assert p.returncode == 2 and "at least 1" in _error_line(p), p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "o").exists()


def test_only_commands_that_end_collect_less_often() -> None:
    """A command that ends on its own raises the collector's thresholds (reading a trace makes
    no cycles); the TUI and the servers, which run for hours, keep Python's pace, and so do
    ``minify`` and ``bisect``, which drive torch's compiler (it makes cycles): the thresholds
    each command runs with, seen from inside it."""
    from tuidebug.cli import COMMANDS, build_parser

    stays = {c.name for c in COMMANDS if c.stays}
    assert stays == {"open", "demo", "serve", "mcp"}
    assert {c.name for c in COMMANDS if c.compiles} == {"minify", "bisect"}
    for name in ("info", "open", "minify", "bisect"):
        ns = build_parser(only=name).parse_args([name, "TRACE"])
        assert ns.gc_as_usual == (name in stays or name in ("minify", "bisect"))
    code = ("import gc, io, contextlib, json, sys\n"
            "import tuidebug.cli.viewing as v, tuidebug.cli.minifying as m\n"
            "from tuidebug.cli import main\n"
            "seen = {}\n"
            "def seeing(module, name):\n"
            "    run = getattr(module, name)\n"
            "    def inside(ns):\n"
            "        seen[ns.command] = gc.get_threshold()\n"
            "        return run(ns)\n"
            "    setattr(module, name, inside)\n"
            "for module, name in ((v, 'cmd_info'), (m, 'cmd_minify'), (m, 'cmd_bisect')):\n"
            "    seeing(module, name)\n"
            "before = gc.get_threshold()\n"
            "for argv in (['minify', '/nonexistent'], ['bisect', '/nonexistent'],\n"
            "             ['info', '/nonexistent']):\n"
            "    with contextlib.redirect_stderr(io.StringIO()):\n"
            "        main(argv)\n"
            "print(json.dumps([before, seen, gc.get_freeze_count()]))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=pythonpath()))
    before, seen, frozen = json.loads(p.stdout.splitlines()[-1])
    assert set(seen) == {"minify", "bisect", "info"}, p.stdout + p.stderr
    assert seen["minify"] == seen["bisect"] == before, seen  # Python's defaults
    assert seen["info"] == [10_000, 20, 20] != before and frozen > 0, p.stdout + p.stderr

@pytest.mark.slow  # runs torch
def test_a_script_that_exits_256_ends_as_python_does_and_is_not_failed(tmp_path: Path) -> None:
    """``sys.exit(256)`` ends a Python process with 0: the trace records no exit code, so the
    trace (and a rank of a job) is not 'script failed' while the process exited 0."""
    import json

    s = tmp_path / "s.py"
    s.write_text("import sys, torch\nsys.exit(256)\n")
    assert _plain(s).returncode == 0
    out = tmp_path / "o"
    p = tuidebug("trace", "-o", str(out), str(s))
    assert p.returncode == 0, p.stderr[-3000:]
    info = json.loads(tuidebug("info", "--json", str(out)).stdout)
    assert info.get("status") != "script_failed" and not info.get("script_failed"), info
    assert "script_exit_code" not in json.loads((out / "manifest.json").read_text()), info
