"""The FX text parser (tuidebug.trace.format.fxtext) on graphs the real compiler printed.

``compiler_texts`` prints a Dynamo graph and an exported ATen graph with
``GraphModule.print_readable`` and records, from the GraphModule itself, every node's name, op,
inputs, users and tensor meta: the parse of the text must find exactly those.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tuidebug.trace.format import fxtext

FIXTURES = ROOT / "tests" / "fixtures"


def _graph(texts: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(g for g in texts["graphs"] if g["kind"] == kind)


def _check_against_module(parsed: fxtext.ParsedGraph, truth: dict[str, Any],
                          strides: bool) -> None:
    assert parsed.problems == [] and parsed.bad_lines == []
    want = truth["nodes"]
    got = {n["name"]: n for n in parsed.nodes}
    assert [n["name"] for n in parsed.nodes] == [n["name"] for n in want]
    for w in want:
        n = got[w["name"]]
        assert n["op"] == w["op"], w["name"]
        assert n["inputs"] == w["inputs"], w["name"]
        assert sorted(n["users"]) == sorted(w["users"]), w["name"]
        if w["op"] in ("placeholder", "output"):
            pass
        elif w["target"].startswith("aten."):
            assert n["target"] == w["target"], w["name"]
        meta = w["tensor"]
        if w["op"] == "output":
            continue
        if isinstance(meta, dict):
            t = n["tensor"]
            assert t is not None, w["name"]
            assert (t["dtype"], t["shape"]) == (meta["dtype"], meta["shape"]), w["name"]
            assert t["stride"] == (meta["stride"] if strides else None), w["name"]
            if strides:
                assert t["device"] == "cpu"
        elif isinstance(meta, list) and strides:
            # a tuple: the parts its getitems read are known, up to the last one read
            got_parts = [(x or {}).get("shape") for x in n["tensors"]]
            assert got_parts and got_parts == [x["shape"] for x in meta][: len(got_parts)], \
                w["name"]


@pytest.mark.parametrize("kind", ["dynamo", "aten"])
def test_printed_graph_parses_to_the_module_graph(compiler_texts: dict[str, Any],
                                                  kind: str) -> None:
    truth = _graph(compiler_texts, kind)
    _check_against_module(fxtext.parse_graph(truth["text"]), truth, strides=True)
    # print_readable's default text (no strides, no devices) reads the same way
    _check_against_module(fxtext.parse_graph(truth["text_plain"]), truth, strides=False)


def test_dynamo_graph_keeps_sources_and_module_paths(compiler_texts: dict[str, Any]) -> None:
    truth = _graph(compiler_texts, "dynamo")
    parsed = fxtext.parse_graph(truth["text"])
    calls = [n for n in parsed.nodes if n["op"] == "call_function"]
    assert calls and all(n["source"] and n["source"]["file"].endswith("compiler_texts.py")
                         for n in calls)
    gelu = next(n for n in calls if "gelu" in n["target"])
    assert "F.gelu" in gelu["source"]["code"] and gelu["source"]["fn"] == "forward"
    # the trace may have been made in another checkout (the committed traces): read this one's copy
    script = (FIXTURES / Path(gelu["source"]["file"]).name).read_text().split("\n")
    assert "F.gelu(" in script[gelu["source"]["line"] - 1]
    params = {n["name"]: n["module"] for n in parsed.nodes if n["op"] == "placeholder"}
    assert {"fc", "ln"} <= set(params.values()), params


def test_cut_text_keeps_every_statement_before_the_cut(compiler_texts: dict[str, Any]) -> None:
    truth = _graph(compiler_texts, "aten")
    text = truth["text"]
    lines = text.split("\n")
    body = [i for i, ln in enumerate(lines) if " = torch.ops.aten." in ln]
    cut = body[len(body) // 2]
    # cut inside the statement: its line is incomplete, the ones before it are whole
    damaged = "\n".join(lines[:cut] + [lines[cut][: len(lines[cut]) // 2]])
    parsed = fxtext.parse_graph(damaged)
    names = [n["name"] for n in parsed.nodes]
    whole = fxtext.parse_graph(text)
    before = [n["name"] for n in whole.nodes if n["op"] != "output"][: len(names)]
    assert names == before and len(names) < len(whole.nodes) - 1
    assert parsed.bad_lines, "the cut statement is reported"
    assert any("truncated or corrupt" in p for p in parsed.problems)


def test_text_without_a_graph() -> None:
    parsed = fxtext.parse_graph("print('hello')\n")
    assert parsed.nodes == [] and parsed.problems == ["no 'def forward' in the graph text"]
