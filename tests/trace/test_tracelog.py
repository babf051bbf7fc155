"""Reading TORCH_TRACE logs (tuidebug.trace.importers.tracelog) on logs the real compiler wrote.

The checks recompute what a log says about itself (each record's header, the md5 of its payload)
independently of the reader, then damage copies of the log and expect exactly the damaged
records to be reported.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from tuidebug.trace.importers import parsers, records, tracelog

_HEADER = re.compile(r"^[VIWEC]\d{4} [\d:.]+ +\d+ [^\]]*\] (\{.*)$")


def _headers(log: Path) -> list[tuple[int, dict[str, Any], list[str]]]:
    """(line, header JSON, payload lines) of each record, as the log spells them."""
    out: list[tuple[int, dict[str, Any], list[str]]] = []
    for i, line in enumerate(log.read_text(encoding="utf-8").split("\n"), 1):
        if line.startswith("\t"):
            out[-1][2].append(line[1:])
        elif line:
            m = _HEADER.match(line)
            assert m, line[:100]
            out.append((i, json.loads(m[1]), []))
    return out


def _kept(meta: dict[str, Any]) -> bool:
    """Records the reader keeps: not the interned strings, not payload-less tensor notes."""
    if "str" in meta:
        return False
    return not (any(k in meta for k in ("describe_storage", "describe_tensor",
                                        "describe_source")) and "has_payload" not in meta)


def _check_log(log: Path) -> tracelog.LogScan:
    scan = tracelog.scan(log)
    assert scan.warnings == [] and scan.bad_lines == 0
    expected = [h for h in _headers(log) if _kept(h[1])]
    assert [r.lineno for r in scan.records] == [h[0] for h in expected]
    assert scan.lines == len(log.read_text(encoding="utf-8").split("\n")) - 1
    with open(log, "rb") as f:
        for i, (rec, (line, meta, payload)) in enumerate(zip(scan.records, expected,
                                                              strict=True)):
            assert rec.meta == meta and rec.index == i
            assert rec.payload_lines == len(payload) and rec.has_payload == bool(payload)
            text = tracelog.read_payload(f, rec)
            assert text == "\n".join(payload)
            if meta.get("has_payload"):
                md5 = hashlib.md5("\n".join(payload).encode()).hexdigest()
                assert md5 == meta["has_payload"] and rec.payload_ok, line
            if rec.event == "chromium_event":
                event = json.loads(text)
                assert rec.chromium == {k: event[k] for k in tracelog.CHROMIUM_KEYS}
    return scan


def test_scan_reads_every_record_of_a_real_log(compiler_texts: dict[str, Any]) -> None:
    log = compiler_texts["log"]
    assert tracelog.is_torch_trace_file(log)
    assert not tracelog.is_torch_trace_file(compiler_texts["model"] / "output_code.py")
    scan = _check_log(log)
    names = {r.name for r in scan.records}
    for n in ("dynamo_start", "dynamo_output_graph", "inductor_output_code",
              "compilation_metrics", "chromium_event", "artifact:fx_graph_runnable"):
        assert n in names, sorted(names)
    # the stacks of dynamo_start name their files by interned number: every number is known
    starts = [r for r in scan.records if r.event == "dynamo_start"]
    files = {fr["filename"] for r in starts for fr in r.meta["dynamo_start"]["stack"]}
    assert files and all(f in scan.strings for f in files)
    assert any(scan.strings[f].endswith("compiler_texts.py") for f in files)
    assert all(r.pid == scan.records[0].pid for r in scan.records)


def test_scan_every_shared_log(torch_trace_logs: dict[str, Path]) -> None:
    from tuidebug.trace import importers

    scanned = {}
    for name, d in torch_trace_logs.items():
        for log in importers.trace_logs(d):
            scanned[name] = scanned.get(name, 0) + 1
            scan = _check_log(log)
            assert scan.records, name
            if name == "ddp":
                assert scan.rank == importers.log_rank(log) and scan.rank in (0, 1)
            else:
                assert scan.rank is None
    assert scanned.keys() == torch_trace_logs.keys() and scanned["ddp"] >= 2, scanned


def _damaged(src: Path, dst: Path, edit: Any) -> Path:
    lines = src.read_text(encoding="utf-8").split("\n")
    dst.write_text("\n".join(edit(lines)), encoding="utf-8")
    return dst


def test_damage_is_reported_where_it_is(compiler_texts: dict[str, Any], tmp_path: Path) -> None:
    log = compiler_texts["log"]
    scan = tracelog.scan(log)
    graph = next(r for r in scan.records if r.name == "dynamo_output_graph")
    code = next(r for r in scan.records if r.name == "inductor_output_code")

    def flip(lines: list[str]) -> list[str]:
        i = graph.lineno + 1  # 0-based index of the graph's second payload line
        lines[i] += "  # changed"
        lines.insert(code.lineno - 1, "this line is garbage")
        return lines

    bad = tracelog.scan(_damaged(log, tmp_path / "bad.log", flip))
    assert len(bad.records) == len(scan.records) and bad.bad_lines == 1
    hurt = [r.lineno for r in bad.records if not r.payload_ok]
    assert hurt == [graph.lineno]
    assert any(f"line {graph.lineno}: payload of dynamo_output_graph" in w
               and "checksum mismatch" in w for w in bad.warnings), bad.warnings
    assert any(f"line {code.lineno}: not a TORCH_TRACE record" in w for w in bad.warnings)

    # a log cut in the middle of the output code: that record is the last, and damaged
    cut = tracelog.scan(_damaged(log, tmp_path / "cut.log",
                                 lambda lines: lines[: code.lineno + 3]))
    assert cut.records[-1].lineno == code.lineno and not cut.records[-1].payload_ok
    assert all(r.payload_ok for r in cut.records[:-1])


def test_every_record_has_one_pure_parser(compiler_texts: dict[str, Any]) -> None:
    """Each record of a real log goes to one parser; parsing twice gives the same facts."""
    log = compiler_texts["log"]
    scan = tracelog.scan(log)
    seen: dict[str, int] = {}
    with open(log, "rb") as f:
        for rec in scan.records:
            env = records.Envelope(rec, "0/0", scan.strings, log.name, f)
            a, b = parsers.REGISTRY.parse(env), parsers.REGISTRY.parse(env)
            assert repr(a) == repr(b), rec.name
            for fact in a:
                seen[type(fact).__name__] = seen.get(type(fact).__name__, 0) + 1
    for kind in ("Snapshot", "OutputCode", "Metrics", "Chromium", "Touch", "SetDetail"):
        assert seen.get(kind), seen
