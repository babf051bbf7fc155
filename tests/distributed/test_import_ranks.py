"""A multi-rank TORCH_TRACE folder (PyTorch's own logs of a real 2-rank job, tlparse's
``dedicated_log_torch_trace_rank_<N>`` naming) gets the cross-rank analysis of a traced job."""

from __future__ import annotations

import re

import pytest

from tests.distributed.test_ranks import _cli, _info

# tests/distributed's torch_trace_logs runs a 2-rank job (the shared one of that name is committed)
pytestmark = pytest.mark.slow


def test_info_on_a_multi_rank_log_folder_compares_the_ranks(torch_trace_logs, tmp_path) -> None:
    logs = sorted(p.name for p in torch_trace_logs.iterdir())
    assert [re.match(r"dedicated_log_torch_trace_rank_(\d+)_", n).group(1) for n in logs] == ["0", "1"]
    info = _info(torch_trace_logs)
    d = info["divergence"]
    assert d["kind"] == "compile_only_on_some_ranks", d
    assert d["reference_ranks"] == [0] and d["diverging_ranks"] == [1] and not d["on_reference"]
    breaks = d["reason"]["graph_break_reasons"]
    assert breaks and breaks[0]["where"] and breaks[0]["where"].split(":")[0].endswith("rank_job.py")
    assert info["launcher"] == "TORCH_TRACE" and info["world_size"] == 2
    assert info["imported_from"]["missing"]  # what the logs lack is said
    text = _cli("info", str(torch_trace_logs)).stdout
    assert "not in these logs" in text and "on rank(s) 1 only" in text
    # one rank of it, as before
    one = _cli("info", "--json", "--rank", "1", str(torch_trace_logs))
    assert one.returncode == 0 and '"divergence"' not in one.stdout
    # tuidebug import without --rank: every rank, into a job folder
    out = tmp_path / "job"
    proc = _cli("import", str(torch_trace_logs), "-o", str(out))
    assert (out / "rank_0" / "manifest.json").is_file() and (out / "rank_1" / "manifest.json").is_file()
    assert _info(out)["divergence"]["diverging_ranks"] == [1], proc.stderr
