"""Recompiles explained on a real decode loop (examples/decode_loop.py: a tiny Hugging Face
Llama, random weights, a prefill of 6 tokens then 8 one-token steps with a DynamicCache): the
size-1 specialization of the decode step and the cache growing by one are recognised, the
advice names only what the user can act on, and ``advise --try`` measures each suggestion."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, _make, pythonpath
from tuidebug.trace.format.reader import Trace

SCRIPT = EXAMPLES / "decode_loop.py"
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                                 reason="transformers is not installed")]


@pytest.fixture(scope="module")
def decode_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make(tmp_path_factory, "decode", "decode_loop.py", extra=["--no-check"])


@pytest.fixture(scope="module")
def grow_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/fixtures/sizes_grow.py traced once for the module (tests that write advice into it
    copy it first)."""
    from tests.conftest import ROOT

    return _make(tmp_path_factory, "grow", str(ROOT / "tests" / "fixtures" / "sizes_grow.py"),
                 extra=["--no-check"])


def _cli(*args: str, timeout: float = 120) -> str:
    env = dict(os.environ, PYTHONPATH=pythonpath(), COLUMNS="300")
    proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_decode_loop_recompiles_are_explained_without_false_advice(decode_trace: Path) -> None:
    log = (decode_trace.parent / "decode.log").read_text()
    assert "var_to_val is deprecated" not in log  # our compat read the deprecated property
    s = json.loads(_cli("info", str(decode_trace), "--json"))
    recs = {c["id"]: c for c in s["compiles"] if c.get("recompile")}
    assert len(recs) == 2, list(recs)
    step = next(i for i, ln in enumerate(SCRIPT.read_text().splitlines(), 1)
                if ln.strip().startswith("out = step(input_ids=nxt,"))
    seen = 0
    for cid, c in recs.items():
        rec = c["recompile"]
        symbols = {x["source"] for x in c["symbols"]}
        # the user's line whose call recompiled: the decode step, not transformers' wrapper
        called = rec["called_at"]
        assert (Path(called["file"]).name, called["line"]) == (SCRIPT.name, step), rec
        assert called["code"].startswith("out = step(input_ids=nxt,"), rec
        # Dynamo compiled transformers' decorator wrapper (generic.py): the capture read the
        # forward it wraps from the live frame
        assert c["function"] == "wrapper", c
        assert rec["wraps"]["function"] == "LlamaForCausalLM.forward", rec["wraps"]
        assert Path(rec["wraps"]["file"]).name == "modeling_llama.py", rec["wraps"]
        if str(rec["failing_value"]) == "1":  # prefill -> decode: a size-1 specialization
            assert "input_ids" in rec["source"] and rec["source"] not in symbols, (rec, symbols)
            assert "sizes 0 and 1 are always specialized" in rec["suggestion"], rec
            assert "makes it dynamic" not in rec["suggestion"]
            assert "maybe_mark_dynamic" not in rec["suggestion"]
        else:  # the cache grew by one: this compile has a symbol for it
            assert int(rec["failing_value"]) == int(rec["expected"]) + 1, rec
            assert rec["source"] in symbols, (rec, symbols)
            assert "grows by one each call" in rec["suggestion"], rec
            assert "makes it dynamic" in rec["suggestion"]
            # it names no call on a tensor the user never holds
            assert "maybe_mark_dynamic" not in rec["suggestion"] and "mark_dynamic(" not in \
                rec["suggestion"], rec
            assert "dynamic=True" in rec["suggestion"] and "static KV cache" in rec["suggestion"]
        seen += 1
    assert seen == 2
    # one guard count per compile, Dynamo's own, in every view (the overview took Dynamo's
    # metric, the shapes screen and JSON the guards the capture kept: 841 vs 610)
    t = Trace(decode_trace)
    for c in s["compiles"]:
        assert c["guards"]["count"] == t.compiles[c["id"]]["metrics"]["guard_count"], c["id"]
    ids = [a["id"] for a in s["advice"]["suggestions"]]
    assert "dynamic=True" in ids and "static KV cache" in ids, ids
    assert not any(i.startswith("mark_dynamic") for i in ids), ids  # input_ids is size 1 there
    # transformers' cache: a static one is named as the user builds it, and can be tried
    static = next(a for a in s["advice"]["suggestions"] if a["id"] == "static KV cache")
    assert "StaticCache(config=model.config, max_cache_len=N)" in static["text"], static
    assert "grows by one each step" in static["why"], static
    assert static["tryable"] and static["apply"]["static_cache_len"] > 0, static
    text = " ".join(_cli("info", str(decode_trace)).split())
    assert f"called at {SCRIPT.name}:{step} out = step(input_ids=nxt," in text, text


def test_advise_try_measures_each_suggestion_and_ranks_what_helped_first(
        decode_trace: Path, tmp_path: Path) -> None:
    out = _cli("advise", str(decode_trace), "--try", "--yes", "-o", str(tmp_path / "tries"),
               "--json", timeout=3000)
    d = json.loads(out)
    tried = d["tried"]
    tryable = [s["id"] for s in d["suggestions"] if s["tryable"]]
    assert sorted(t["id"] for t in tried) == sorted(tryable) and tried

    def made(t: Trace) -> int:  # compiles with a graph, a restarted analysis counted once
        return len({g.compile_id for g in t.graphs if g.status != "restarted"})

    for t in tried:
        assert t["before"]["compiles"] == made(Trace(decode_trace)), t  # as traced, again
        after = Trace(t["trace"])  # each try is a trace of its own: its counts are measured
        assert t["after"]["compiles"] == made(after), t
        assert after.manifest.applied, t
    helped = [t["helped"] for t in tried]
    assert helped == sorted(helped, reverse=True), helped  # what helped comes first
    # the static KV cache, tried without editing the script (transformers' DynamicCache built
    # static in the run), removes the recompiles of the growing cache: measured, ranked first
    first = tried[0]
    assert first["id"] == "static KV cache" and first["helped"], tried
    assert first["after"]["compiles"] < first["before"]["compiles"], first
    assert Trace(first["trace"]).manifest.applied["static_cache_len"] > 0
    for t in tried:  # each verdict says what was measured, and no more
        b, a = t["before"], t["after"]
        # breaks compared by line (a break met in fewer compiles is not one removed)
        assert t["helped"] == (a["status"] == "ok" and a["compiles"] <= b["compiles"]
                               and a["break_lines"] <= b["break_lines"]
                               and (a["compiles"], a["break_lines"])
                               != (b["compiles"], b["break_lines"])), t
        assert t["verdict"].startswith("verified: " if t["helped"] else "tried"), t
    s = json.loads(_cli("info", str(decode_trace), "--json"))
    assert [t["id"] for t in s["advice"]["tried"]] == [t["id"] for t in tried]
    text = " ".join(_cli("info", str(decode_trace)).split())
    for t in tried:
        assert f"{'✓' if t['helped'] else '✗'} " in text and t["verdict"] in text, t
    out = " ".join(_cli("advise", str(decode_trace)).split())
    if not any(helped):  # said, with what is left to do (a change to the code)
        assert (f"none of the {len(tried)} suggestions tried removed a compile or a graph "
                "break" in out), out
        assert "static KV cache" in out


async def test_the_tui_key_tries_the_advice_after_consent(open_ui, grow_trace: Path,
                                                          copy_trace) -> None:
    """``a`` on the overview: the plan is shown first (nothing runs before y); then the runs,
    and the overview marks what was verified. A batch size that changes: the second call
    recompiles (automatic dynamic). Marking the batch dimension dynamic from the first call, or
    dynamic=True, makes it one compile — measured, each in a run of its own, ranked first.
    (The CLI's ``advise --try`` runs in the decode-loop test above: the grow trace's tries run
    once, here.)"""
    from tuidebug.tui.screens.consent import ConfirmScreen

    trace = copy_trace(grow_trace, "grow")
    rec = next(c["recompile"] for c in json.loads(_cli("info", str(trace), "--json"))["compiles"]
               if c.get("recompile"))
    assert "maybe_mark_dynamic(x, 0)" in rec["suggestion"], rec  # x is what the user passes
    async with open_ui(trace, size=(160, 50)) as ui:
        assert "· compile with torch.compile(..., dynamic=True)" in "\n".join(
            ui.lines("#overview"))
        await ui.pilot.press("a")
        assert await ui.wait_for(lambda: isinstance(ui.app.screen, ConfirmScreen), 30)
        assert "sizes_grow.py" in ui.text() and not (trace / "advice.json").exists()
        await ui.pilot.press("y")
        assert await ui.wait_for(lambda: any(ln.startswith("✓ ") for ln in
                                             ui.lines("#overview")), 1500), ui.lines("#overview")
        text = "\n".join(ui.lines("#overview"))
    assert "verified: compiles 2 → 1" in text, text
    d = json.loads((trace / "advice.json").read_text())
    tried = {t["id"]: t for t in d["tried"]}
    assert {"dynamic=True", "mark_dynamic x 0"} <= set(tried), list(tried)
    made = len({g.compile_id for g in Trace(trace).graphs if g.status != "restarted"})
    assert made == 2  # the first size, then the recompile that made the batch dynamic
    for t in tried.values():
        assert (t["before"]["compiles"], t["after"]["compiles"]) == (made, 1), t
        assert t["helped"] and t["verdict"].startswith(f"verified: compiles {made} → 1"), t
    assert d["tried"][0]["helped"]
