"""Symbols, guards, specializations and recompiles, captured from the real compiler
(examples/dynamic_shapes.py, one trace shared by every test) and read back."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, plain, pythonpath
from tuidebug.trace.queries import recompiles
from tuidebug.trace.queries.dynamic import compile_dynamic, guard_groups
from tuidebug.trace.format.reader import Trace

EXAMPLE = EXAMPLES / "dynamic_shapes.py"


def line_of(text: str) -> int:
    """The line of the example that holds ``text``."""
    lines = EXAMPLE.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def info_json(trace: Path) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=pythonpath())
    proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", "info", "--json", str(trace)],
                          capture_output=True, text=True, env=env, timeout=120)
    return {c["id"]: c for c in json.loads(proc.stdout)["compiles"]}


def test_symbols_of_automatic_dynamic(dynamic_trace: Path) -> None:
    t = Trace(dynamic_trace)
    assert compile_dynamic(t, "0/0")["symbols"] == []  # the first compile is static
    (sym,) = compile_dynamic(t, "0/1")["symbols"]
    assert sym["source"] == "L['x'].size()[0]" and sym["kind"] == "backed"
    assert sym["hint"] == 3 and sym["lower"] == 2  # the second call's batch, sizes >= 2
    assert sym["range"].startswith(f"2 <= {sym['name']}")
    assert sym["user_line"]["line"] == line_of("return (x * 2).sum(0)")
    assert Path(sym["user_line"]["file"]).name == EXAMPLE.name


def test_specialization_of_a_dimension_marked_dynamic(dynamic_trace: Path) -> None:
    d = compile_dynamic(Trace(dynamic_trace), "1/0")
    (sp,) = d["specializations"]
    assert sp["source"] == "L['x'].size()[0]" and sp["value"] == 8
    assert sp["guard"] == f"Eq({sp['symbol']}, 8)"
    assert sp["user_line"]["line"] == line_of("if x.shape[0] == 8:")
    assert sp["marked_dynamic"] is True
    assert d["symbols"][0]["replaced_by"] == "8"
    # the source around the line, as capture read it from the example
    source = EXAMPLE.read_text().splitlines()
    at = sp["user_line"]["line"]
    assert sp["user_line"]["context"] == [{"line": n, "code": source[n - 1]}
                                          for n in range(at - 3, at + 4)]


def test_unbacked_symbol_and_its_guards(dynamic_trace: Path) -> None:
    t = Trace(dynamic_trace)
    d = compile_dynamic(t, "2/0")
    u0 = next(s for s in d["symbols"] if s["name"] == "u0")
    assert u0["kind"] == "unbacked" and u0["hint"] is None
    assert (u0["lower"], u0["upper"]) == (0, 6)  # torch._check(k >= 0), k <= x.shape[0]
    assert u0["user_line"]["line"] == line_of(".sum().item()")
    shape = [g for g in t.compile_shapes("2/0")["guards"] if g.get("expr")]
    by_expr = {g["expr"]: g for g in shape}
    assert by_expr["u0 >= 0"]["user_line"]["line"] == line_of("torch._check(k >= 0)")
    assert by_expr["u0 <= 6"]["user_line"]["line"] == line_of("torch._check(k <= x.shape[0])")
    # no user line comes from tuidebug's own wrappers
    for s in d["symbols"]:
        assert "tuidebug" not in str((s.get("user_line") or {}).get("file"))
    # AOTAutograd makes the .item() symbol again (u1…, then renamed to u0) with no user stack:
    # its line is the one of the first FX node that uses it (or the symbol it became)
    recorded = {s["name"]: s.get("user_line") for s in t.compile_shapes("2/0")["symbols"]}
    later = [s for s in d["symbols"] if not recorded[s["name"]]]
    assert later, "this torch recorded a user line for every symbol: nothing was derived"
    for s in later:
        assert s["user_line"]["line"] == line_of(".sum().item()"), s
        assert s["user_line_from"].startswith("node item of 2_0-inference (dynamo)"), s
    assert u0["user_line_from"] is None  # recorded, not derived
    # a guard of the guard tree names a shortened path: capture found the file for its context
    match = next(g for g in t.compile_shapes("2/0")["guards"] if g["kind"] == "TENSOR_MATCH")
    assert not Path(match["user_line"]["file"]).is_absolute()
    assert {"line": line_of("def take(x):"), "code": EXAMPLE.read_text().splitlines()[
        line_of("def take(x):") - 1]} in match["user_line"]["context"]


def test_an_unbacked_symbol_without_a_line_takes_its_first_node(dynamic_trace: Path,
                                                               tmp_path: Path) -> None:
    """With its recorded line removed, u0 takes the line of the first node using it (the
    .item() of the Dynamo graph), and says so."""
    t = tmp_path / "t"
    shutil.copytree(dynamic_trace, t)
    for name in ("2_0.shapes.json", "2_0.shapes-brief.json"):  # the brief has the symbols too
        path = plain(t / "compiles" / name)
        data = json.loads(path.read_text())
        for s in data["symbols"]:
            s["user_line"] = None
        path.write_text(json.dumps(data))
    u0 = next(s for s in compile_dynamic(Trace(t), "2/0")["symbols"] if s["name"] == "u0")
    assert u0["user_line"]["line"] == line_of(".sum().item()")
    assert u0["user_line_from"] == "node item of 2_0-inference (dynamo)"


def test_guards_structured_and_grouped(dynamic_trace: Path) -> None:
    t = Trace(dynamic_trace)
    guards = t.compile_shapes("0/1")["guards"]
    match = [g for g in guards if g["kind"] == "TENSOR_MATCH"]
    assert match and match[0]["source"] == "L['x']"
    assert "size=[None, 4]" in match[0]["code"]  # the batch is dynamic, the 4 is not
    groups = guard_groups(t, "0/1")
    assert {"L['x']", "(global)"} <= set(groups)
    sym = compile_dynamic(t, "0/1")["symbols"][0]["name"]
    texts = [g["text"] for g in groups["L['x']"]]
    assert any(sym in x and "L['x'].size()[0]" in x for x in texts)


def test_each_recompile_explained(dynamic_trace: Path) -> None:
    t = Trace(dynamic_trace)
    r = compile_dynamic(t, "0/1")["recompile"]
    assert r["previous"] == "0/0" and r["guard_of"] == "0/0"
    assert r["source"] == "L['x'].size()[0]" and r["expected"] == "2"
    assert r["failing_value"] == 3  # read from the frame's inputs when Dynamo recompiled
    assert "maybe_mark_dynamic(x, 0)" in r["suggestion"] and not r["limit_hit"]
    assert compile_dynamic(t, "0/0")["recompile"] is None
    static = compile_dynamic(t, "3/1")["recompile"]
    assert "dynamic=False" in static["suggestion"]
    limit = compile_dynamic(t, "3/2")["recompile"]
    assert limit["limit_hit"] and limit["limit"] == 2 and limit["previous"] == "3/1"
    assert limit["failing_value"] == 4 and "recompile_limit" in limit["suggestion"]


def test_info_json_and_text(dynamic_trace: Path) -> None:
    compiles = info_json(dynamic_trace)
    assert compiles["0/1"]["symbols"][0]["source"] == "L['x'].size()[0]"
    assert compiles["1/0"]["specializations"][0]["value"] == 8
    assert compiles["3/2"]["recompile"]["limit_hit"] is True
    env = dict(os.environ, PYTHONPATH=pythonpath())
    text = subprocess.run([sys.executable, "-m", "tuidebug.cli", "info", str(dynamic_trace)],
                          capture_output=True, text=True, env=env, timeout=120).stdout
    text = " ".join(text.split())
    assert "RECOMPILE LIMIT HIT (2)" in text
    assert "specialized: L['x'].size()[0] = 8" in text and "(marked dynamic)" in text


def test_a_damaged_shapes_file_is_reported_and_the_rest_read(dynamic_trace: Path,
                                                             tmp_path: Path) -> None:
    t = tmp_path / "t"
    shutil.copytree(dynamic_trace, t)
    brief = t / "compiles" / "0_1.shapes-brief.json"  # the symbols are read from the brief
    data = json.loads(brief.read_text())
    data["symbols"][0]["hint"] = {"not": "a hint"}
    data["symbols"][0]["user_line"] = {"file": "x.py", "line": "\x1b[31m"}
    brief.write_text(json.dumps(data))
    path = plain(t / "compiles" / "0_1.shapes.json")
    data = json.loads(path.read_text())
    data["symbols"][0]["hint"] = {"not": "a hint"}
    data["symbols"][0]["user_line"] = {"file": "x.py", "line": "\x1b[31m"}
    data["guards"].append({"kind": 3})
    data["guards"][0]["user_line"] = {"file": "x.py", "line": 3, "context": [
        {"line": "3", "code": "x"}, {"line": 4, "code": 5}, "text", {"line": True, "code": "b"},
        {"line": 5, "code": "\x1b]52;c;aGk=\x07" + "y" * 10_000}] + [{"line": 6, "code": ""}] * 99}
    path.write_text(json.dumps(data))
    trace = Trace(t)
    d = compile_dynamic(trace, "0/1")
    assert d["symbols"][0]["hint"] is None
    # the damaged line is dropped: the symbol's line is then its first node's, and says so
    assert d["symbols"][0]["user_line_from"].startswith("node ")
    context = trace.compile_shapes("0/1")["guards"][0]["user_line"]["context"]
    assert context[0]["line"] == 5 and len(context[0]["code"]) == 300  # cut, kept as text
    assert len(context) == 15 - 4  # at most 15 entries read, the 4 wrongly typed dropped
    assert len(trace.compile_shapes("0/1")["guards"]) == len(data["guards"]) - 1
    assert any("0_1.shapes.json" in str(p) for p in trace.problems)


def test_recompile_rules_on_other_guards() -> None:
    """The failed guards Dynamo words differently (from its guard failure messages)."""
    compiles = {"5/0": {}, "5/1": {"recompile_reasons": ["5/0: L['k'] == 3"]}}
    r = recompiles.explain("5/1", compiles)
    # an int the trace has no shapes record for: a constant, whether a symbol later unknown
    assert r["source"] == "L['k']" and r["expected"] == "3", r
    assert r["suggestion"].startswith("the Python int 'k' is a constant of the compile"), r
    compiles["5/1"]["recompile_reasons"] = ["5/0: tensor 'y' dtype mismatch. expected Float, "
                                            "actual Half"]
    assert "dtype" in recompiles.explain("5/1", compiles)["suggestion"]
    compiles["5/1"]["recompile_reasons"] = ["5/0: L['x'].size()[0] <= 4096"]
    assert recompiles.explain("5/1", compiles)["source"] == "L['x'].size()[0]"
    assert recompiles.previous_compile("5/0", compiles) is None


@pytest.mark.slow  # compiles
def test_a_torch_trace_import_fills_what_the_log_has(tmp_path: Path) -> None:
    """The same example under TORCH_TRACE, imported: symbols, specializations, user lines and
    each recompile come from the log's records (it has no ShapeEnv: ranges are as created)."""
    from tests.conftest import clean_env

    log = tmp_path / "log"
    env = clean_env({"TORCH_TRACE": str(log), "PYTHONPATH": pythonpath()})
    subprocess.run([sys.executable, str(EXAMPLE)], env=env, capture_output=True, timeout=600)
    out = tmp_path / "imported"
    proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", "import", str(log), "-o",
                           str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert out.joinpath("manifest.json").exists(), proc.stderr
    t = Trace(out)
    (sym,) = compile_dynamic(t, "0/1")["symbols"]
    assert sym["source"] == "L['x'].size()[0]" and sym["hint"] == 3 and sym["lower"] == 2
    assert sym["user_line"]["line"] == line_of("return (x * 2).sum(0)")
    (sp,) = compile_dynamic(t, "1/0")["specializations"]
    assert sp["value"] == 8 and sp["user_line"]["line"] == line_of("if x.shape[0] == 8:")
    assert sp["marked_dynamic"]
    u0 = next(s for s in compile_dynamic(t, "2/0")["symbols"] if s["name"] == "u0")
    assert u0["kind"] == "unbacked" and u0["user_line"]["line"] == line_of(".sum().item()")
    assert any(g["kind"] == "TENSOR_MATCH" for g in t.compile_shapes("0/1")["guards"])
    limit = compile_dynamic(t, "3/2")["recompile"]
    assert limit["limit_hit"] and limit["failing_value"] == "4"  # from the reason's text


def test_a_recompile_records_the_value_of_a_local_named_bare() -> None:
    """torch 2.13 words a failed guard on a Python value with the bare local (``flag ==
    True``, ``n == 2``), not ``L['flag']``: its value now is read from the frame's locals (a
    real frame, read, nothing evaluated), so a bool's new value is not guessed."""
    from tuidebug.compiler.compat.shapes import recompile_call

    def frame_of(flag: object, n: int) -> object:
        return sys._getframe()

    frame = frame_of(False, 3)
    got = recompile_call((None, frame), {}, [
        "0/0: flag == True                                           # return x + 1 if flag "
        "else x - 1  # mp/u/flag.py:5 in h", "0/1: n == 2  # for _ in range(n):"])
    assert got["values"] == {"L['flag']": False, "L['n']": 3}, got
    # None: not a value recorded (the failed guard then says only what it was)
    none = recompile_call((None, frame_of(None, 3)), {}, ["0/0: flag == True"])
    assert none["values"] == {}, none


def test_the_capture_records_whether_the_users_line_calls_the_frame_itself(
        tmp_path: Path) -> None:
    """``called_at["direct"]``, read from real stacks: a call through nn.Module's
    ``__call__`` alone is the line's own call; one through a library's frame (a file under
    site-packages, as an installed package's) is not."""
    import functools
    import importlib.util

    import torch

    from tuidebug.compiler.compat.shapes import recompile_call

    lib = tmp_path / "site-packages" / "lib_calls.py"
    lib.parent.mkdir()
    lib.write_text("def call(f, *args):\n    return f(*args)\n")
    spec = importlib.util.spec_from_file_location("lib_calls", lib)
    assert spec is not None and spec.loader is not None
    lib_calls = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lib_calls)
    module = torch.nn.Module()
    # the module's forward reads the stack as Dynamo's hook does (the hook's frames, then the
    # callers); tuidebug's own frames pass the call on
    module.forward = functools.partial(recompile_call, (None, None), {})  # type: ignore
    here = sys._getframe().f_code.co_name
    direct = module([])["called_at"]  # this line calls the module
    assert direct is not None and direct["fn"] == here and direct["direct"] is True, direct
    inner = lib_calls.call(module, [])["called_at"]  # this line calls the library
    assert inner is not None and inner["fn"] == here and inner["direct"] is False, inner
