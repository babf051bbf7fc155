"""Format 2: the large files of a trace stored compressed (``NAME.gz``, docs/trace-format.md).

The writer stores snapshots, IR, compile records and shapes, and provenance as ``NAME.gz`` (the
same text, the same bytes); the reader reads ``NAME`` from it, and a hostile ``NAME.gz`` — a
decompression bomb, a stream cut short or damaged, a link out of the trace, a FIFO — is refused
by name while the rest of the trace opens (docs/security.md). A job's rank digests and
``pack --redact`` read what the files hold, not their compressed bytes."""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

import pytest

from tests.trace.test_snapshot_dedup import NODES_A, NODES_B, _trace
from tuidebug.trace.archive.pack import pack
from tuidebug.trace.format import compressed, safefile, schema
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.jobs.rank_digest import UNREAD, Hashes, graph_print
from tuidebug.trace.format.manifest import GraphEntry

GRAPH = "0_0-inference"


def _stages(root: Path) -> Path:
    return root / schema.GRAPHS_DIR / GRAPH / "stages"


def _more(root: Path) -> TraceWriter:
    """A writer of more files into the trace ``_trace`` made (its manifest made again)."""
    w = TraceWriter(root, command=["test"])
    w.add_graph(GRAPH, kind="inference", compile_id="0/0")
    w.add_compile("0/0", {"graphs": [GRAPH]})
    w.finish(schema.STATUS_OK)
    return w


def _bomb(size: int) -> bytes:
    """``size`` blanks as a gzip stream, packed as tightly as zlib can (about 1000 to 1)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return c.compress(b" " * size) + c.flush()


def test_the_large_files_are_stored_compressed_and_read_as_written(tmp_path: Path) -> None:
    shapes = {"symbols": [], "guards": [{"kind": "shape", "expr": "s0 > 1"}], "specializations": []}
    root = _trace(tmp_path / "t", [NODES_A, NODES_B], shapes=shapes)
    w = _more(root)
    g = w.graph(GRAPH)
    g.write_ir("pre", [{"name": "buf0"}], "buf0: SchedulerNode\n")
    g.write_provenance({"kernels": {}})
    w.write_compile("0/0", {"guards": "g"})
    stored = sorted(str(p.relative_to(root)) for p in root.rglob("*.gz"))
    assert stored == ["compiles/0_0.json.gz", "compiles/0_0.shapes.json.gz",
                      f"graphs/{GRAPH}/ir_pre_fusion.json.gz", f"graphs/{GRAPH}/ir_pre_fusion.txt.gz",
                      f"graphs/{GRAPH}/provenance.json.gz", f"graphs/{GRAPH}/stages/000-stage0.json.gz",
                      f"graphs/{GRAPH}/stages/001-stage1.json.gz"]
    # what info reads first stays plain text
    assert (root / "compiles" / "0_0.shapes-brief.json").is_file()
    assert (root / schema.GRAPHS_DIR / GRAPH / "meta.json").is_file()
    t = Trace(root)
    gr = t.graph(GRAPH)
    assert t.manifest.format_version == schema.FORMAT_VERSION == 2
    assert [n.name for n in gr.stage_graph(1).nodes] == ["x", "relu", "neg"]
    assert gr.ir_pre == {"graph": GRAPH, "nodes": [{"name": "buf0"}]}
    assert gr.ir_text("pre") == "buf0: SchedulerNode\n"
    assert gr.provenance["kernels"] == {}
    assert t.compiles["0/0"]["guards"] == "g"
    assert t.compile_shapes("0/0")["symbols"] == [] and "guards" in t.compile_shapes("0/0")
    gr.check_files()
    assert not t.problems, t.problems
    # the same text packs to the same bytes (mtime 0): two traces' files compare by digest
    again = _trace(tmp_path / "u", [NODES_A, NODES_B])
    assert (_stages(root) / "001-stage1.json.gz").read_bytes() == \
        (_stages(again) / "001-stage1.json.gz").read_bytes()
    assert gr.same_file(Trace(again).graph(GRAPH), "stages/001-stage1.json")


def test_a_plain_file_beside_it_is_read_first_and_a_rewrite_removes_it(tmp_path: Path) -> None:
    root = _trace(tmp_path / "t", [NODES_A])
    plain = _stages(root) / "000-stage0.json"
    plain.write_text(json.dumps({"nodes": NODES_B}))
    assert len(Trace(root).graph(GRAPH).stage_graph(0)) == 3
    _more(root).graph(GRAPH).write_stage(0, "stage0", {"nodes": NODES_A})
    assert not plain.exists() and len(Trace(root).graph(GRAPH).stage_graph(0)) == 2


def _hostile(root: Path, data: bytes | None = None) -> tuple[Trace, list[str]]:
    """The first snapshot's ``.gz`` replaced by ``data`` (None: left as the caller made it);
    (the trace, its problems once the snapshot and the second one were read)."""
    gz = _stages(root) / "000-stage0.json.gz"
    if data is not None:
        gz.unlink()
        gz.write_bytes(data)
    t = Trace(root)
    g = t.graph(GRAPH)
    assert g.stage_graph(0) is None
    assert g.stage_graph(1) is not None  # the rest of the trace still reads
    return t, [str(p) for p in t.problems]


def test_a_decompression_bomb_is_refused_at_the_cap_never_inflated_whole(tmp_path: Path) -> None:
    root = _trace(tmp_path / "t", [NODES_A, NODES_B])
    bomb = _bomb(safefile.MAX_JSON_BYTES + 1)  # 64 MiB of blanks in 65 KB
    assert len(bomb) < 100_000
    _, problems = _hostile(root, bomb)
    assert any("000-stage0.json" in p and "decompression bomb" in p
               and f"{safefile.MAX_JSON_BYTES:,}-byte limit" in p for p in problems), problems
    # inflate stops one byte past the cap, whatever the stream would give
    with pytest.raises(safefile.Refused):
        compressed.inflate(compressed.pack(b"x" * 10_001), 10_000)
    out, cut = compressed.inflate(compressed.pack(b"x" * 10_001), 10_000, truncate=True)
    assert cut and len(out) == 10_000
    # a text (the IR) shown truncated, not refused; never more than its cap decompressed
    (root / schema.GRAPHS_DIR / GRAPH / "ir_post_fusion.txt.gz").write_bytes(
        compressed.pack(b"a\n" * (3 << 20)))
    t = Trace(root)
    text = t.graph(GRAPH).ir_text("post")
    assert text is not None and text.startswith("a\na\n") and "truncated" in text[-200:]
    assert any("ir_post_fusion.txt" in str(p) and "only the first" in str(p)
               for p in t.problems), t.problems


@pytest.mark.parametrize("damage, says", [
    (lambda b: b[:len(b) // 2], "cut short"),
    (lambda b: b[:12] + b"\xff" * 40 + b[52:], "damaged compressed data"),
    (lambda b: b + b"trailing", "bytes after the compressed data"),
    (lambda b: zlib.compress(b"{}"), "damaged compressed data"),  # zlib, not gzip
])
def test_a_damaged_compressed_snapshot_is_reported_by_name(tmp_path: Path, damage, says) -> None:  # type: ignore[no-untyped-def]
    root = _trace(tmp_path / "t", [NODES_A, NODES_B])
    good = (_stages(root) / "000-stage0.json.gz").read_bytes()
    _, problems = _hostile(root, damage(good))
    assert any("000-stage0.json" in p and says in p for p in problems), problems


def test_a_compressed_file_that_leads_out_or_is_not_a_file_is_not_read(tmp_path: Path) -> None:
    root = _trace(tmp_path / "t", [NODES_A, NODES_B])
    secret = tmp_path / "secret.json.gz"
    secret.write_bytes(compressed.pack(json.dumps({"nodes": NODES_B}).encode()))
    gz = _stages(root) / "000-stage0.json.gz"
    gz.unlink()
    gz.symlink_to(secret)
    _, problems = _hostile(root)
    assert any("000-stage0.json.gz" in p and "leads out of the trace" in p
               for p in problems), problems
    gz.unlink()
    os.mkfifo(gz)  # reading must not block
    _, problems = _hostile(root)
    assert any("000-stage0.json" in p and "FIFO" in p for p in problems), problems


def test_rank_digests_compare_what_the_files_hold(tmp_path: Path) -> None:
    """A rank that stored its snapshots plain (an older tuidebug) and one that stored them
    compressed hash the same; a damaged or bombed one differs, without being inflated whole."""
    packed = _trace(tmp_path / "a", [NODES_A, NODES_B])
    plain = _trace(tmp_path / "b", [NODES_A, NODES_B])
    for gz in sorted(_stages(plain).iterdir()):
        logical = gz.with_name(compressed.logical_name(gz.name))
        logical.write_bytes(compressed.read_bytes(logical, 1 << 20))
        gz.unlink()
    entry = GraphEntry(GRAPH, "inference", "0/0")
    a, b = (graph_print(r, entry, Hashes()) for r in (packed, plain))
    assert [s[0] for s in a["stages"]] == ["000-stage0.json", "001-stage1.json"]
    assert a["stages"] == b["stages"] and all(h for _, h in a["stages"])
    (_stages(packed) / "001-stage1.json.gz").write_bytes(_bomb(safefile.MAX_JSON_BYTES + 1))
    unread: dict[str, str] = {}
    c = graph_print(packed, entry, Hashes(), unread)
    assert c["stages"][0] == a["stages"][0] and c["stages"][1][1] == UNREAD
    (why,) = unread.values()
    assert "decompression bomb" in why


def test_a_redacted_pack_redacts_what_compressed_files_hold(tmp_path: Path) -> None:
    root = _trace(tmp_path / "t", [NODES_A])
    w = _more(root)
    w.write_compile("0/0", {"user_line": {"file": "/home/u/m.py", "line": 3, "code": "SECRET()"}})
    out = tmp_path / "t.tar.gz"
    manifest = pack(root, out, redact=True)
    assert "compiles/0_0.json" in manifest["files"]
    assert "compiles/0_0.json.gz" not in manifest["files"]
    import tarfile

    with tarfile.open(out) as tar:
        member = tar.extractfile("t/compiles/0_0.json")
        assert member is not None
        record = json.loads(member.read())
        names = tar.getnames()
    assert record["user_line"] == {"file": "/home/u/m.py", "line": 3, "code": None}
    assert not [n for n in names if n.endswith("0_0.json.gz")]
    assert "t/graphs/0_0-inference/stages/000-stage0.json" in names  # redacted: stored plain


@pytest.mark.parametrize("damage, says", [
    (lambda b: b[:len(b) // 2], "cut short (not a complete JSON object); not read"),
    (lambda b: b[:-8], "cut short (not a complete JSON object); not read"),  # no trailer
    (lambda b: compressed.pack(zlib.decompress(b, 31)[:-40]), "cut short (not a complete JSON"),
    (lambda b: b[:12] + b"\xff" * 40 + b[52:], "corrupt (damaged compressed data"),
])
def test_a_compressed_snapshot_cut_short_is_caught_at_open_as_a_plain_one_is(
        tmp_path: Path, damage, says) -> None:  # type: ignore[no-untyped-def]
    """The integrity check ``info`` runs (``check_files``, no snapshot parsed) tells a
    compressed snapshot cut short (a half-copied trace) as it tells a plain one; before, it
    skipped every ``.gz`` and the trace opened as sound."""
    root = _trace(tmp_path / "t", [NODES_A, NODES_B])
    gz = _stages(root) / "000-stage0.json.gz"
    gz.write_bytes(damage(gz.read_bytes()))
    t = Trace(root)
    t.graph(GRAPH).check_files()
    problems = [str(p) for p in t.problems]
    assert len(problems) == 1 and problems[0].startswith(
        f"graphs/{GRAPH}/stages/000-stage0.json: {says}"), problems
    # the plain file cut short says the same
    plain = _trace(tmp_path / "p", [NODES_A, NODES_B])
    stage = _stages(plain) / "000-stage0.json"
    stage.write_bytes(zlib.decompress((_stages(plain) / "000-stage0.json.gz").read_bytes(),
                                      31)[:-40])
    (_stages(plain) / "000-stage0.json.gz").unlink()
    tp = Trace(plain)
    tp.graph(GRAPH).check_files()
    assert [str(p) for p in tp.problems] == [
        f"graphs/{GRAPH}/stages/000-stage0.json: cut short (not a complete JSON object); "
        "not read"], tp.problems


def test_a_capped_text_reads_only_the_head_of_a_large_compressed_file(tmp_path: Path) -> None:
    """A compressed text over the JSON cap (64 MiB stored: incompressible bytes) shown
    truncated, as the plain file would be: only what the head takes is read and decompressed.
    Before, the whole stored file was read first and refused over 64 MiB."""
    root = _trace(tmp_path / "t", [NODES_A, NODES_B])
    ir = root / schema.GRAPHS_DIR / GRAPH / "ir_post_fusion.txt.gz"
    head = b"buf0: SchedulerNode\n" * 1000
    c = zlib.compressobj(1, zlib.DEFLATED, 31)
    with open(ir, "wb") as f:
        f.write(c.compress(head))
        for _ in range(66):  # random bytes do not compress: 66 MiB stored
            f.write(c.compress(os.urandom(1 << 20)))
        f.write(c.flush())
    assert ir.stat().st_size > safefile.MAX_JSON_BYTES
    t = Trace(root)
    text = t.graph(GRAPH).ir_text("post")
    assert text is not None and text.startswith(head.decode()), (text or "")[:200]
    assert "truncated" in text[-200:], text[-200:]
    assert any("ir_post_fusion.txt" in str(p) and "only the first" in str(p)
               for p in t.problems), t.problems
    assert not any("limit" in str(p) for p in t.problems), t.problems
    # a head is read, not the file: the stream stops one byte past the cap
    data, cut = compressed.inflate_file(ir, 1000, truncate=True)
    assert cut and data == head[:1000]


def test_the_open_check_of_a_compressed_snapshot_is_a_peek(tmp_path: Path) -> None:
    """Review: the check ``info`` and every MCP summary run (``check_files``: stat and a peek)
    decompressed each ``.gz`` snapshot to its end, and one holding more than the JSON cap
    64 MiB before dropping it. Now a snapshot ``pack`` wrote is peeked at as a plain one is:
    its head and its last bytes of content, read from its end. So damage in its middle is
    told when it is read, not at open (as for a plain file); and a snapshot over the cap is
    peeked at all the same, its size told when it is read (its bytes after the cap are damaged
    here: had they been decompressed, the check would say so)."""
    root = _trace(tmp_path / "t", [NODES_A, NODES_B])
    gz = _stages(root) / "000-stage0.json.gz"
    text = json.dumps({"nodes": NODES_A, "pad": os.urandom(200_000).hex()}).encode()
    packed = compressed.pack(text)
    mid = len(packed) // 2
    gz.write_bytes(packed[:mid] + b"\xff" * 64 + packed[mid + 64:])
    t = Trace(root)
    t.graph(GRAPH).check_files()
    assert not t.problems, t.problems
    assert len(packed) > 200_000
    with pytest.raises(ValueError):
        compressed.inflate_file(gz, safefile.MAX_JSON_BYTES)  # what a read of it meets
    # over the cap: 1 KiB of blanks more than the cap, then damage, then pack's marked end
    c = zlib.compressobj(1, zlib.DEFLATED, 31)
    body = c.compress(b" " * (safefile.MAX_JSON_BYTES + 1024)) + c.flush(zlib.Z_SYNC_FLUSH)
    last = b'{"nodes": []}'
    crc = zlib.crc32(b" " * (safefile.MAX_JSON_BYTES + 1024) + last)
    end = zlib.compressobj(1, zlib.DEFLATED, -15)
    over = (body[:len(body) // 2] + b"\x07" * 200 + body[len(body) // 2 + 200:]
            + c.flush(zlib.Z_FULL_FLUSH) + end.compress(last) + end.flush()
            + crc.to_bytes(4, "little")
            + ((safefile.MAX_JSON_BYTES + 1024 + len(last)) & 0xFFFFFFFF).to_bytes(4, "little"))
    assert compressed.tail(_write(gz, over), safefile.MAX_JSON_BYTES) == last
    t = Trace(root)
    t.graph(GRAPH).check_files()
    assert not t.problems, t.problems


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path
