"""Crafted compressed snapshots (``NAME.gz``, format 2) and the integrity check a trace's
opening runs (``check_files``: a peek at the head and at the last bytes of content, read from
the file's end). Its verdict never rests on the gzip trailer's length field (ISIZE: the
content's size mod 2^32, whatever a crafter writes): a lying or wrapped length gives the verdict
the same content with its true length gives, and how much a snapshot holds is told when it is
read (refused over the cap), as a plain file's size is. A first gzip member that ends in the
head, with more bytes after it, is told at open; the read refuses what any member hides."""

from __future__ import annotations

import json
import random
import zlib
from pathlib import Path

import pytest

from tests.trace.test_snapshot_dedup import NODES_A, NODES_B, _trace
from tuidebug.trace.format import compressed, safefile, schema
from tuidebug.trace.format.reader import Trace

GRAPH = "0_0-inference"
CAP = safefile.MAX_JSON_BYTES
HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # gzip, deflate, no name, mtime 0


def _raw(data: bytes) -> bytes:
    """``data`` as raw deflate blocks ending in a full flush: not final, byte-aligned, the
    dictionary reset (blocks so made can follow one another, or be repeated)."""
    c = zlib.compressobj(1, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush(zlib.Z_FULL_FLUSH)


def _gzip(body: bytes, last: bytes, length: int, crc: int = 0) -> bytes:
    """A gzip member as ``pack`` writes one: ``body`` (raw blocks), then a full flush's end and
    ``last`` in a final block, then the trailer with ``crc`` and the length field ``length``."""
    end = zlib.compressobj(1, zlib.DEFLATED, -15)
    return (HEADER + body + end.compress(last) + end.flush() + crc.to_bytes(4, "little")
            + (length & 0xFFFFFFFF).to_bytes(4, "little"))


def _snapshot(root: Path) -> Path:
    return root / schema.GRAPHS_DIR / GRAPH / "stages" / "000-stage0.json.gz"


def _open_verdict(tmp_path: Path, name: str, data: bytes) -> list[str]:
    """The problems ``check_files`` finds in a trace whose first snapshot is ``data``."""
    root = _trace(tmp_path / name, [NODES_A, NODES_B])
    _snapshot(root).write_bytes(data)
    t = Trace(root)
    t.graph(GRAPH).check_files()
    return [str(p) for p in t.problems]


# within the cap: a snapshot of 400 KB (200 KB stored: peeked at, not read whole)
SMALL = json.dumps({"nodes": NODES_A, "pad": random.Random(0).randbytes(200_000).hex()}).encode()
ENDS = {"whole": b'{"nodes": []}', "cut short": b'{"nodes": [{"name": "x", "op"'}


@pytest.mark.parametrize("end", list(ENDS))
@pytest.mark.parametrize("lie", [0, 14, CAP + 1, 0xFFFFFFFF])
def test_a_lying_length_gives_the_verdict_of_the_true_one(tmp_path: Path, end: str,
                                                         lie: int) -> None:
    """Over the cap (64 MiB and 1 KiB of blanks, 64 KB stored) and within it: the open verdict
    is the one the same stream with its true length gets. Before, a length over the cap made
    the check skip the last bytes (a cut-short snapshot opened as sound) and one within it on
    over 64 MiB made it judge them: the same bytes, two verdicts."""
    last = ENDS[end]
    over = _raw(b" " * (CAP + 1024))
    small = _raw(SMALL)
    for name, body, content in (("over", over, b" " * (CAP + 1024) + last),
                                ("within", small, SMALL + last)):
        true = _gzip(body, last, len(content), zlib.crc32(content))
        assert len(true) > 2 * 65536  # peeked at, not read whole
        said = _open_verdict(tmp_path, f"{name}-true", true)
        lied = _open_verdict(tmp_path, f"{name}-{lie}", _gzip(body, last, lie,
                                                             zlib.crc32(content)))
        assert lied == said, (name, lied, said)
        if end == "cut short":
            assert len(said) == 1 and "cut short (not a complete JSON object)" in said[0], said
        else:
            assert said == [], said
        # what a read meets: over the cap refused at the cap, a false length damaged
        crafted = _snapshot(tmp_path / f"{name}-{lie}")
        if name == "over":
            with pytest.raises(safefile.Refused):
                compressed.inflate_file(crafted, CAP)
        elif lie != len(content):
            with pytest.raises(ValueError, match="damaged compressed data"):
                compressed.inflate_file(crafted, CAP)


@pytest.mark.parametrize("end", list(ENDS))
def test_content_of_4_gib_or_more_wraps_its_length(tmp_path: Path, end: str) -> None:
    """4 GiB and 1 MiB of blanks (4 MB stored): the length field holds 1 MiB and a little, as
    gzip writes it (mod 2^32). The open verdict is that of the same stream with a length over
    the cap (never the 4 GiB inflated: a block in the middle is damaged, and nothing says so
    at open); the read refuses it at the cap. Before, a wrapped length over a stream not
    ending a JSON object was 'cut short' where the length over the cap said nothing."""
    last = ENDS[end]
    block = _raw(b" " * (1 << 20))
    blocks = [block] * ((4 << 10) + 1)
    blocks[len(blocks) // 2] = b"\x07" * len(block)  # damage no peek reaches
    body = b"".join(blocks)
    content = (4 << 30) + (1 << 20) + len(last)
    wrapped = _gzip(body, last, content)
    assert 1 << 20 < int.from_bytes(wrapped[-4:], "little") < CAP
    said = _open_verdict(tmp_path, "over", _gzip(body, last, CAP + 1))
    assert _open_verdict(tmp_path, "wrapped", wrapped) == said
    assert said == ([] if end == "whole" else [
        f"graphs/{GRAPH}/stages/000-stage0.json: cut short (not a complete JSON object); "
        "not read"]), said
    with pytest.raises(safefile.Refused):  # the damage lies past the cap: never reached
        compressed.inflate_file(_snapshot(tmp_path / "wrapped"), CAP)


def test_a_second_member_after_one_ending_in_the_head(tmp_path: Path) -> None:
    """A small gzip member, then a snapshot as ``pack`` writes it: the peek at the end finds
    the second member's marked end, but the first ends within the head and more follows. Told
    at open as the read tells it (before, the check said nothing). A first member of blanks
    over the cap (not ended in the head) is told when read: refused at the cap."""
    second = compressed.pack(SMALL[:-1] + b"}")
    first = compressed.pack(json.dumps({"nodes": NODES_A}).encode())
    said = _open_verdict(tmp_path, "two", first + second)
    assert said == [f"graphs/{GRAPH}/stages/000-stage0.json: corrupt (bytes after the "
                    "compressed data); not read"], said
    with pytest.raises(ValueError, match="bytes after the compressed data"):
        compressed.inflate_file(_snapshot(tmp_path / "two"), CAP)
    bomb = _gzip(_raw(b" " * (CAP + 1024)), b"", CAP + 1024, zlib.crc32(b" " * (CAP + 1024)))
    _open_verdict(tmp_path, "bomb-first", bomb + second)
    t = Trace(tmp_path / "bomb-first")
    assert t.graph(GRAPH).stage_graph(0) is None
    assert any("000-stage0.json" in str(p) and "decompression bomb" in str(p)
               for p in t.problems), t.problems
