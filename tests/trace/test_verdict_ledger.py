"""The whole call's verdict and ledger as read from a trace (``trace/queries/whole_call.py``,
``verdict.py``, ``breaks.py``): statistics on known numbers, and a trace written with the
torch-free writer holding Dynamo's own text of a graph break. The real compiles are in
tests/compiler/test_whole_call.py."""

from __future__ import annotations

import io
import random
from pathlib import Path

from rich.console import Console

from tuidebug.trace.queries.verdict import (FASTER, SAME, SLOWER, compare, median_interval,
                                            ratio_interval, spread)
from tuidebug.trace.queries.whole_call import call_verdicts
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.queries.summary import trace_summary
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.viewers.info import render_summary

# Dynamo's text of the break in examples/graph_break.py (torch 2.13), as a trace records it
BREAK = ("Graph break in user code at /src/model.py:42\nGraph Break Reason: Encountered graph "
         "break when attempting to trace CALL: a function call, e.g. f(x, y):\n\nUnsupported "
         "Tensor.item() call with capture_scalar_outputs=False\n  Explanation: Dynamo does not "
         "support tracing `Tensor.item()` with config.capture_scalar_outputs=False.\n\nUser "
         "code traceback:\n  File \"/src/model.py\", line 42, in forward\n")


def test_median_interval_is_the_binomial_order_statistics() -> None:
    xs = list(range(1, 21))  # n = 20: the 95% interval of the median is x(6)..x(15) (1-based)
    assert median_interval([float(x) for x in xs]) == (6.0, 15.0)
    assert median_interval([3.0, 1.0, 2.0]) == (1.0, 3.0)  # too few: the whole range


def test_noise_is_no_difference_and_a_real_gap_is_not() -> None:
    rng = random.Random(0)
    a = [1e-3 * (1 + rng.gauss(0, 0.3) ** 2) for _ in range(200)]
    b = [1e-3 * (1 + rng.gauss(0, 0.3) ** 2) for _ in range(200)]
    assert compare(a, b).outcome == SAME  # the same distribution: no verdict either way
    fast = [t / 1.4 for t in b]
    v = compare(a, fast)
    assert v.outcome == FASTER and v.ratio_low > 1.0 and 1.2 < v.ratio < 1.7
    assert compare(fast, a).outcome == SLOWER
    # within the band: a real 2% difference is reported as none when the band is 5%
    assert compare(a, [t / 1.02 for t in a], band=0.05).outcome == SAME
    s = spread(a)
    assert s.p10_s <= s.median_s <= s.p90_s and s.n == 200
    r = ratio_interval(a, fast)
    assert r.low <= r.value <= r.high and r.n == 200


def test_an_island_finds_its_break_through_a_restart(tmp_path: Path) -> None:
    from tuidebug.trace.queries.graph_breaks import trace_breaks
    from tuidebug.trace.queries.whole_call import _break_of

    breaks = trace_breaks(_trace(tmp_path, _call(1.0, 0.9, 1.1)))
    # the frame's analysis restarted at the break: 0/0 keeps it, its graph is 0/0_1's
    for cid in ("0/0", "0/0_1", "0/0_1_2"):
        b = _break_of(breaks, cid)
        assert b is not None and b.user_line is not None, cid
        assert (b.user_line.file, b.user_line.line, b.user_line.where) == (
            "/src/model.py", 42, "model.py:42")
        assert b.cause == "Unsupported Tensor.item() call with capture_scalar_outputs=False"
    assert _break_of(breaks, "1/0") is None and _break_of(breaks, None) is None


def _call(ratio: float, low: float, high: float) -> dict:
    """A measured whole call: two graphs with an eager island between them (0/0_1's break)."""
    compiled = 2.9e-3
    ledger = [{"part": "dynamo", "seconds": 0.3e-3},
              {"part": "graph", "seconds": 0.4e-3, "graph": "0_0_1-inference",
               "compile_id": "0/0_1"},
              {"part": "eager_island", "seconds": 1.8e-3, "compile_id": "0/0_1"},
              {"part": "graph", "seconds": 0.3e-3, "graph": "1_0-inference",
               "compile_id": "1/0"},
              {"part": "other", "seconds": 0.1e-3}]
    spread_ = {"median_s": compiled, "p10_s": 2.8e-3, "p90_s": 3.1e-3, "min_s": 2.7e-3, "n": 40}
    eager = {"median_s": compiled * ratio, "p10_s": 2e-3, "p90_s": 2.4e-3, "min_s": 2e-3, "n": 40}
    return {"callable": "Model", "training": False, "rounds": 40, "device": "cpu",
            "compiled": spread_, "eager": eager, "ratio": ratio, "ratio_low": low,
            "ratio_high": high, "ledger": ledger,
            "machine": {"cores": 2, "load1": 6.0, "threads": 1, "user_threads": 2,
                        "oversubscribed": True}}


def _trace(tmp_path: Path, *calls: dict) -> Trace:
    w = TraceWriter(tmp_path / "t")
    w.add_compile("0/0", {"graphs": []})
    w.write_compile("0/0", {"graphs": [], "dynamo_graph_break_reason": [BREAK]})
    w.write_profile({"runs": 10, "compiles": {}, "calls": list(calls)})
    w.finish("ok")
    return Trace(tmp_path / "t")


def test_slower_names_the_break_and_the_parts_add_up(tmp_path: Path) -> None:
    (v,) = call_verdicts(_trace(tmp_path, _call(0.76, 0.72, 0.80)))
    assert v.outcome == SLOWER
    assert v.text.startswith("compiled 1.32× slower than eager")
    assert "`.item()` at model.py:42" in v.text and "1.80 ms" in v.text and "2.90 ms" in v.text
    islands = [p for p in v.ledger if p.part == "eager_island"]
    assert len(islands) == 1 and islands[0].line == 42 and islands[0].file == "/src/model.py"
    assert abs(sum(p.seconds for p in v.ledger) - v.compiled.median_s) < 1e-9
    # a gap after a graph whose compile had no break is the next frame's Dynamo, not an island
    c = _call(0.76, 0.72, 0.80)
    c["ledger"][2]["compile_id"] = "1/0"
    (v2,) = call_verdicts(_trace(tmp_path / "b", c))
    assert [p.part for p in v2.ledger].count("dynamo") == 2


def test_an_interval_across_one_is_no_difference_in_info(tmp_path: Path) -> None:
    t = _trace(tmp_path, _call(1.02, 0.97, 1.08))
    s = trace_summary(t)
    v = s["profile"]["verdict"]
    assert v["outcome"] == SAME and v["text"].startswith("no measurable difference")
    assert "faster" not in v["text"] and "slower" not in v["text"]
    assert (v["compiled_s"], v["ratio_low"], v["ratio_high"]) == (2.9e-3, 0.97, 1.08)
    parts = s["profile"]["ledger"]
    assert [p["part"] for p in parts] == ["dynamo", "graph", "eager_island", "graph", "other"]
    assert parts[2]["reason"].startswith("Unsupported Tensor.item()")
    out = io.StringIO()
    render_summary(s, Console(file=out, width=120, color_system=None))
    text = out.getvalue()
    assert "no measurable difference" in text and "oversubscribed" in text
    assert "eager island" in text and "model.py:42" in text


def test_a_damaged_call_is_left_out(tmp_path: Path) -> None:
    bad = _call(1.5, 1.4, 1.6)
    bad["ratio_low"] = float("nan")
    worse = {"callable": "x", "compiled": "nope"}
    assert call_verdicts(_trace(tmp_path, bad, worse, "junk")) == []  # type: ignore[arg-type]


def test_two_traces_compare_their_ratios_not_their_raw_times(tmp_path: Path) -> None:
    from tuidebug.trace.diff import diff_traces

    a = _trace(tmp_path / "a", _call(1.40, 1.35, 1.44))
    same = _trace(tmp_path / "s", _call(1.42, 1.38, 1.47))
    d = diff_traces(a, same, code=False)
    (line,) = [ln for ln in d["lines"] if ln.startswith("compiled vs eager")]
    assert line.endswith("no change (timed in two processes: the rounds' ratios overlap)"), line
    assert not any(ln.startswith("line ") for ln in d["lines"])
    from tuidebug.viewers.diff_view import render_diff

    out = io.StringIO()
    render_diff(d, Console(file=out, width=160, color_system=None), code=False)
    assert "not compared part by part" in out.getvalue()  # noise is not shown as change
    better = _trace(tmp_path / "b", _call(2.0, 1.9, 2.1))
    d = diff_traces(a, better, code=False)
    (line,) = [ln for ln in d["lines"] if ln.startswith("compiled vs eager")]
    assert "B's compiled call is faster relative to eager" in line, line


def _rounds(call: dict, spread: float, n: int = 40) -> dict:
    """``call`` with the rounds' times: each round's eager/compiled ratio spread evenly over
    ``call['ratio']`` × (1 ± ``spread``)."""
    c = 1e-3
    ratios = [call["ratio"] * (1 - spread + 2 * spread * i / (n - 1)) for i in range(n)]
    return {**call, "times": {"compiled_s": [c] * n, "eager_s": [c * r for r in ratios]}}


def test_two_processes_differ_only_when_their_rounds_are_apart(tmp_path: Path) -> None:
    """Each trace's interval is of its own median; two traces timed in two processes (a busy
    machine's other moment, other threads) differ only when their rounds' ratios are apart as
    well — the recompile of a flag that changed nothing, under a CPU hog, read 'faster'."""
    from tuidebug.trace.diff import diff_traces

    a = _trace(tmp_path / "a", _rounds(_call(0.78, 0.77, 0.80), spread=0.3))
    b = _trace(tmp_path / "b", _rounds(_call(0.90, 0.89, 0.91), spread=0.3))
    (va,) = call_verdicts(a)
    assert va.ratio_p10 is not None and va.ratio_p10 < 0.78 < va.ratio_p90
    d = diff_traces(a, b, code=False)
    assert d["profile"]["calls_same"] is True  # intervals apart, rounds overlapping
    (line,) = [ln for ln in d["lines"] if ln.startswith("compiled vs eager")]
    assert "no change" in line and "faster" not in line, line
    c = _trace(tmp_path / "c", _rounds(_call(1.60, 1.58, 1.62), spread=0.1))
    d = diff_traces(a, c, code=False)
    assert d["profile"]["calls_same"] is False
    (line,) = [ln for ln in d["lines"] if ln.startswith("compiled vs eager")]
    assert "B's compiled call is faster relative to eager" in line, line


def test_perfetto_lays_the_ledger_out_in_call_order(tmp_path: Path) -> None:
    from tuidebug.trace.queries.perfetto import WHOLE_PID, chrome_trace

    events = chrome_trace(_trace(tmp_path, _call(0.76, 0.72, 0.80)))["traceEvents"]
    spans = [e for e in events if e.get("pid") == WHOLE_PID and e["ph"] == "X"]
    call = next(e for e in spans if e["name"] == "compiled call of Model")
    parts = [e for e in spans if e["tid"] == call["tid"] and e is not call]
    assert [e["cat"] for e in parts] == ["dynamo", "graph", "eager_island", "graph", "other"]
    assert all(a["ts"] + a["dur"] == b["ts"] for a, b in zip(parts, parts[1:]))
    assert abs(sum(e["dur"] for e in parts) - call["dur"]) < 1e-3
    assert parts[2]["args"]["line"] == 42 and "slower" in call["args"]["verdict"]


def test_a_backward_with_no_graph_recorded_is_named_by_its_compile() -> None:
    """A tiny Mixtral's training step (--profile): the ledger's part for compile 18/0's
    backward carried no graph (the trace holds no 18_0-backward) and info printed a row
    ``graph          (backward)`` with no name. It is named by its compile."""
    from tuidebug.viewers.ledger_view import ledger_rows

    rows = ledger_rows([
        {"part": "graph", "seconds": 1e-4, "compile_id": "19/0", "phase": "bwd",
         "graph": "19_0-backward"},
        {"part": "graph", "seconds": 5e-5, "compile_id": "18/0", "phase": "bwd"}])
    assert [r.what for r in rows] == ["19_0-backward (backward)",
                                      "compile 18/0, its graph not recorded (backward)"], rows
