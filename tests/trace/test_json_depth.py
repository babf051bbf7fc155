"""``safefile.loads`` refuses JSON nested deeper than ``MAX_DEPTH``: its depth measure (the
parsed value walked without recursion) against a recursive depth of the value, at the limit and
one past it, on random JSON whose strings hold quotes, backslashes and brackets (no bracket in a
string counts), with empty arrays and objects as the deepest level."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from tuidebug.trace.format import safefile


def _depth(v: Any) -> int:
    if isinstance(v, dict):
        return 1 + max((_depth(x) for x in v.values()), default=0)
    if isinstance(v, list):
        return 1 + max((_depth(x) for x in v), default=0)
    return 0


def _nest(v: Any, levels: int) -> Any:
    for _ in range(levels):
        v = [v]
    return v


def _random_json(rnd: random.Random, chars: str, longest: int, strings: float):
    """``(text, value)``: random strings of ``chars``, and random values ``d`` levels deep
    (a string with probability ``strings`` at a leaf, else a small integer)."""
    def text() -> str:
        return "".join(rnd.choice(chars) for _ in range(rnd.randrange(longest)))

    def value(d: int) -> Any:
        if d == 0 or rnd.random() < 0.2:
            return text() if rnd.random() < strings else rnd.randrange(9)
        if rnd.random() < 0.5:
            return [value(d - 1) for _ in range(rnd.randrange(1, 4))]
        return {text(): value(d - 1) for _ in range(rnd.randrange(1, 4))}
    return text, value


def test_depth_is_measured_outside_strings() -> None:
    rnd = random.Random(7)
    text, value = _random_json(rnd, 'ab[]{}"\\ ', 8, 0.7)

    verdicts = set()
    for _ in range(600):
        v = value(6)
        for _ in range(rnd.choice([safefile.MAX_DEPTH - 1, safefile.MAX_DEPTH,
                                   safefile.MAX_DEPTH + 1, 40]) - 6):
            v = [v, text()] if rnd.random() < 0.5 else {text(): v}
        if rnd.random() < 0.3:  # an empty array or object as deep as the rest, or deeper
            empty = _nest(rnd.choice([[], {}]), _depth(v) - rnd.randrange(2))
            v = {"deepest": v, "empty": empty}
        raw = json.dumps(v, indent=rnd.choice([None, 1]))
        deep = _depth(v) > safefile.MAX_DEPTH
        verdicts.add(deep)
        if deep:
            with pytest.raises(json.JSONDecodeError, match="nested deeper"):
                safefile.loads(raw)
        else:
            assert safefile.loads(raw) == v
    assert verdicts == {True, False}


def test_a_snapshot_like_text_is_measured_by_its_levels_as_by_the_walk() -> None:
    """Many short strings and no escape (a graph snapshot): ``loads`` counts the levels on the
    bytes (``_levels_ok``) — the same verdict as the walk and as a recursive depth, at the limit
    and one past it, strings holding brackets, empty containers the deepest level."""
    rnd = random.Random(11)
    text, value = _random_json(rnd, "ab[]{} ", 6, 0.8)

    verdicts, checked = set(), 0
    for _ in range(600):
        v = value(5)
        for _ in range(rnd.choice([safefile.MAX_DEPTH - 1, safefile.MAX_DEPTH,
                                   safefile.MAX_DEPTH + 1, 30]) - 5):
            v = [v, text()] if rnd.random() < 0.5 else {text(): v}
        if rnd.random() < 0.3:
            v = {"deepest": v, "empty": _nest(rnd.choice([[], {}]), _depth(v) - rnd.randrange(2))}
        raw = json.dumps([v, ["node", "op", "x"] * 200]).encode()  # short strings: the byte path
        if not safefile._short_strings(raw):
            continue
        checked += 1
        deep = _depth(json.loads(raw)) > safefile.MAX_DEPTH
        verdicts.add(deep)
        assert safefile._levels_ok(raw, passes=safefile.MAX_DEPTH) == \
            safefile._depth_ok(json.loads(raw)) == (not deep)
        # with the usual few passes: right or undecided (then walked), never wrong
        assert safefile._levels_ok(raw) in (None, not deep)
        assert safefile._nesting_ok(raw, json.loads(raw)) == (not deep)
        if deep:
            with pytest.raises(json.JSONDecodeError, match="nested deeper"):
                safefile.loads(raw)
        else:
            assert safefile.loads(raw) == json.loads(raw)
    assert checked > 300 and verdicts == {True, False}, (checked, verdicts)
