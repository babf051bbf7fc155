"""The lazy TORCH_TRACE import on the real logs of the test suite: an intact printed graph is kept
as text (``stages/NNN-<stage>.txt``) and parsed when it is opened; what ``info`` says, every
snapshot, what each stage changed and the provenance are the same as an import that parses every
graph at once (``parse_graphs=True``, the import as it was). Reads committed logs only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tuidebug.trace import importers
from tuidebug.trace.format import compressed, fxtext
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.importers import parsers, tracelog
from tuidebug.trace.importers.torch_trace import TorchTraceImporter
from tuidebug.trace.queries.summary import trace_summary

# the records whose payload is a printed graph (a Snapshot fact)
GRAPH_RECORDS = frozenset(n for n, p in parsers.REGISTRY.by_name.items()
                          if isinstance(p, parsers.GraphParser))


def _logs(torch_trace_logs: dict[str, Path]) -> list[tuple[str, Path]]:
    out = [(name, log) for name, d in sorted(torch_trace_logs.items())
           for log in importers.trace_logs(d)]
    assert {n for n, _ in out} == set(torch_trace_logs), out
    return out


def _summary(tr: Trace) -> dict[str, Any]:
    s = json.loads(json.dumps(trace_summary(tr), default=str))
    s.pop("trace", None)
    s["imported_from"].pop("import_seconds")
    return s


def _import(log: Path, out: Path, *, parse_graphs: bool) -> Trace:
    TorchTraceImporter(log, out, parse_graphs=parse_graphs).run()
    return Trace(out)


def test_lazy_import_says_what_the_eager_import_says(torch_trace_logs: dict[str, Path],
                                                      tmp_path: Path) -> None:
    texts = snapshots = 0
    for name, log in _logs(torch_trace_logs):
        lazy = _import(log, tmp_path / f"{name}-{log.stem}-lazy", parse_graphs=False)
        eager = _import(log, tmp_path / f"{name}-{log.stem}-eager", parse_graphs=True)
        assert _summary(lazy) == _summary(eager), name
        for gl, ge in zip(lazy.graphs, eager.graphs, strict=True):
            assert gl.id == ge.id
            assert [(s.index, s.name, s.kind, s.nodes, s.duration_s) for s in gl.stages] == \
                [(s.index, s.name, s.kind, s.nodes, s.duration_s) for s in ge.stages], gl.id
            for sl, se in zip(gl.stages, ge.stages, strict=True):
                assert bool(sl.file) == bool(se.file)
                if not sl.file:
                    continue
                assert se.file.endswith(".json"), se.file
                texts += sl.file.endswith(".txt")
                snapshots += 1
                a, b = gl.stage_graph(sl), ge.stage_graph(se)
                assert a is not None and b is not None
                assert a.to_json()["nodes"] == b.to_json()["nodes"], (name, gl.id, sl.name)
                assert gl.stage_changes(sl) == ge.stage_changes(se), (name, gl.id, sl.name)
                if sl.changed is not None:  # a stage kept as text: not compared at import
                    assert sl.changed == se.changed
            assert gl.provenance == ge.provenance, (name, gl.id)
            assert gl.collectives == ge.collectives, (name, gl.id)
        assert lazy.problems == eager.problems == [], name
    assert snapshots > 40 and texts == snapshots, (texts, snapshots)


def test_a_stage_kept_as_text_is_found_by_name_and_reports_damage(
        torch_trace_logs: dict[str, Path], tmp_path: Path) -> None:
    tr = _import(importers.trace_logs(torch_trace_logs["transformer"])[0], tmp_path / "t",
                 parse_graphs=False)
    g = next(g for g in tr.graphs if g.kind == "forward")
    post = g.find_stage("post_grad")
    assert post is not None and post.file and post.file.endswith(".txt")
    assert g.find_stage(Path(post.file).stem) == post
    # the file cut in the middle of a statement: the rest is kept, the damage reported
    path = g.dir / post.file  # stored compressed (NAME.gz): damaged as a plain file
    assert not path.exists()
    text = compressed.read_bytes(path, 1 << 26).decode()
    path.write_text(text[: text.index("(", len(text) // 2) + 3])  # inside a call
    path.with_name(path.name + ".gz").unlink()
    damaged = Trace(tr.root).graph(g.id)
    graph = damaged.stage_graph(damaged.find_stage("post_grad"))
    assert graph is not None and 0 < len(graph) < (post.nodes or 0)
    assert any(p.file.endswith(post.file) for p in damaged.trace.problems), \
        damaged.trace.problems


def test_index_of_every_printed_graph_matches_its_parse(torch_trace_logs: dict[str, Path]) -> None:
    """``fxtext.index_graph`` (what the import keeps: node count, node sources) agrees with a
    full parse on every printed graph of the real logs."""
    seen = 0
    for name, log in _logs(torch_trace_logs):
        scan = tracelog.scan(log)
        with open(log, "rb") as f:
            for rec in scan.records:
                if rec.name not in GRAPH_RECORDS or not rec.has_payload:
                    continue
                text = tracelog.read_payload(f, rec)
                index, parsed = fxtext.index_graph(text), fxtext.parse_graph(text)
                assert index is not None, (name, rec.lineno, rec.name)
                assert index.nodes == len(parsed.nodes), (name, rec.lineno)
                assert index.sources == {n["name"]: n["source"] for n in parsed.nodes
                                         if n.get("source") and n["op"] != "placeholder"}
                seen += 1
    assert seen > 40, seen


@pytest.mark.parametrize("chunk", [7, 4096])
def test_scan_in_small_chunks_reads_the_same_records(torch_trace_logs: dict[str, Path],
                                                     tmp_path: Path, chunk: int,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The scanner reads a log a chunk at a time: records, payload spans, checksums and
    damage reports do not depend on where the chunks end (CRLF lines and a cut included)."""
    log = importers.trace_logs(torch_trace_logs["graph_break"])[0]
    data = log.read_bytes()
    variants = {"plain": data, "crlf": data.replace(b"\n", b"\r\n"),
                "cut": data[: len(data) * 2 // 3],
                "garbage": data.replace(b"\n\t", b"\n\n\t", 3).replace(b"\nV", b"\nnot a log line\nV", 2)}
    for label, content in variants.items():
        path = tmp_path / f"{label}.log"
        path.write_bytes(content)
        whole = tracelog.scan(path)
        monkeypatch.setattr(tracelog, "_CHUNK", chunk)
        small = tracelog.scan(path)
        monkeypatch.undo()
        assert [vars(r) for r in small.records] == [vars(r) for r in whole.records], label
        assert (small.warnings, small.lines, small.bad_lines, small.strings) == \
            (whole.warnings, whole.lines, whole.bad_lines, whole.strings), label
        assert whole.records and (label in ("cut", "garbage")) == bool(whole.warnings), label


def test_checksums_checked_when_read_are_the_scans(torch_trace_logs: dict[str, Path],
                                                   tmp_path: Path) -> None:
    """The import leaves the checksums of printed graphs and code to be checked as they are
    read (``check_when_read``): each record's verdict, and the damage reported, are the scan's
    own, on a plain log, with CR LF line ends, cut, with garbage lines and with a graph's
    payload changed."""
    log = importers.trace_logs(torch_trace_logs["graph_break"])[0]
    data = log.read_bytes()
    at = data.index(b"\n\t", data.index(b'"dynamo_output_graph"')) + 2  # a graph's payload
    variants = {"plain": data, "crlf": data.replace(b"\n", b"\r\n"),
                "cut": data[: len(data) * 2 // 3],
                "garbage": data.replace(b"\nV", b"\nnot a log line\nV", 2),
                "changed": data[:at] + b"x" + data[at:]}
    deferred = 0
    for label, content in variants.items():
        path = tmp_path / f"{label}.log"
        path.write_bytes(content)
        whole = tracelog.scan(path)
        late = tracelog.scan(path, check_when_read=parsers.READ_WHOLE)
        with open(path, "rb") as f:
            for a, b in zip(whole.records, late.records, strict=True):
                if b.payload_md5:
                    deferred += 1
                    assert b.name in parsers.READ_WHOLE
                    if b.lineno % 2:  # read, or only checked
                        assert tracelog.read_payload(f, b) == tracelog.read_payload(f, a)
                    tracelog.check_payload(f, b)
                assert not b.payload_md5
                assert vars(a) == vars(b), (label, a.lineno)
        # the scan's reports, but for the checksums it left to the read (the import reports
        # those, by the same function)
        left = [tracelog.checksum_warning(path.name, r) for r in whole.records
                if r.name in parsers.READ_WHOLE and not r.payload_ok and r.payload_start >= 0]
        assert (label == "changed") == bool(left), label
        assert set(left) <= set(whole.warnings), label
        assert late.warnings == [w for w in whole.warnings if w not in left], label
    assert deferred > 20, deferred


def test_fake_tensor_headers_are_skipped_unread_but_a_cut_one_is_reported(
        torch_trace_logs: dict[str, Path], tmp_path: Path) -> None:
    """The scan skips the fake-tensor metadata headers (describe_*: not used by the trace)
    without parsing them; one cut short is still read, and reported by its line."""
    log = importers.trace_logs(torch_trace_logs["graph_break"])[0]
    lines = log.read_bytes().split(b"\n")
    described = [i for i, ln in enumerate(lines) if b'] {"describe_tensor"' in ln]
    assert len(described) > 10, len(described)
    cut = described[len(described) // 2]
    lines[cut] = lines[cut][: len(lines[cut]) - 7]
    path = tmp_path / "cut.log"
    path.write_bytes(b"\n".join(lines))
    whole, damaged = tracelog.scan(log), tracelog.scan(path)
    assert not any(r.event.startswith("describe_") for r in whole.records)
    def seen(r: tracelog.Record) -> tuple[Any, ...]:  # the byte offsets moved by the cut
        return (r.lineno, r.event, r.meta, r.payload_ok, r.payload_lines, r.first_payload_line)

    assert [seen(r) for r in damaged.records] == [seen(r) for r in whole.records]
    assert damaged.warnings == [f"{path.name}: line {cut + 1}: record is truncated or corrupt "
                                f"({w.split('(', 1)[1]}" for w in damaged.warnings[:1]]
    assert damaged.bad_lines == whole.bad_lines + 1
