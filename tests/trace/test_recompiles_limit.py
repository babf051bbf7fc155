"""Which recompile limit a compile hit (trace/recompiles.explain): the one Dynamo names, with
its value — the per-function ``recompile_limit`` of the shared dynamic-shapes trace, and the
accumulated limit when Dynamo's words name that one instead."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import plain
from tuidebug.trace.queries.dynamic import compile_dynamic
from tuidebug.trace.format.reader import Trace


def test_the_limit_named_is_the_one_dynamo_hit(dynamic_trace: Path, copy_trace) -> None:
    real = compile_dynamic(Trace(dynamic_trace), "3/2")["recompile"]
    assert real["limit_hit"] and real["limit_name"] == "recompile_limit" and real["limit"] == 2
    assert "torch._dynamo.config.recompile_limit = 2" in real["suggestion"]
    # the same compile as Dynamo words a hit of the accumulated limit (every compile of the
    # code object): "exceeding the accumulated_recompile_limit …, Limit type: …"
    t = copy_trace(dynamic_trace)
    path = plain(t / "compiles" / "3_2.json")
    c = json.loads(path.read_text())
    m = c["metrics"]
    assert re.search(r"\brecompile_limit\b", m["fail_reason"]), m["fail_reason"]
    m["fail_reason"] = re.sub(r"\brecompile_limit\b", "accumulated_recompile_limit",
                              m["fail_reason"]).replace("currently set to 2", "currently set to 7")
    config = json.loads(m["dynamo_config"])
    config["accumulated_recompile_limit"] = 7
    m["dynamo_config"] = json.dumps(config)
    path.write_text(json.dumps(c))
    acc = compile_dynamic(Trace(t), "3/2")["recompile"]
    assert acc["limit_hit"] and acc["limit_name"] == "accumulated_recompile_limit", acc
    assert acc["limit"] == 7 and "config.accumulated_recompile_limit = 7" in acc["suggestion"]
