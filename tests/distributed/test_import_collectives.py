"""Collectives from PyTorch's own TORCH_TRACE logs of real 2-rank jobs (``funcol_logs``: plain
torchrun, gloo, ``rank_job.py funcol`` / ``funcol_odd``): each imported graph gets
``collectives.json`` from its post-grad graph text and output code, and the job comparison of
the imported ranks uses it as it uses a captured one's."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.distributed.conftest import SCRIPT
from tests.distributed.test_ranks import _cli, _info
from tuidebug.trace.queries import collectives as coll
from tuidebug.trace.importers import collectives_text
from tuidebug.trace.importers.job_import import ensure_job

# what h() in rank_job.py issues on x = torch.ones(4, 3) and 2 ranks: an all_reduce of [4, 3],
# an all_gather (dim 0) of [4, 3] into [8, 3], a reduce_scatter of [8, 3] into [4, 3]
EXPECTED = [("all_reduce", [4, 3], [4, 3], {"reduce_op": "sum"}),
            ("all_gather_into_tensor", [4, 3], [8, 3], {"group_size": 2}),
            ("reduce_scatter_tensor", [8, 3], [4, 3], {"reduce_op": "sum", "group_size": 2})]


def _collectives(job: Path, rank: int) -> dict:
    return json.loads((job / f"rank_{rank}" / "graphs" / "0_0-inference" / "collectives.json")
                      .read_text())


def test_imported_ranks_list_the_collectives_the_script_issues(funcol_logs) -> None:
    job = ensure_job(funcol_logs["funcol"])
    for rank in (0, 1):
        data = _collectives(job, rank)
        assert data["rank"] == rank and data["imported"] is True
        assert data["issued_by_wrapper"] is True and data["reordered"] is False
        assert data["groups"] == {"0": {"name": "0", "ranks": None, "size": 2, "backend": None,
                                        "desc": None}}
        entries = data["collectives"]
        issued = [c for c in entries if c["op"] != "wait_tensor"]
        got = [(coll.op_name(c), c["inputs"][0]["shape"], c["outputs"][0]["shape"], c["args"])
               for c in issued]
        assert got == EXPECTED, got
        for c in issued:
            assert c["group"] == "0" and c["group_ranks"] is None
            assert [t["dtype"] for t in c["inputs"] + c["outputs"]] == ["float32", "float32"]
            assert c["bytes"] == 4 * c["inputs"][0]["shape"][0] * c["inputs"][0]["shape"][1]
            assert c["target"].startswith("_c10d_functional." + c["op"] + ".")
        # each collective's wait, right after it, names it; program order is the wrapper's
        waits = [c for c in entries if c["op"] == "wait_tensor"]
        assert [w["waits_for"] for w in waits] == [c["node"] for c in issued]
        assert [c["index"] for c in entries] == list(range(6))
        lines = [c["wrapper_line"] for c in entries]
        assert lines == sorted(lines) and all(c["kernel"] for c in entries)
        wrapper = (job / f"rank_{rank}" / "graphs" / "0_0-inference" / "code" /
                   "wrapper.py").read_text().splitlines()
        for c in entries:
            assert f"_c10d_functional.{c['op']}.default(" in wrapper[c["wrapper_line"] - 1]
        assert [c["fx_index"] for c in entries] == list(range(6))  # not reordered on the CPU
        # the innermost frame is torch's own (funcol's); the user's line is not in the log
        assert all(c["user_source"] is None and c["source"]["file"].endswith(
            "_functional_collectives.py") for c in entries)
    missing = json.loads((job / "rank_0" / "manifest.json").read_text())["imported_from"]["missing"]
    assert collectives_text.MISSING in missing


def test_imported_job_agrees_and_the_planted_divergence_is_named(funcol_logs) -> None:
    good = _info(funcol_logs["funcol"])
    assert good["divergence"] is None and good["notes"] == [], good["divergence"]
    assert "ranks agree" in _cli("info", str(funcol_logs["funcol"])).stdout
    odd = funcol_logs["funcol_odd"]
    d = _info(odd)["divergence"]
    assert d["kind"] == "collectives" and d["compile_id"] == "0/0", d
    assert d["reference_ranks"] == [0] and d["diverging_ranks"] == [1]
    # the third collective, the reduce_scatter_tensor: rank 1 reduces with "max" (rank_job.py)
    assert d["position"] == 2 and d["counts"] == [3, 3] and d["differs_in"] == ["arguments"]
    assert d["reference"]["op"] == d["diverging"]["op"] == "reduce_scatter_tensor"
    assert d["reference"]["args"]["reduce_op"] == "sum"
    assert d["diverging"]["args"]["reduce_op"] == "max"
    assert d["reference"]["tensors"] == d["diverging"]["tensors"] == ["float32[8,3]"]
    # the verdict is true: the logs themselves say so, rank by rank
    logs = {int(re.search(r"_rank_(\d+)_", p.name).group(1)): p.read_text()
            for p in odd.iterdir()}
    call = re.compile(r"_c10d_functional\.reduce_scatter_tensor\.default\(\w+, '(\w+)', 2, '0'\)")
    assert set(call.findall(logs[0])) == {"sum"} and set(call.findall(logs[1])) == {"max"}
    # with provenance in the log, the line that issued it is the user's, not torch's
    line = next(i for i, ln in enumerate(SCRIPT.read_text().splitlines(), 1)
                if "funcol.reduce_scatter_tensor(g," in ln)
    assert d["line"] == f"{SCRIPT}:{line}", d["line"]
    assert d["code"].startswith("r = funcol.reduce_scatter_tensor(g,"), d["code"]
    assert d["reference"]["kernel"].startswith("torch.ops._c10d_functional.reduce_scatter_tensor")
    job = ensure_job(odd)
    for rank in (0, 1):
        entries = _collectives(job, rank)["collectives"]
        users = [c["user_source"]["line"] for c in entries]
        assert users == [line - 2, line - 2, line - 1, line - 1, line, line], users
    text = _cli("info", str(odd)).stdout
    assert "collective sequence differs" in text and "reduce_op=max" in text, text


def test_a_group_only_one_side_issues_on_is_not_compared(funcol_logs, tmp_path) -> None:
    """An imported group's members are unknown: a group that only one of the two ranks uses
    (a tensor-parallel group of its own) is not compared; one both use is."""
    import shutil

    from tuidebug.trace.format.reader import Trace

    job = ensure_job(funcol_logs["funcol"])
    a = Trace(job / "rank_0").graph("0_0-inference")
    for name, expect in (("7", None), ("0", None)):
        t = tmp_path / f"rank_1_{name}"
        shutil.copytree(job / "rank_1", t)
        path = t / "graphs" / "0_0-inference" / "collectives.json"
        data = json.loads(path.read_text())
        extra = dict(data["collectives"][0], group=name, index=99, args={"reduce_op": "max"})
        data["collectives"].append(extra)
        path.write_text(json.dumps(data))
        d = coll.first_difference(a, Trace(t).graph("0_0-inference"), (0, 1))
        if name == "7":
            assert d is None, d  # group "7": only rank 1 issues on it
        else:
            assert d is not None and d["differs_in"] == ["a collective on one side only"], d
            assert d["position"] == 3 and d["diverging"]["args"] == {"reduce_op": "max"}
