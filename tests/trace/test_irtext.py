"""Inductor's scheduler-node dumps (tuidebug.trace.importers.irtext) on text the real compiler
wrote (``ir_pre_fusion.txt`` / ``ir_post_fusion.txt`` of a TORCH_COMPILE_DEBUG folder).

The checks hold for any correct reading of one compile: fusion only groups the nodes before it
(each once), writes stay with their nodes, every read is a graph input or another node's write,
and the node kinds agree with the output code Inductor generated from them.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tuidebug.trace.importers import irtext


@pytest.fixture(scope="module")
def ir(compiler_texts: dict[str, Any]) -> dict[str, Any]:
    model = compiler_texts["model"]
    pre_text = (model / "ir_pre_fusion.txt").read_text()
    post_text = (model / "ir_post_fusion.txt").read_text()
    return {"pre": irtext.parse_ir_text(pre_text, "g"), "post": irtext.parse_ir_text(post_text),
            "pre_text": pre_text, "code": (model / "output_code.py").read_text()}


def test_nodes_before_fusion(ir: dict[str, Any]) -> None:
    pre = ir["pre"]
    assert pre["graph"] == "g"
    nodes = pre["nodes"]
    headers = re.findall(r"^(\w+): \w+\(", ir["pre_text"], re.M)
    assert [n["name"] for n in nodes] == headers and len(nodes) >= 3
    writes: list[str] = []
    for n in nodes:
        assert n["members"] == [n["name"]] and n["ir_type"], n
        assert n["writes"], n
        writes += n["writes"]
    assert len(writes) == len(set(writes)), "a buffer is written by one node"


def test_fusion_groups_every_node_once(ir: dict[str, Any]) -> None:
    pre, post = ir["pre"]["nodes"], ir["post"]["nodes"]
    members = [m for n in post for m in n["members"]]
    assert sorted(members) == sorted(n["name"] for n in pre)
    assert irtext.fused_count(ir["post"]) == len(pre) - len(post) > 0
    assert irtext.fused_count(ir["pre"]) == 0
    by_name = {n["name"]: n for n in pre}
    for n in post:  # a fused node writes what its members write, and reads nothing they write
        assert sorted(n["writes"]) == sorted(w for m in n["members"] for w in by_name[m]["writes"])
        assert not set(n["reads"]) & set(n["writes"])
        assert n["is_reduction"] == any(by_name[m]["is_reduction"] for m in n["members"])
        assert (n["ir_type"] is None) == (len(n["members"]) > 1)


def test_reads_users_and_kinds_agree_with_the_code(ir: dict[str, Any]) -> None:
    code = ir["code"]
    m = re.search(r"^\s+((?:\w+, )*\w+),? = args$", code, re.M)
    assert m, "the wrapper unpacks its inputs"
    inputs = set(m[1].split(", "))
    for which in ("pre", "post"):
        nodes = ir[which]["nodes"]
        written = {w for n in nodes for w in n["writes"]}
        names = {n["name"] for n in ir["pre"]["nodes"]}
        for n in nodes:
            assert set(n["reads"]) <= written | inputs, (n["name"], n["reads"])
            assert set(n["users"]) <= names, (n["name"], n["users"])
            if not n["is_extern"]:
                assert n["device"] == "cpu", n
        externs = [n for n in nodes if n["is_extern"]]
        assert bool(externs) == ("extern_kernels." in code)
        assert any(n["is_reduction"] for n in nodes)  # layer norm, var_mean, sum
        assert any(not n["is_reduction"] and not n["is_extern"] for n in nodes)  # gelu …
    kernels = set(re.findall(r"^(cpp_fused_\w+) = async_compile", code, re.M))
    assert 1 <= len(kernels) <= sum(not n["is_extern"] for n in ir["post"]["nodes"])


def test_cut_text_keeps_the_nodes_before_the_cut(ir: dict[str, Any]) -> None:
    text = ir["pre_text"]
    whole = [n["name"] for n in ir["pre"]["nodes"]]
    for frac in (0.25, 0.5, 0.75):
        part = irtext.parse_ir_text(text[: int(len(text) * frac)])
        names = [n["name"] for n in part["nodes"]]
        assert names == whole[: len(names)] and 0 < len(names) <= len(whole)
    assert irtext.parse_ir_text("")["nodes"] == []
    assert irtext.parse_ir_text("not IR at all\nx = 1\n")["nodes"] == []
