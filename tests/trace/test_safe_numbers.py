"""``safefile.loads``' cheap checks keep its guarantees: an integer past a float's range is
refused and a float past it reads as null wherever it sits in the text, every float checked
(not only those a prefilter flags); the digit-run prefilter (every 31st byte first) finds every
run the full scan finds; a lone surrogate's escape is found with or without other escapes."""

from __future__ import annotations

import json
import random
import re

import pytest

from tuidebug.trace.format import safefile

LIMIT = safefile.MAX_INT_DIGITS


def test_a_float_past_a_float_s_range_reads_as_null_with_a_two_digit_exponent() -> None:
    """211 digits before the point and an exponent of 99: 1e309, infinity. The old prefilter
    looked only for 309 digits in a row or a 3-digit exponent, and the C decoder read it as
    ``inf``; every float is checked now."""
    big = "1" + "0" * 210 + "e99"
    assert safefile.loads(f"[{big}, -{big}, 2.5e99, 1{'0' * 150}.5e99]".encode()) == \
        [None, None, 2.5e99, float("1" + "0" * 150 + ".5e99")]
    assert safefile.loads_lines([f'{{"t": {big}}}'.encode(), b'{"u": 1.5}']) == \
        [{"t": None}, {"u": 1.5}]


def test_integers_past_a_float_are_refused_at_every_position() -> None:
    """A 309-digit integer is refused and a 308-digit one read, at each of 62 offsets in the
    text (the prefilter looks at every 31st byte), in a long text and a short one."""
    looped = 0
    for offset in range(62):
        pad = " " * offset
        for filler in ("", ', "x": "' + "ab" * 400 + '"'):
            with pytest.raises(ValueError, match="309 digits"):
                safefile.loads(f'{pad}{{"n": {"7" * (LIMIT + 1)}{filler}}}'.encode())
            assert safefile.loads(f'{pad}{{"n": -{"7" * LIMIT}{filler}}}'.encode())["n"] == \
                -int("7" * LIMIT)
            looped += 1
    assert looped == 124


def test_the_digit_run_prefilter_finds_what_the_full_scan_finds() -> None:
    """On texts of digit runs 250-330 long (and periodic digits that fill the sampled bytes
    without a long run), ``_long_digit_run`` says what a plain search for 309 digits says."""
    rnd = random.Random(5)
    verdicts, looped = set(), 0
    for _ in range(400):
        parts = []
        for _ in range(rnd.randrange(1, 6)):
            parts.append(rnd.choice([" ", ", ", '"a', "e", "-", ".", "\n"]) * rnd.randrange(1, 40))
            parts.append("".join(rnd.choice("0123456789")
                                 for _ in range(rnd.choice([rnd.randrange(250, 330), 5]))))
        if rnd.random() < 0.3:
            parts.append("[" + ", ".join(["123456"] * 200) + "]")  # 9 sampled digits in a row
        raw = "".join(parts).encode()
        expected = re.search(rb"[0-9]{%d}" % (LIMIT + 1), raw) is not None
        assert safefile._long_digit_run(raw) == expected, raw[:80]
        verdicts.add(expected)
        looped += 1
    assert looped == 400 and verdicts == {True, False}


def test_digits_and_escapes_in_strings_are_data() -> None:
    """A 400-digit run inside a string, an escaped backslash before ``ud800`` (text, not an
    escape) and a lone surrogate escape beside other escapes: read as ``json.loads`` reads
    them, the lone surrogate alone replaced."""
    data = {"digits": "9" * 400, "backslash": "\\ud800 is text", "n": [int("9" * LIMIT), 1.5]}
    raw = json.dumps(data).encode()
    assert safefile.loads(raw) == data
    mixed = b'{"a": "x\\n\\t\\"\\ud83d\\ude00", "b": "\\uDBFFz", "c": "\\\\uD800"}'
    assert safefile.loads(mixed) == {"a": 'x\n\t"\U0001F600', "b": "\ufffdz", "c": "\\uD800"}
    assert safefile.loads_lines([b'{"a": "\\ud800"}', b'{"b": "\\\\ud800"}']) == \
        [{"a": "\ufffd"}, {"b": "\\ud800"}]


def test_valid_json_reads_as_json_loads_reads_it() -> None:
    """Random values (ints up to 308 digits, finite floats from tiny to 1e308, strings of
    digits, escapes and non-ASCII): what ``loads`` gives is ``json.loads``' value."""
    rnd = random.Random(3)

    def leaf() -> object:
        kind = rnd.randrange(5)
        if kind == 0:
            return int("".join(rnd.choice("123456789") for _ in range(rnd.randrange(1, LIMIT + 1))))
        if kind == 1:
            return rnd.choice([1e308, -1e-300, 5e-324, 2.5, 0.1]) * rnd.random()
        if kind == 2:
            return "".join(rnd.choice("0123456789e+-.") for _ in range(rnd.randrange(400)))
        if kind == 3:
            return "".join(rnd.choice('ab\\"\n\u00e9\U0001F600') for _ in range(rnd.randrange(20)))
        return None

    looped = 0
    for _ in range(200):
        value = {str(i): [leaf() for _ in range(rnd.randrange(1, 8))] for i in range(6)}
        raw = json.dumps(value, ensure_ascii=rnd.random() < 0.5).encode()
        assert safefile.loads(raw) == json.loads(raw)
        looped += 1
    assert looped == 200
