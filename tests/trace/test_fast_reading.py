"""The fast paths of the one reading path give what the careful ones give: a whole JSON-lines
file checked once and its lines parsed by the C decoder (``safefile.loads_lines``), and a
well-formed file passed by ``shapes.check`` without copying (``_valid``)."""

from __future__ import annotations

import copy
import random

from tuidebug.trace.format import safefile, shapes

DEEP = b"[" * (safefile.MAX_DEPTH + 1) + b"]" * (safefile.MAX_DEPTH + 1)


def _one_by_one(raws: list[bytes]) -> list[object]:
    out: list[object] = []
    for raw in raws:
        try:
            out.append(safefile.loads(raw))
        except (UnicodeDecodeError, ValueError):
            out.append(ValueError)
    return out


def _batched(raws: list[bytes]) -> list[object]:
    return [ValueError if isinstance(v, ValueError) else v for v in safefile.loads_lines(raws)]


def test_lines_read_together_as_one_by_one() -> None:
    cases = [
        [b'{"a": 1}', b'{"b": [1, 2, {"c": null}]}', b"NaN", b'"x"'],
        [b'{"a": 1}', b"{broken", b'{"b": 2}'],
        [b"[[[", b'{"ok": 1}', b"]]]"],  # unbalanced lines around a good one
        [b"]]]", b"[[[1]]]"],
        [b'{"n": 1' + b"0" * 400 + b"}", b'{"m": 1e400}', b'{"k": 2}'],  # past a float's range
        [b'{"s": "\\ud800"}', b'{"t": "ok"}'],  # a lone surrogate escape
        [DEEP, b"[1]"],
        [b"\xff\xfe", b'{"u": 1}'],  # not UTF-8
        [b'1, 2', b"[3", b"4]"],
    ]
    looped = 0
    for raws in cases:
        assert _batched(raws) == _one_by_one(raws), raws
        looped += 1
    assert looped == len(cases)


def test_a_valid_file_is_passed_through_and_an_invalid_one_checked_as_before() -> None:
    node = {"name": "relu", "op": "call_function", "target": "aten.relu", "args": [],
            "kwargs": {}, "inputs": ["x"], "users": [], "tensor": {"dtype": "float32"},
            "tensors": None, "source": None, "module": "", "module_type": ""}
    good = {"graph": "g", "stage": "s", "nodes": [dict(node, name=f"n{i}") for i in range(20)],
            "changes": {"added": ["n1"], "removed": [], "changed": []}}
    messages: list[str] = []
    before = copy.deepcopy(good)
    assert shapes.check("snapshot", good, messages.append) is good and not messages
    rnd = random.Random(7)
    compared = 0
    for _ in range(300):
        bad = copy.deepcopy(good)
        target = rnd.choice(bad["nodes"] + [bad["changes"], bad])
        key = rnd.choice(sorted(target))
        target[key] = rnd.choice([None, 1, True, "s", [], {}, 2.5, [1], {"a": 1}])
        careful: list[str] = []
        expected = shapes._check(copy.deepcopy(bad), shapes.SHAPES["snapshot"], "",
                                 careful.append)
        got: list[str] = []
        result = shapes.check("snapshot", copy.deepcopy(bad), got.append, limit=10**6)
        assert result == (None if expected is shapes._DROP else expected)
        assert got == careful
        compared += 1
    assert compared == 300
    assert good == before  # the check changed nothing in a valid snapshot
