"""Hostile input, second generation: the files added since the first corpus (profile, shapes,
collectives, kernel sizes, guard trees, jobs and rank progress, merge, serve) read through the one
reading path (``tuidebug/trace/format/safefile.py``; docs/security.md).

Each case is built by hand from the committed real trace (``tests/faults/hostile.BASE``) and
damaged the way an attacker would; each failed before the fix it names (a traceback, a hang, a
file of the machine shown, gigabytes of output)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.conftest import ROOT, digest
from tests.faults.conftest import Case
from tests.faults.hostile import BASE, EVIL, GRAPH
from tests.faults.test_hostile_traces import data_escapes, run_cli

LONE = "\ud800x\udfff"  # lone UTF-16 surrogates: valid JSON escapes, no UTF-8 encoding
BIG = "9" * 401  # past what a float holds
HUGE = "9" * 5000  # past what int() takes from text


def _copy(root: Path, name: str = "t") -> Path:
    t = root / name
    shutil.copytree(BASE, t)
    return t


def _json(p: Path) -> Any:
    return json.loads(p.read_text())


def _within(seconds: float, fn: Callable[[], Any]) -> Any:
    """``fn()``, which must return within ``seconds`` (a hang fails the test, not the run)."""
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 — re-raised below
            out["error"] = e
    th = threading.Thread(target=target, daemon=True)
    th.start()
    th.join(seconds)
    assert not th.is_alive(), f"still running after {seconds}s"
    if "error" in out:
        raise out["error"]
    return out.get("value")


def _cli_all(t: Path, capsys: pytest.CaptureFixture[str], out: Path) -> dict[str, str]:
    """info, info --json and perfetto on ``t``: no traceback, no escape, output encodable."""
    texts = {}
    for args in (["info"], ["info", "--json"], ["perfetto", "-o", str(out / "p.json")]):
        rc, text = run_cli([*args, str(t)], capsys)
        assert rc in (0, 1, 2), text
        assert not data_escapes(text), data_escapes(text)[:3]
        text.encode("utf-8")  # a lone surrogate printed raw: UnicodeEncodeError on a terminal
        texts[args[0] + ("-json" if "--json" in args else "")] = text
    json.loads(texts["info-json"], parse_constant=lambda c: pytest.fail(f"bare {c}"))
    return texts


# -- one reading path: numbers, surrogates, nesting ----------------------------------------------


def test_big_numbers_nan_and_surrogates_in_the_new_files(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], case: Case) -> None:
    """401-digit integers in profile times, roofline peaks and compile phase times; NaN, strings
    and lists where times belong; a roofline over a time too small to share; lone surrogates
    in collectives, profile and shapes; a compile's recompile reasons nested 100,000 deep."""
    case.note = "big numbers, NaN, surrogates, deep reasons in the new files"
    t = _copy(tmp_path)
    g = t / "graphs" / GRAPH
    kernels = [k["name"] for k in _json(g / "code" / "kernels.json")["kernels"]]
    profile = {"compiles": {"0/0": {
        "device": LONE, "runs": 3, "eager_graph": GRAPH,
        "compiled": {"wall_s": "NaN"}, "eager": {"wall_s": [1]},
        "device_peak": {"dram_gbps": 3350, "tflops": {"float32": 67, LONE: 5}},
        "kernels": [{"graph": GRAPH, "kernel": kernels[0], "time_s": 1.0, "device_s": 5e-324,
                     "bytes": 1e9, "calls": 1e300},
                    {"graph": GRAPH, "kernel": kernels[2], "time_s": 1.0, "device_s": 1e-3,
                     "bytes": 1e9, "flops": 1e12, "calls": 2},
                    {"graph": GRAPH, "kernel": kernels[1], "time_s": "x", "device_s": [2],
                     "bytes": "NaN", "calls": 1}]}}}
    (t / "profile.json").write_text(json.dumps(profile).replace('"NaN"', "NaN"))
    # the same trace with 401-digit numbers in the profile: refused as a whole, and said
    big = _copy(tmp_path, "big")
    profile["compiles"]["0/0"]["device_peak"]["dram_gbps"] = "@BIG@"
    profile["compiles"]["0/0"]["kernels"][1]["bytes"] = "@BIG@"
    (big / "profile.json").write_text(json.dumps(profile).replace('"@BIG@"', BIG))
    (g / "collectives.json").write_text(json.dumps({"collectives": [
        {"index": 0, "op": LONE, "group": LONE, "inputs": [{"shape": [2], "dtype": LONE}],
         "user_source": {"file": LONE, "line": 3, "code": LONE}}]}))
    (t / "compiles" / "0_0.shapes.json").write_text(json.dumps({
        "symbols": [{"name": LONE, "range": [0, 7]}],
        "guards": [{"kind": LONE, "expr": LONE}]}))
    c = _json(t / "compiles" / "0_0.json")
    c["recompile_reasons"] = ["[" * 100_000 + "]" * 100_000, LONE]
    (t / "compiles" / "0_0.json").write_text(json.dumps(c))
    meta = (g / "meta.json").read_text()
    assert '"duration_s": ' in meta
    (g / "meta.json").write_text(meta.replace('"duration_s": null', f'"duration_s": {BIG}', 1))
    out = tmp_path / "out"
    out.mkdir()
    texts = _cli_all(t, capsys, out)
    assert "meta.json" in texts["info"], texts["info"][-2000:]  # its 401 digits refused
    report = json.loads(texts["info-json"])
    assert report["profile"]["kernels"], report.get("profile")  # read, the bad values left out
    # the roofline: the kernel measured 1 ms is on it; the one whose time per call is too
    # small to hold (5e-324 s over 1e300 calls: zero) is left out, not divided by
    assert [r["kernel"] for r in report["profile"]["roofline"]] == [kernels[2]], \
        report["profile"]["roofline"]
    texts = _cli_all(big, capsys, out)
    assert any("profile.json" in p and "401 digits" in p
               for p in json.loads(texts["info-json"])["problems"]), texts["info-json"][-2000:]
    case.survived = True
    case.data_lost = False


def test_reading_path_bounds_numbers_and_strings() -> None:
    """The one reading path itself: an integer past a float refused, NaN/Infinity/1e400 read as
    null, a lone surrogate replaced, 200,000-deep nesting refused (never a RecursionError)."""
    from tuidebug.trace.format import safefile

    with pytest.raises(ValueError, match="401 digits"):
        safefile.loads("[" + BIG + "]")
    assert safefile.loads('[NaN, Infinity, -Infinity, 1e400, 2.5]') == [None] * 4 + [2.5]
    assert safefile.loads('{"a\\ud800": "\\udfffb", "c": "\\ud83d\\ude00"}') == \
        {"a\ufffd": "\ufffdb", "c": "\U0001F600"}
    with pytest.raises(ValueError, match="nested deeper"):
        safefile.loads("[" * 200_000 + "]" * 200_000)
    assert [safefile.to_int(s) for s in ("12", "-3", "²", HUGE, "", "1_0")] == \
        [12, -3, None, None, None, None]
    assert [safefile.number(v) for v in (1, 2.5, True, "1", [1], 10 ** 400, float("nan"))] == \
        [1.0, 2.5, None, None, None, None, None]


def test_reading_path_reads_valid_data_whatever_its_strings_hold() -> None:
    """The checks on the text (nesting measured on the brackets outside strings, big numbers
    looked for in the bytes) never refuse or change valid data: brackets, quotes, escapes,
    digits and exponents inside strings, 1,000 levels deep exactly, a 308-digit integer."""
    from tuidebug.trace.format import safefile

    tricky = ["[[[{{{" * 300, 'q\\"[[[', "e999 " + "7" * 400, "\\", "}]" * 600]
    data = {"s": tricky, "n": [1, -2.5e-300, 1e308, int("9" * 308)],
            "deep": "[" * 1200, "list": [[{"a": [i, "]]"]}] for i in range(3000)]}
    assert safefile.loads(json.dumps(data)) == data
    assert safefile.loads(json.dumps(data).encode()) == data
    at_limit = "[" * safefile.MAX_DEPTH + "]" * safefile.MAX_DEPTH
    assert safefile.loads(at_limit) is not None
    with pytest.raises(ValueError, match="nested deeper"):
        safefile.loads('{"a": ' * (safefile.MAX_DEPTH + 1) + '"x\\"}]"' + "}" * (safefile.MAX_DEPTH + 1))
    with pytest.raises(ValueError, match="309 digits"):
        safefile.loads('{"x": "e000", "y": -' + "9" * 309 + "}")


# -- numbers in text, linear-time parsing ---------------------------------------------------------


def test_numbers_in_text_and_call_handles(tmp_path: Path, case: Case) -> None:
    """5,000-digit symbols in a wrapper's kernel call, shape records and guard lines; a call
    handle ending in a superscript digit (``int('²')``)."""
    from tuidebug.trace.format.reader import Trace
    from tuidebug.trace.importers import shapes_log
    from tuidebug.trace.queries import guards, kernel_sizes, provenance

    case.note = "5,000-digit numbers in text; a call handle ending in '²'"
    assert kernel_sizes.symbolic_sizes(
        "def triton_k(in_ptr0, ks0, xnumel):\n", "triton",
        f"triton_k.run(buf0, s{HUGE}, 4*s{HUGE} + s1, grid=grid(4))\n", "triton_k") == [
        {"param": "ks0", "expr": f"s{HUGE}", "symbols": [f"s{HUGE}"]},
        {"param": "xnumel", "expr": f"4*s{HUGE} + s1", "symbols": ["s1", f"s{HUGE}"]}]
    assert shapes_log._bound(HUGE) == HUGE and shapes_log._bound("-7") == -7
    parsed, _ = guards.parse_guard_tree(
        f"+- TENSOR_MATCH: check(L['x'])  # x = f(y)  # m.py:{HUGE} in forward\n"
        "+- TENSOR_MATCH: check(L['y'])  # y = g(x)  # m.py:12 in forward\n")
    assert [p["user_line"] and p["user_line"]["line"] for p in parsed] == [None, 12]
    t = _copy(tmp_path)
    kj = t / "graphs" / GRAPH / "code" / "kernels.json"
    data = _json(kj)
    k = data["kernels"][1]
    k["handles"] = [f"{k['name']}:²", f"{k['name']}:{HUGE}", f"{k['name']}:1"]
    kj.write_text(json.dumps(data))
    g = Trace(t).graph(GRAPH)
    prov = (g.provenance.get("kernels") or {}).get(k["name"]) or {}
    calls = provenance.kernel_calls(g, k["name"], prov)
    assert calls, calls
    case.survived = True
    case.data_lost = False


def test_guard_tree_line_is_read_in_linear_time(case: Case) -> None:
    """A 150 KB guard line of blanks and '#'s: the comment patterns backtracked (hours; a
    regular expression holds the interpreter, so the parse runs in a child with a timeout)."""
    case.note = "150 KB guard-tree line"
    child = (
        "from tuidebug.trace.queries import guards\n"
        "lines = ['+- TENSOR_MATCH: check(L[\\'x\\'])' + ' ' * 150_000 + 'x',\n"
        "         '+- TENSOR_MATCH: check(L[\\'x\\'])  #' + ' #' * 75_000 + ' m.py:1 in',\n"
        "         '+- GuardManager: source=' + 'source=' * 20_000,\n"
        "         '+- TENSOR_MATCH: check(L[\\'z\\'])  # z = h(x)  # m.py:3 in forward']\n"
        "parsed, _ = guards.parse_guard_tree('\\n'.join(lines))\n"
        "print(len(parsed), parsed[-1]['user_line']['fn'])\n")
    r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                       timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0 and r.stdout.split() == ["3", "forward"], (r.stdout, r.stderr)
    case.survived = True
    case.data_lost = False


def test_wrapper_of_calls_never_closed(case: Case) -> None:
    """1,000 kernel calls whose parenthesis never closes: each call read to the wrapper's end
    (quadratic: minutes); now no call is found for them, in linear time."""
    from tuidebug.trace.queries import kernel_sizes

    case.note = "wrapper: 1,000 calls never closed"
    names = [f"triton_k{i}" for i in range(1000)]
    wrapper = "".join(f"    {n}.run(buf{i}, s0, " + "x, " * 100 + "\n" for i, n in enumerate(names))

    def sizes() -> list[Any]:
        return [kernel_sizes.symbolic_sizes("def k(in_ptr0, ks0):\n", "triton", wrapper, n)
                for n in names]
    got = _within(30, sizes)
    assert len(got) == 1000 and all(s == [{"param": "ks0", "expr": None, "symbols": []}]
                                    for s in got), got[:2]
    case.survived = True
    case.data_lost = False


# -- source context only from the trace ------------------------------------------------------------


def test_source_context_is_never_read_from_a_path_the_trace_names(tmp_path: Path,
                                                                  case: Case) -> None:
    """provenance.json naming /etc/passwd, and a file relative to the manifest's ``cwd``: the
    code screen's source view (``s``) showed them (under serve: the server's files)."""
    from tuidebug.trace.format.reader import Trace
    from tuidebug.tui.screens.code_docs import read_source

    case.note = "provenance naming /etc/passwd and a cwd-relative secret"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("SECRET = 1\n" * 5)
    t = _copy(tmp_path)
    m = _json(t / "manifest.json")
    m["cwd"] = str(outside)
    (t / "manifest.json").write_text(json.dumps(m))
    pj = t / "graphs" / GRAPH / "provenance.json"
    prov = _json(pj)
    names = list(prov["kernels"])
    assert len(names) >= 2
    prov["kernels"][names[0]]["source"] = [
        {"file": "/etc/passwd", "line": 1, "fn": "f", "code": "captured " + EVIL}]
    prov["kernels"][names[1]]["source"] = [
        {"file": "secret.py", "line": 2, "fn": "f", "code": "y = captured(x)"}]
    pj.write_text(json.dumps(prov))
    trace = Trace(t)
    doc = read_source(trace, "/etc/passwd", 1)
    assert "root:" not in (doc.code or "") and "captured" in (doc.code or ""), doc
    doc = read_source(trace, "secret.py", 2)
    assert "SECRET" not in (doc.code or "") and "y = captured(x)" in (doc.code or ""), doc
    assert (doc.code or "").split("\n")[doc.cursor] == "y = captured(x)"  # at its line, 2
    doc = read_source(trace, str(outside / "secret.py"), 1)
    assert "SECRET" not in (doc.code or "") and "captured no line" in (doc.code or "")
    case.survived = True
    case.data_lost = False


# -- jobs and merge --------------------------------------------------------------------------------


def _listing(root: Path) -> list[tuple[str, int, int]]:
    """Every entry under ``root`` with its size and modification time (nothing read)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, n))
            out.append((os.path.relpath(os.path.join(dirpath, n), root), st.st_size,
                        st.st_mtime_ns))
    assert out
    return sorted(out)


def _job(root: Path, ranks: int = 2) -> Path:
    job = root / "job"
    (job / "job").mkdir(parents=True)
    for r in range(ranks):
        shutil.copytree(BASE, job / f"rank_{r}")
        (job / "job" / f"rank_{r}.json").write_text(json.dumps(
            {"rank": r, "world_size": ranks, "status": "ok", "trace": f"rank_{r}"}))
    return job


def test_job_with_a_fifo_and_a_huge_sparse_file(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str],
                                                case: Case) -> None:
    """A FIFO among a rank's code files hung ``info JOB`` (the cross-rank fingerprint read
    every file); a 5 GiB sparse config.json: MemoryError."""
    case.note = "job: a FIFO and a 5 GiB sparse file in a rank"
    job = _job(tmp_path)
    code = job / "rank_1" / "graphs" / GRAPH / "code"
    wrapper = code / "wrapper.py"
    wrapper.unlink()
    os.mkfifo(wrapper)
    cfg = job / "rank_0" / "config.json"
    cfg.unlink()
    with open(cfg, "wb") as f:
        f.truncate(5 << 30)
    before = _listing(tmp_path)  # (hashing the 5 GiB file would read it: stat only)
    t0 = time.monotonic()
    for args in (["info"], ["info", "--json"]):
        rc, text = run_cli([*args, str(job)], capsys, timeout=120)
        assert rc in (0, 1, 2), text
    assert time.monotonic() - t0 < 120
    assert _listing(tmp_path) == before, "info wrote a file"
    case.survived = True
    case.data_lost = False


def test_many_timed_out_ranks_with_huge_groups(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str],
                                               case: Case) -> None:
    """400 timed-out ranks, 800 small progress logs, each collective on a group of 65,536
    members (an arithmetic run): the members were expanded per rank (info past 60 s,
    ``info --json`` past 4 GiB)."""
    case.note = "job: 400 timed-out ranks, groups of 65,536"
    job = tmp_path / "job"
    (job / "job").mkdir(parents=True)
    run = {"first": 0, "step": 1, "count": 65536}
    for r in range(800):
        if r < 400:
            (job / "job" / f"rank_{r}.json").write_text(json.dumps(
                {"rank": r, "world_size": 400, "status": "timed_out", "hostname": LONE}))
        (job / "job" / f"rank_{r}.progress.jsonl").write_text("".join(json.dumps(
            {"event": "collective", "op": "all_reduce", "seq": s, "group": f"g{r % 7}",
             "members": run, "line": EVIL + LONE}) + "\n" for s in (1, 2 + r % 3)))
    t0 = time.monotonic()
    rc, text = run_cli(["info", str(job)], capsys, timeout=120)
    assert rc in (0, 1, 2) and "waits" in text, text[-2000:]
    assert not data_escapes(text), data_escapes(text)[:3]
    text.encode("utf-8")  # lone surrogates in records and logs: encodable once read
    rc, js = run_cli(["info", "--json", str(job)], capsys, timeout=120)
    js.encode("utf-8")
    assert len(js) < 20_000_000, len(js)
    report = json.loads(js)
    assert report["ranks"] and report.get("waits"), list(report)
    assert time.monotonic() - t0 < 120
    case.survived = True
    case.data_lost = False


def test_merge_never_follows_a_link_out_of_the_node_folder(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str],
                                                          case: Case) -> None:
    """A node folder whose ``job/`` is a link to records elsewhere: merge copied them into the
    merged job."""
    case.note = "merge: job/ a link out of the node folder"
    node = _job(tmp_path / "node0")
    elsewhere = tmp_path / "elsewhere"
    shutil.move(str(node / "job"), elsewhere)
    (elsewhere / "rank_0.json").write_text(json.dumps(
        {"rank": 0, "world_size": 2, "status": "ok", "hostname": "SECRET_HOST"}))
    (node / "job").symlink_to(elsewhere)
    before = digest(tmp_path / "node0")
    rc, text = run_cli(["merge", str(node), "-o", str(tmp_path / "merged")], capsys)
    assert rc == 0, text
    merged = tmp_path / "merged"
    assert (merged / "rank_0" / "manifest.json").is_file()
    assert all("SECRET_HOST" not in p.read_text() for p in merged.rglob("*.json")
               if p.is_file() and p.stat().st_size < 1_000_000)
    assert not (merged / "job" / "rank_0.json").exists()
    assert digest(tmp_path / "node0") == before
    case.survived = True
    case.data_lost = False


# -- serve: malformed websocket messages ----------------------------------------------------------


def test_serve_refuses_malformed_client_messages(case: Case) -> None:
    """Not JSON, wrong shapes, a 20 MB message, a 4000×4000 screen: refused (textual-serve
    raised on each: a traceback on the server's terminal)."""
    from tuidebug.tui.serve_messages import ClientMessage, client_message

    case.note = "serve: malformed websocket messages"
    bad = ["not json", "{}", "[]", "[5]", '["stdin"]', '["stdin", 5]', '["resize", 5]',
           '["resize", {"width": 4000, "height": 4000}]', '["resize", {"width": "80"}]',
           '["resize", {"width": true, "height": 24}]', '["ping", {"a": 1}]', '["nope", 1]',
           '["stdin", "' + "q" * (20 << 20) + '"]', "[" * 100_000 + "]" * 100_000, None, b"x"]
    assert all(client_message(m) is None for m in bad)
    assert client_message('["stdin", "q"]') == ClientMessage("stdin", text="q")
    assert client_message('["resize", {"width": 120, "height": 40}]') == \
        ClientMessage("resize", width=120, height=40)
    case.survived = True
    case.data_lost = False


def test_open_job_with_a_fifo_still_quits(tmp_path: Path, case: Case) -> None:
    """``open JOB`` whose rank holds a FIFO among its code files: the ranks screen's comparison
    blocked on it, and ``q`` never ended the app. In a child with a timeout (a thread blocked
    in ``open`` cannot be cancelled)."""
    case.note = "open JOB: a FIFO among a rank's files, then q"
    job = _job(tmp_path)
    wrapper = job / "rank_1" / "graphs" / GRAPH / "code" / "wrapper.py"
    wrapper.unlink()
    os.mkfifo(wrapper)
    child = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from tuidebug.trace.format.reader import Trace\n"
        "from tuidebug.tui.app import TuidebugApp\n"
        "async def main():\n"
        "    job = Path(sys.argv[1])\n"
        "    app = TuidebugApp(Trace(job / 'rank_0'), job=job, start='ranks')\n"
        "    async with app.run_test(size=(120, 40)) as pilot:\n"
        "        await pilot.pause(5)\n"
        "        await pilot.press('q')\n"
        "        await pilot.pause(0.5)\n"
        "    print('QUIT', app.return_code)\n"
        "asyncio.run(main())\n")
    r = subprocess.run([sys.executable, "-c", child, str(job)], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0 and "QUIT" in r.stdout, (r.stdout, r.stderr[-3000:])
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    case.survived = True
    case.data_lost = False
