"""The hostile-trace corpus (tests/faults/hostile.py) through every viewer command and every TUI
screen (docs/security.md). For each case: no traceback, no escape sequence from the data on the
terminal or the screen, no file written outside the test's output folder, nothing run (the
payloads' marker file is never written), and the damage reported as a problem naming the file."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import digest
from tests.faults import hostile
from tests.faults.conftest import Case
from tuidebug.tui import keymap

CASES = list(hostile.CASES)
# what Rich writes itself (colours, styles) on a terminal; every other escape came from data
RICH_SGR = re.compile(r"\x1b\[[0-9;]*m")
SCREEN_KEYS = "".join(keymap.screen_key(i) for i in range(len(keymap.SCREENS)))  # every screen


def data_escapes(text: str) -> list[str]:
    """Escape sequences and controls in ``text`` that Rich's own styling does not explain."""
    rest = RICH_SGR.sub("", text)
    return [repr(rest[max(0, m.start() - 20):m.end() + 20])
            for m in re.finditer("[\x00-\x08\x0b-\x1f\x7f\x9b\x9d\u202a-\u202e\u2066-\u2069]", rest)]


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str],
            timeout: float = 60.0) -> tuple[int, str]:
    """``tuidebug ARGS`` in this process (on a pretend colour terminal); (exit code, output).
    A traceback fails the test; so does a command still running after ``timeout``."""
    from tuidebug.cli import main

    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["rc"] = main(args)
        except SystemExit as e:
            result["rc"] = e.code
        except BaseException as e:  # noqa: BLE001 — a traceback is what the test looks for
            result["error"] = e

    th = threading.Thread(target=target, daemon=True)
    th.start()
    th.join(timeout)
    out = capsys.readouterr()
    text = out.out + out.err
    assert not th.is_alive(), f"tuidebug {' '.join(args)} hung for {timeout}s"
    if "error" in result:
        raise AssertionError(f"tuidebug {' '.join(args)} raised") from result["error"]
    assert "Traceback" not in text, text[-3000:]
    return int(result.get("rc") or 0), text


@pytest.fixture
def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "160")
    monkeypatch.delenv("NO_COLOR", raising=False)
    out = tmp_path / "out"
    out.mkdir()
    marker = tmp_path / "PAYLOAD_RAN"

    def make(name: str) -> tuple[hostile.Hostile, Path, Path, dict[str, str]]:
        h = hostile.build(name, tmp_path / "traces", tmp_path / "outside", marker)
        before = {p: d for p, d in digest(tmp_path).items() if not p.startswith("out/")}
        return h, out, marker, before

    def unchanged(before: dict[str, str]) -> None:
        after = {p: d for p, d in digest(tmp_path).items() if not p.startswith("out/")}
        assert after == before, "a file outside the output folder was written: " + str(
            {p for p in set(after) ^ set(before)} | {p for p in after if after[p] != before.get(p)})
    make.unchanged = unchanged  # type: ignore[attr-defined]
    return make


@pytest.mark.parametrize("name", CASES)
def test_hostile_trace_cli(name: str, corpus, capsys: pytest.CaptureFixture[str],
                           case: Case) -> None:
    h, out, marker, before = corpus(name)
    case.note = name
    t0 = time.monotonic()
    rc, text = run_cli(["info", str(h.path)], capsys)
    assert rc in (0, 1, 2)
    assert not data_escapes(text), data_escapes(text)[:5]
    if h.problem_file:
        assert h.problem_file in text, (h.problem_file, text[-3000:])
    rc, js = run_cli(["info", "--json", str(h.path)], capsys)
    if rc != 2:
        summary = json.loads(js, parse_constant=lambda c: pytest.fail(f"bare {c} in --json"))
        if h.problem_file:
            assert any(h.problem_file in p for p in summary["problems"]), summary["problems"]
    rc, text = run_cli(["diff", str(hostile.BASE), str(h.path)], capsys)
    assert not data_escapes(text), data_escapes(text)[:5]
    for extra in ([], ["--kernels"]):
        rc, text = run_cli(["svg", str(h.path), *extra, "--timeout", "20",
                            "-o", str(out / f"g{len(extra)}.svg")], capsys)
        assert not data_escapes(text), data_escapes(text)[:5]
        if name in ("names_everywhere", "dot_injection"):  # hostile names export like others
            assert rc == 0, text
        svg = out / f"g{len(extra)}.svg"
        if svg.exists():
            body = svg.read_text()
            assert not re.search(r'(href|URL)\s*=\s*"', body), "a link from the data in the SVG"
    rc, text = run_cli(["perfetto", str(h.path), "-o", str(out / "p.json")], capsys)
    assert not data_escapes(text), data_escapes(text)[:5]
    if rc == 0:  # every span placed in time (a null ts or dur: Perfetto drops the event)
        events = json.loads((out / "p.json").read_text())["traceEvents"]
        assert all(isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
                   for e in events if e["ph"] == "X"), [e for e in events if e["ph"] == "X"][:3]
    assert not marker.exists(), "a payload from the trace ran"
    corpus.unchanged(before)
    assert time.monotonic() - t0 < 120, "the commands took over 2 minutes"
    case.survived = True
    case.data_lost = False


@pytest.mark.parametrize("name", CASES)
async def test_hostile_trace_tui(name: str, corpus, open_ui, case: Case) -> None:
    h, out, marker, before = corpus(name)
    case.note = name
    # the real app warms the recompile worker with the flags screen (a torch import: slow, so
    # only where the trace's command is a payload)
    async with open_ui(h.path, prewarm=name == "runs_on_open") as ui:
        for key in SCREEN_KEYS:
            await ui.press(key)
            screen = ui.text()
            assert not data_escapes(screen), (key, data_escapes(screen)[:5])
            links = [seg.style.link for strip in ui.app.screen._compositor.render_strips()
                     for seg in strip if seg.style is not None and seg.style.link]
            assert not links, (key, links[:3])
        app = ui.app
        jobs = app.recompile_worker.jobs if app.recompile_worker is not None else []
        assert not jobs and app.prime_job is None and app.recompile_job is None, \
            "opening the screens started a job without consent"
        if app.trace.graphs:  # what the screens did not read, the integrity check does (as info)
            app.trace.graphs[0].check_files()
        problems = [str(p) for p in app.trace.problems]
    assert not marker.exists(), "a payload from the trace ran"
    corpus.unchanged(before)
    if h.problem_file:
        assert any(h.problem_file in p for p in problems), problems
    case.survived = True
    case.data_lost = False


def test_nothing_runs_without_consent(corpus, capsys: pytest.CaptureFixture[str],
                                      case: Case) -> None:
    """recompile / minify / bisect of a hostile trace: what would run is shown, the trace's
    unsafe config is refused by name, and with no terminal and no --yes nothing runs."""
    h, out, marker, before = corpus("runs_on_open")
    case.note = "consent"
    rc, text = run_cli(["recompile", str(h.path), "--set", "max_fusion_size=2"], capsys)
    assert rc == 2 and "needs your confirmation by name: cpp.cxx" in text, text
    assert "no terminal" in text, text
    m = json.loads((h.path / "manifest.json").read_text())
    m["config_overrides"] = {}
    (h.path / "manifest.json").write_text(json.dumps(m))
    rc, text = run_cli(["recompile", str(h.path), "--set", "max_fusion_size=2"], capsys)
    assert rc == 2, text
    assert "will run" in text and "evil.py" in text and f"directory:   {h.path}" in text
    assert "max_fusion_size=2" in text and "no terminal" in text and "--yes" in text
    h2, *_ = corpus("names_everywhere")
    rc, text = run_cli(["minify", str(h2.path), "-o", str(out / "repro.py")], capsys)
    assert rc == 2 and "no terminal" in text, text
    assert "cpp.cxx" in text  # the trace's compiler flag is not applied, and it says so
    assert not data_escapes(text), data_escapes(text)[:5]
    (out / "repro.py").write_text("mine")
    rc, text = run_cli(["minify", str(h2.path), "-o", str(out / "repro.py"), "--yes"], capsys)
    assert rc == 2 and "--force" in text and (out / "repro.py").read_text() == "mine"
    rc, text = run_cli(["trace", "-o", str(out / "repro.py"), str(h.path / "evil.py")], capsys)
    assert rc == 2 and "not a directory" in text and (out / "repro.py").read_text() == "mine"
    assert not marker.exists(), "a payload from the trace ran"
    case.survived = True
    case.data_lost = False


async def test_tui_asks_before_recompiling(corpus, open_ui, case: Case) -> None:
    """The TUI's recompile shows what will run (the trace's script, its directory, the flag,
    where the trace was made) in a dialog; n cancels and nothing runs."""
    from tuidebug.tui.screens.consent import ConfirmScreen

    h, out, marker, before = corpus("runs_on_open")
    case.note = "consent (TUI)"
    m = json.loads((h.path / "manifest.json").read_text())
    m["config_overrides"] = {}
    m["made_by"] = {"host": "elsewhere.example", "user": "someone-else", "path": "/nowhere"}
    (h.path / "manifest.json").write_text(json.dumps(m))
    async with open_ui(h.path) as ui:
        await ui.press("7")
        ui.app.start_recompile({"max_fusion_size": 2})
        await ui.settle()
        assert isinstance(ui.app.screen, ConfirmScreen)
        text = ui.text()
        for what in ("evil.py", "max_fusion_size=2", "another host (elsewhere.example)",
                     "another user (someone-else)", "moved"):
            assert what in text, (what, text)
        await ui.press("n")
        assert not isinstance(ui.app.screen, ConfirmScreen)
        assert ui.app.recompile_job is None and ui.app.recompile_worker is None
    assert not marker.exists()
    case.survived = True
    case.data_lost = False


def test_repro_ops_allowlist(corpus, capsys: pytest.CaptureFixture[str], case: Case) -> None:
    """A snapshot naming aten.from_file (or another namespace): minify says it never runs it,
    naming the op, and the generated code cannot call it."""
    from tuidebug.minify.codegen import check_node

    h, out, marker, before = corpus("names_everywhere")
    case.note = "op allowlist"
    g = h.path / "graphs" / hostile.GRAPH
    for snap in (g / "stages").iterdir():
        data = json.loads(snap.read_text())
        node = next(n for n in data["nodes"] if n.get("op") == "call_function")
        node["target"] = "aten.from_file.default"
        node["args"] = [str(tmp := out / "victim"), True, 4]
        other = [n for n in data["nodes"] if n.get("op") == "call_function"][1]
        other["target"] = "evil_ns.run.default"
        snap.write_text(json.dumps(data))
    rc, text = run_cli(["minify", str(h.path), "-o", str(out / "repro.py")], capsys)
    assert rc == 2 and "aten.from_file.default is refused" in text, text
    assert "evil_ns" in text
    for target in ("aten.from_file.default", "aten.save.default", "evil_ns.run.default",
                   "operator.call"):
        assert check_node(target, [], {}) is not None, target
    assert check_node("aten.relu.default", [], {}) is None
    assert not tmp.exists() and not marker.exists()
    case.survived = True
    case.data_lost = False


def _log_line(meta: dict[str, Any] | str, pid: int = 4242) -> str:
    body = meta if isinstance(meta, str) else json.dumps(meta)
    return f"V1124 00:00:00.000000 {pid} torch/_dynamo/convert_frame.py:1] {body}"


def test_hostile_torch_trace_log(corpus, capsys: pytest.CaptureFixture[str], case: Case) -> None:
    """A TORCH_TRACE log is untrusted too: escapes and markup in a frame's name, 200k-deep JSON,
    a 5,000-digit integer, garbage: import and info neither crash nor put escapes on screen."""
    h, out, marker, before = corpus("nan")  # only for the folders and the marker
    case.note = "TORCH_TRACE log"
    ids = {"frame_id": 0, "frame_compile_id": 0, "attempt": 0}
    log = out / "hostile.log"
    log.write_text("\n".join([
        _log_line({"str": [hostile.EVIL, 0]}),
        _log_line({"dynamo_start": {"stack": [{"line": 1, "name": hostile.EVIL,
                                               "filename": 0}]}, **ids}),
        _log_line("[" * 200_000 + "]" * 200_000),
        _log_line('{"compilation_metrics": {"co_name": "x", "guard_count": ' + "9" * 5000 + "}}"),
        # dynamic-shape records and a cache key's components of the wrong types
        _log_line({"create_symbol": {"symbol": "s1", "vr": 5, "val": [1], "source": {}}, **ids}),
        _log_line({"symbolic_shape_specialization": {"symbol": "s0", "sources": 5}, **ids}),
        _log_line({"guard_added_fast": {"expr": [hostile.EVIL]}, **ids}),
        _log_line({"artifact": {"name": "fx_graph_cache_miss", "encoding": "json"},
                   "has_payload": "x", **ids}) + "\n\t" + json.dumps(
            {"components": 5, "key": 7, "cache_bypass_reason": [hostile.EVIL]}),
        _log_line({"compilation_metrics": {"co_name": hostile.EVIL, "co_filename": hostile.EVIL,
                                           "fail_type": hostile.EVIL,
                                           "fail_reason": hostile.EVIL}, **ids}),
        "\x1b]52;c;cHduZWQ=\x07 not a record",
    ]) + "\n")
    rc, text = run_cli(["import", str(log), "-o", str(out / "imported")], capsys)
    assert not data_escapes(text), data_escapes(text)[:5]
    assert (out / "imported" / "compiles" / "0_0.shapes.json.gz").exists(), text[-2000:]
    if (out / "imported").exists():
        rc, text = run_cli(["info", str(out / "imported")], capsys)
        assert not data_escapes(text), data_escapes(text)[:5]
        run_cli(["info", "--json", str(out / "imported")], capsys)
    assert not marker.exists()
    corpus.unchanged(before)
    case.survived = True
    case.data_lost = False


@pytest.mark.parametrize("name", list(hostile.DEBUG_CASES))
def test_hostile_debug_folder_import(name: str, compiler_texts: dict[str, Any], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str], case: Case) -> None:
    """A TORCH_COMPILE_DEBUG folder is untrusted too: links out of it (to a file, a folder,
    /dev/zero), FIFOs and 100 MB files are not read, the import names them and goes on."""
    case.note = name
    d, problem = hostile.build_debug(name, compiler_texts["dir"] / "torch_compile_debug",
                                     tmp_path / "in", tmp_path / "outside")
    before = digest(tmp_path / "outside")
    out = tmp_path / "out" / "imported"
    t0 = time.monotonic()
    rc, text = run_cli(["import", str(d), "-o", str(out)], capsys, timeout=120)
    assert time.monotonic() - t0 < 120
    assert not data_escapes(text), data_escapes(text)[:5]
    warnings = json.loads((out / "manifest.json").read_text())["warnings"]
    assert any(problem in w for w in warnings), warnings
    for p in out.rglob("*"):
        if p.is_file():
            assert hostile.SECRET not in p.read_text(errors="replace"), p
    assert digest(tmp_path / "outside") == before
    rc, text = run_cli(["info", str(out)], capsys)
    assert rc in (0, 1)
    case.survived = True
    case.data_lost = False


async def test_ir_screen_stays_responsive_on_a_100_mb_line(tmp_path: Path, open_ui,
                                                          case: Case) -> None:
    """A 100 MB single line in fusion.jsonl and in the IR text: the IR screen (3) reads them in
    a worker thread, says on screen what it skipped or cut, and other keys answer at once."""
    import shutil

    from tuidebug.tui.screens.ir import IRScreen
    from tuidebug.tui.screens.overview import OverviewScreen

    case.note = "100 MB line on the IR screen"
    t = tmp_path / "big"
    shutil.copytree(hostile.BASE, t)
    g = t / "graphs" / hostile.GRAPH
    chunk = b"x" * (1 << 20)
    with open(g / "fusion.jsonl", "ab") as f:
        f.write(b'{"action": "rejected", "node1": "op0", "node2": "op1", "reason": "')
        for _ in range(100):
            f.write(chunk)
        f.write(b'"}\n')
    with open(g / "ir_post_fusion.txt", "wb") as f:
        for _ in range(100):
            f.write(chunk)
    async with open_ui(t) as ui:
        await ui.pilot.press("3")
        t0 = time.monotonic()
        await ui.pilot.press("1")  # while the IR screen may still be reading
        await ui.pilot.pause()
        assert isinstance(ui.app.screen, OverviewScreen)
        assert time.monotonic() - t0 < 5, "a key waited for the 100 MB line"
        await ui.press("3")
        assert isinstance(ui.app.screen, IRScreen)
        assert await ui.wait_for(lambda: "fusion.jsonl: line" in ui.text(), 60), ui.text()
        assert "bytes; skipped" in ui.text()
        await ui.press("t")
        assert await ui.wait_for(lambda: "truncated: 100663296 more bytes" in ui.text(), 60), \
            ui.text()
        assert "ir_post_fusion.txt: 104857600 bytes; only the first 4194304 are shown" in \
            ui.text(), ui.text()
        assert "more characters not shown" in ui.lines("#post-view")[0]  # cut for display
        t0 = time.monotonic()
        await ui.press("1")
        assert isinstance(ui.app.screen, OverviewScreen)
        assert time.monotonic() - t0 < 5
    case.survived = True
    case.data_lost = False


async def test_search_finds_hostile_names_as_they_are_drawn(corpus, open_ui) -> None:
    """A node target full of escape sequences is drawn inert (``\\x1b]52;…``); ``/`` searches
    that drawn text, so what the user reads on screen is what search finds (it searched the raw
    characters: ``x1b]52``, in plain sight, was "no match")."""
    from tuidebug.tui.widgets.textview import TextView

    h, *_ = corpus("names_everywhere")
    async with open_ui(h.path) as ui:
        await ui.press("2")
        view = ui.app.screen.query_one("#graph-view", TextView)
        assert any("\\x1b]52" in view.shown_plain(i) for i in range(view.line_count))
        view.focus()
        await ui.press("slash", *"x1b]52", "enter")
        assert not any("no match" in n for n in ui.notifications()), ui.notifications()
        assert "x1b]52" in view.shown_plain(view.cursor)
        painted = ui.text()
        assert "\\x1b]52" in painted and not data_escapes(painted)
        from tuidebug.tui.widgets.bars import SearchBar

        status = ui.app.screen.query_one(SearchBar).status
        n = view.match_count("x1b]52")
        assert n > 0 and f"{n} matching lines" in status, status
