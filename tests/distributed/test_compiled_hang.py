"""A hang inside compiled code (torchrun + gloo, 2 ranks): a compiled function's functional
all_reduce that rank 1 stops calling. ``--timeout`` ends the job; first each rank's stacks and
the collective it is in are recorded, and ``info`` says where each one waits."""

from __future__ import annotations

import json

import pytest

from tests.distributed.test_hang import _alive, _line_of
from tests.distributed.test_ranks import _cli, _info

pytestmark = pytest.mark.slow


def test_each_rank_s_wait_inside_compiled_code_is_located(compiled_hang_job) -> None:
    job, proc = compiled_hang_job
    assert proc.returncode == 1 and "stopped after --timeout" in proc.stderr, proc.stderr[-3000:]
    info = _info(job)
    ranks = {r["rank"]: r for r in info["ranks"]}
    assert [ranks[r]["status"] for r in (0, 1)] == ["timed_out", "timed_out"]
    collective_line = f"rank_job.py:{_line_of('STALL the compiled all_reduce')}"
    # rank 0: in the wait of the third all_reduce, issued by the compiled graph's wrapper
    p0 = ranks[0]["progress"]
    assert p0["phase"] == "script" and p0["graph"] == "0_0-inference", p0
    c0 = p0["collective"]
    assert (c0["op"], c0["seq"], c0["state"], c0["in_wait"]) == ("all_reduce", 3, "waiting", True)
    assert c0["line"] == collective_line, c0
    k = c0["compiled"]
    assert (k["graph"], k["index"]) == ("0_0-inference", 0), k
    wrapper = (job / "rank_0" / "graphs" / "0_0-inference" / "code" / "wrapper.py").read_text()
    assert "_c10d_functional.all_reduce_" in wrapper.splitlines()[k["wrapper_line"] - 1]
    [issued] = [c for c in json.loads((job / "rank_0" / "graphs" / "0_0-inference" /
                                       "collectives.json").read_text())["collectives"]
                if c["op"] == "all_reduce_"]
    assert issued["wrapper_line"] == k["wrapper_line"]
    # rank 1: asleep in the script, its two all_reduces done
    p1 = ranks[1]["progress"]
    c1 = p1["collective"]
    assert (c1["seq"], c1["state"], c1["compiled"]["graph"]) == (2, "done", "0_0-inference")
    stack = p1["stack"]
    assert stack["user"] == f"rank_job.py:{_line_of('STALL rank 1')} (compiled_hang)", stack
    assert ranks[0]["progress"]["stack"]["user"].startswith("rank_job.py:"), ranks[0]
    [m] = info["waits"]["mismatches"]
    assert (m["kind"], m["ranks"], m["waits_for"], m["seq"]) == ("waits_for_ranks", [0], [1], 3)
    text = " ".join(_cli("info", str(job)).stdout.split())
    assert (f"rank 0 waits in all_reduce #3 of graph 0_0-inference (collective 0 in it, "
            f"wrapper line {k['wrapper_line']}, {collective_line})") in text, text
    assert (f"rank 1 is at rank_job.py:{_line_of('STALL rank 1')} (compiled_hang)") in text
    assert "outside any collective" in text
    assert "its last collective all_reduce #2 of graph 0_0-inference" in text
    assert "was waited for" in text and "may wait for it" not in text
    # each rank's own trace: stopped by --timeout while it ran, not crashed
    from tuidebug.trace.format.reader import Trace

    assert [Trace(job / f"rank_{r}").status for r in (0, 1)] == ["stopped", "stopped"]
    assert "STOPPED" in _cli("info", str(job), "--rank", "1").stdout
    # nothing of the job left running
    pids = [json.loads((job / "job" / f"rank_{r}.json").read_text())["pid"] for r in (0, 1)]
    pids += [json.loads((job / f"rank_{r}" / "manifest.json").read_text())["pid"] for r in (0, 1)]
    assert not [p for p in pids if _alive(p)]
