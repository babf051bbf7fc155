"""The summary ``tuidebug import`` prints is built from what the import wrote, kept in memory
(``format/written.py``), not read back from the files: the same summary, problems included, as
a reader of the files gets, on every committed TORCH_TRACE log. Reads committed logs only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tuidebug.trace import importers
from tuidebug.trace.format import schema
from tuidebug.trace.format.reader import Trace
from tuidebug.trace.format.written import Written
from tuidebug.trace.queries.summary import trace_summary


def _summary(tr: Trace, *, kernel_sizes: bool) -> dict[str, Any]:
    s = json.loads(json.dumps(trace_summary(tr, kernel_sizes=kernel_sizes), default=str))
    s.pop("trace", None)
    return s


def test_the_import_summary_is_the_files_summary_from_memory(
        torch_trace_logs: dict[str, Path], tmp_path: Path) -> None:
    seen = 0
    for name, folder in sorted(torch_trace_logs.items()):
        for log in importers.trace_logs(folder):
            out, written = tmp_path / f"{name}-{log.stem}", Written()
            importers.import_path(log, out, written=written)
            kept = [p for p in out.rglob("*.json*")
                    if written.document(p.relative_to(out).as_posix().removesuffix(".gz"))]
            assert kept, name
            for sizes in (False, True):
                mem, disk = Trace(out, written=written), Trace(out)
                assert _summary(mem, kernel_sizes=sizes) == _summary(disk, kernel_sizes=sizes), \
                    (name, sizes)
                assert mem.problems == disk.problems, name
            seen += 1
    assert seen >= len(torch_trace_logs), seen


def test_what_the_import_wrote_is_read_from_memory_not_the_files(
        torch_trace_logs: dict[str, Path], tmp_path: Path) -> None:
    """A document the import wrote, changed on disk since: the summary given the import's
    ``Written`` says what the import wrote (it read nothing back); a reader of the files sees
    the change. A file the import never wrote (advice.json, written later) is read from disk."""
    log = importers.trace_logs(torch_trace_logs["mlp"])[0]
    out, written = tmp_path / "t", Written()
    importers.import_path(log, out, written=written)
    before = _summary(Trace(out, written=written), kernel_sizes=False)
    assert before["config_changed"] != ["max_autotune"], before["config_changed"]
    config = out / schema.CONFIG
    assert written.document(schema.CONFIG) is not None
    config.write_text(json.dumps({"values": {}, "changed": {"max_autotune": {
        "value": True, "default": False}}, "set_by_tuidebug": []}))
    assert _summary(Trace(out, written=written), kernel_sizes=False) == before
    assert _summary(Trace(out), kernel_sizes=False)["config_changed"] == ["max_autotune"]
    assert written.document(schema.ADVICE) is None
