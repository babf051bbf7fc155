"""Collectives read from an untrusted TORCH_TRACE log: malformed collective calls in a post-grad
graph and in the output code (missing and extra arguments, wrong types, a 5,000-digit group
size in the output code, escapes in a group's name, a wait on nothing, 10,000 nested brackets) import without a
traceback, and neither the import, ``info`` nor the ranks' comparison puts an escape on screen."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.conftest import Case
from tests.faults import hostile
from tests.faults.test_hostile_traces import _log_line, data_escapes, run_cli

IDS = {"frame_id": 0, "frame_compile_id": 0, "attempt": 0}
EVIL = json.dumps(hostile.EVIL)  # a Python string literal of it (JSON's escapes are Python's)
ONE_LINE = hostile.EVIL.replace("\r\n", " ")  # a comment of the graph is one line
OPS = "torch.ops._c10d_functional"
# a provenance stack (the user's line of a call) with escapes in its file, function and code
STACK = (f'  File "{hostile.ESC}{hostile.MARKUP}.py", line 3, in {ONE_LINE}\n'
         f'    {hostile.EVIL}\n') * 3


def _graph(group: str) -> str:
    return "\n".join([
        "class GraphModule(torch.nn.Module):",
        '    def forward(self, arg0_1: "f32[4][1]cpu"):',
        f"        # File: /x/torch/distributed/c.py:1 in {ONE_LINE}, code: {ONE_LINE}",
        f'        all_reduce: "f32[4][1]cpu" = {OPS}.all_reduce_.default(arg0_1, \'sum\', {group})',
        f'        wait_tensor: "f32[4][1]cpu" = {OPS}.wait_tensor.default(all_reduce)',
        f'        gather: "f32[8][1]cpu" = {OPS}.all_gather_into_tensor.default()',
        f'        scatter: "f32[?][1]cpu" = {OPS}.reduce_scatter_tensor.default(arg0_1, '
        f"[[[[1]]]], {{'a': 1}}, {'9' * 40}, {EVIL}, 7, 8)",
        f'        nowait: "f32[4][1]cpu" = {OPS}.wait_tensor.default(nothing_here)',
        f'        bcast: "junk" = {OPS}.broadcast_.default(arg0_1, \'zero\', [\'0\'], src=[{EVIL}])',
        f'        c10d: "f32[4][1]cpu" = torch.ops.c10d.allreduce_.default([arg0_1], {EVIL})',
        f'        odd: "f32[4][1]cpu" = {OPS}..default(arg0_1)',
        f'        cut: "f32[4][1]cpu" = {OPS}.all_to_all_single.default(arg0_1, [1, 2',
        "        return (wait_tensor,)",
    ])


def _code(group: str) -> str:
    calls = [
        f"{OPS}.all_reduce_.default(arg0_1, 'sum', {group})",
        f"{OPS}.wait_tensor.default(arg0_1[{EVIL}])",
        f"buf1 = {OPS}.all_gather_into_tensor.default(" + "(" * 10_000 + ")" * 10_000,
        f"{OPS}.reduce_scatter_tensor.default(arg0_1, 'sum'",
        f"{OPS}.wait_tensor.default()",
        f"buf2 = {OPS}.all_to_all_single.default(arg0_1, {'9' * 5000}, {EVIL}, '0')",
        f"{OPS}.wait_tensor.default(buf2); {OPS}.wait_tensor.default(buf1)",
        f"{OPS}.broadcast_.default(buf2, {EVIL}, {{}})",
    ]
    lines = ["def call(args):", "    arg0_1, = args",
             f"    # [Provenance debug handles] {OPS}.all_reduce_.default:2"]
    for c in calls:  # each extern call after its comment, as Inductor writes them
        lines += ["    # Topologically Sorted Source Nodes: [x], Original ATen: [x]",
                  f"    {c}"]
    return "\n".join(lines + ["    return (arg0_1, )"])


def _record(meta: dict, rank: int, payload: str) -> str:
    """A record with its payload (tab-indented lines) and the payload's true md5."""
    md5 = hashlib.md5(payload.encode()).hexdigest()
    return "\n".join([_log_line({**meta, "rank": rank, **IDS, "has_payload": md5}),
                      *("\t" + line for line in payload.split("\n"))])


def _log(path: Path, rank: int, group: str) -> None:
    stacks = json.dumps({f"{OPS}.all_reduce_.default:2": [STACK, 5, None], "x": 7})
    path.write_text("\n".join([
        _log_line({"dynamo_start": {"stack": []}, "rank": rank, **IDS}),
        _record({"artifact": {"name": "inductor_post_grad_graph", "encoding": "string"}}, rank,
                _graph(group)),
        _record({"inductor_output_code": {"filename": "x.py"}}, rank, _code(group)),
        _record({"artifact": {"name": "inductor_provenance_tracking_kernel_stack_traces",
                              "encoding": "json"}}, rank, stacks),
        _log_line({"compilation_metrics": {"co_name": "f"}, "rank": rank, **IDS}),
    ]) + "\n")


def test_malformed_collective_calls_in_a_log(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             case: Case) -> None:
    case.note = "malformed collectives in a TORCH_TRACE log"
    logs = tmp_path / "logs"
    logs.mkdir()
    _log(logs / "dedicated_log_torch_trace_rank_0_a.log", 0, "'0'")
    _log(logs / "dedicated_log_torch_trace_rank_1_b.log", 1, EVIL)
    rc, text = run_cli(["import", str(logs / "dedicated_log_torch_trace_rank_1_b.log"),
                        "-o", str(tmp_path / "one")], capsys)
    assert not data_escapes(text), data_escapes(text)[:5]
    data = json.loads((tmp_path / "one" / "graphs" / "0_0-inference" / "collectives.json")
                      .read_text())
    ops = [c["op"] for c in data["collectives"]]
    assert "all_reduce_" in ops and "reduce_scatter_tensor" in ops and "allreduce_" in ops, ops
    assert data["groups"] and all(isinstance(k, str) for k in data["groups"])
    assert data["issued_by_wrapper"] and any(c.get("kernel") for c in data["collectives"])
    first = data["collectives"][0]
    assert first["user_source"] and first["user_source"]["line"] == 3, first
    for args in (["info", str(tmp_path / "one")], ["info", "--json", str(tmp_path / "one")],
                 ["info", str(logs)], ["info", "--json", str(logs)]):
        rc, text = run_cli(args, capsys)
        assert rc in (0, 1), text[-2000:]
        assert not data_escapes(text), data_escapes(text)[:5]
    rc, text = run_cli(["info", "--json", str(logs)], capsys)
    d = json.JSONDecoder().raw_decode(text[text.index("{"):])[0]["divergence"]
    assert d is not None and d["kind"] in ("collectives", "graph"), d  # group '0' vs the evil one
    case.survived = True
    case.data_lost = False
