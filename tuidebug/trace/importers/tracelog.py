"""Reading a TORCH_TRACE structured log (the file tlparse reads). Pure text; no torch.

Each record is one glog-style header line, ``V1122 22:53:46.163000 10110 torch/x.py:12] {JSON}``,
where the JSON object names the event (``{"dynamo_output_graph": {...}, "frame_id": 0, ...}``)
and, when it has ``"has_payload": "<md5>"``, is followed by the payload: lines that start with a
tab. The md5 of the payload is checked, so a cut or damaged payload is noticed.

``scan`` reads a log once and returns its records with their payloads' byte ranges (payloads are
read again only when needed, so a log of gigabytes never sits in memory). Damaged lines are
reported with their line numbers and skipped; the records around them are kept.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tuidebug.trace.format import safefile

_HEADER_RE = re.compile(
    rb"^(?:\[rank\d+\]:)?(?P<level>[VIWEC])(?P<md>\d{4}) (?P<time>\d\d:\d\d:\d\d\.\d+) +"
    rb"(?P<thread>\d+) (?P<where>[^\]]*)\] (?P<json>\{.*)$")

_DESCRIBE = (b'{"describe_storage"', b'{"describe_tensor"', b'{"describe_source"')

# Keys of a record that are not its event name
COMMON_KEYS = frozenset({
    "frame_id", "frame_compile_id", "attempt", "compiled_autograd_id", "has_payload", "rank",
    "timestamp", "pathname", "lineno", "thread",
})

MAX_WARNINGS = 200
CHROMIUM_KEYS = ("name", "ph", "ts")  # what Record.chromium keeps of a chromium_event


@dataclass
class Record:
    lineno: int  # 1-based line of the header
    event: str  # the event key, e.g. "dynamo_output_graph" or "artifact"
    meta: dict[str, Any]
    pid: int | None = None
    time: str = ""  # "MMDD HH:MM:SS.ffffff" as written (glog has no year)
    payload_start: int = -1  # byte offset of the first payload line; -1: no payload
    payload_end: int = -1
    payload_lines: int = 0
    payload_ok: bool = True  # md5 matched (or there was no checksum to check)
    # the md5 left to check when the payload is read (``scan``'s ``check_when_read``); "" once
    # checked, or when the scan checked it
    payload_md5: str = ""
    first_payload_line: str = ""  # the first payload line, for cheap peeks (AOT ID, ...)
    chromium: dict[str, Any] | None = None  # a chromium_event payload's CHROMIUM_KEYS
    index: int = -1  # position in LogScan.records

    @property
    def name(self) -> str:
        """The event name, with an artifact's own name: ``artifact:fx_graph_runnable``."""
        if self.event == "artifact":
            art = self.meta.get("artifact")
            if isinstance(art, dict):
                return f"artifact:{art.get('name', '?')}"
        return self.event

    @property
    def has_payload(self) -> bool:
        return self.payload_start >= 0


@dataclass
class LogScan:
    path: Path
    records: list[Record] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    strings: dict[int, str] = field(default_factory=dict)  # interned file names ("str" records)
    lines: int = 0
    bad_lines: int = 0
    rank: int | None = None
    _warn_overflow: int = 0

    def warn(self, message: str) -> None:
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(message)
        else:
            self._warn_overflow += 1

    def finish_warnings(self) -> None:
        if self._warn_overflow:
            self.warnings.append(f"… and {self._warn_overflow} more problems in {self.path.name} "
                                 "not listed")
            self._warn_overflow = 0


def _event_key(meta: dict[str, Any]) -> str | None:
    for k in meta:
        if k not in COMMON_KEYS:
            return k
    return None


def scan(path: str | Path, *, check_when_read: frozenset[str] = frozenset()) -> LogScan:
    """Read the headers of every record of a log; payloads are checked, not kept. The payloads
    of records named in ``check_when_read`` (big texts that are read anyway: printed graphs,
    code) are checked when read (``read_payload``, ``check_payload``), not by the scan: each of
    their bytes is then rewritten and hashed once, not twice."""
    p = Path(path)
    out = LogScan(p)
    with safefile.open_regular(p) as f:
        _scan(f, out, check_when_read)
    out.finish_warnings()
    return out


def checksum_warning(log_name: str, rec: Record) -> str:
    return (f"{log_name}: line {rec.lineno}: payload of {rec.name} (lines {rec.lineno + 1}-"
            f"{rec.lineno + rec.payload_lines}) is truncated or corrupt (checksum mismatch)")


_CHUNK = 8 << 20  # bytes read at a time (a longer line is read whole)
_NEXT_LINE = re.compile(rb"\n(?!\t)")  # a line end before a line that is not a payload line


class _Scanner:
    """The state of one scan: the record whose payload is being read, its checksum, and a run
    of payload lines that belong to no record. Payload lines are handled a block of lines at a
    time with bytes operations (no Python step per line): a log of gigabytes reads at disk
    speed, and only one chunk of it is held."""

    def __init__(self, out: LogScan, check_when_read: frozenset[str] = frozenset()) -> None:
        self.out = out
        self.check_when_read = check_when_read
        self.rel = out.path.name
        self.cur: Record | None = None
        self.md5: Any = None
        self.want = ""
        self.chromium_buf: list[bytes] | None = None
        self.orphan_start = 0
        self.orphans = 0

    def close(self, offset: int) -> None:
        cur, out = self.cur, self.out
        if cur is None:
            return
        if cur.payload_start >= 0:
            cur.payload_end = offset
        if (self.want or cur.payload_md5) and cur.payload_start < 0:
            cur.payload_ok, cur.payload_md5 = False, ""
            out.warn(f"{self.rel}: line {cur.lineno}: {cur.name} record has no payload "
                     "(truncated?)")
        elif self.want and self.md5 is not None and self.md5.hexdigest() != self.want:
            cur.payload_ok = False
            out.warn(checksum_warning(self.rel, cur))
        if self.chromium_buf is not None and cur.payload_ok:
            try:
                event = safefile.loads(b"\n".join(self.chromium_buf).decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                event = None
            # what the import reads of it (its args, stack … are not held for every event)
            cur.chromium = {k: event[k] for k in CHROMIUM_KEYS if k in event} \
                if isinstance(event, dict) else None
        self.chromium_buf = None
        self.md5 = None
        self.cur = None

    def flush_orphans(self) -> None:
        if self.orphans:
            self.out.warn(f"{self.rel}: lines {self.orphan_start}-"
                          f"{self.orphan_start + self.orphans - 1}: payload lines that belong to "
                          "no readable record; skipped")
            self.out.bad_lines += self.orphans
            self.orphans = 0

    def payload(self, block: bytes, offset: int, lineno: int, n: int) -> None:
        """``block``: ``n`` whole payload lines (each starts with a tab), the first at
        ``offset`` (line ``lineno``); the last ends with a newline unless the log ends there."""
        cur = self.cur
        if cur is None:
            if not self.orphans:
                self.orphan_start = lineno
            self.orphans += n
            return
        first = cur.payload_start < 0
        if self.md5 is None and self.chromium_buf is None:  # checked when read, or no checksum
            if first:
                cur.payload_start = offset
                line = block[1:block.find(b"\n")] if n > 1 else block[1:].rstrip(b"\n")
                if line.endswith(b"\r"):
                    line = line[:-1]
                cur.first_payload_line = line[:500].decode("utf-8", "replace")
            cur.payload_lines += n
            return
        if b"\r" in block:  # a line may end in CR LF: the CR is not part of the payload
            body = b"\n".join(ln[1:-1] if ln.endswith(b"\r") else ln[1:]
                              for ln in block.split(b"\n")[:n])
        else:
            body = block[1:].replace(b"\n\t", b"\n")
            if body.endswith(b"\n"):
                body = body[:-1]
        if first:
            cur.payload_start = offset
            cut = body.find(b"\n")
            cur.first_payload_line = body[:cut if 0 <= cut < 500 else 500].decode(
                "utf-8", "replace")
        if self.md5 is not None:
            if not first:
                self.md5.update(b"\n")
            self.md5.update(body)
        cur.payload_lines += n
        if self.chromium_buf is not None:
            self.chromium_buf.append(body)

    def header(self, raw: bytes, offset: int, lineno: int) -> None:
        """A line that is not a payload line: it ends the record before it."""
        out, rel = self.out, self.rel
        self.close(offset)
        self.flush_orphans()
        line = raw.rstrip(b"\r\n")
        if not line.strip():
            return
        m = _HEADER_RE.match(line)
        if m is None:
            out.bad_lines += 1
            out.warn(f"{rel}: line {lineno}: not a TORCH_TRACE record (garbage or a damaged "
                     "line); skipped")
            return
        raw_json = m["json"]
        if raw_json.startswith(_DESCRIBE) and raw_json.endswith(b"}") \
                and b'"has_payload"' not in raw_json:
            # fake-tensor metadata, not used by the trace (nine headers in ten of a training
            # step's log): skipped unread, as it was once read (a cut one is still read, and
            # reported)
            return
        try:
            meta = safefile.loads(raw_json)  # bytes: no surrogate to look for
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            out.bad_lines += 1
            out.warn(f"{rel}: line {lineno}: record is truncated or corrupt "
                     f"({type(e).__name__}: {e}); skipped")
            return
        if not isinstance(meta, dict):
            out.bad_lines += 1
            out.warn(f"{rel}: line {lineno}: record is not a JSON object; skipped")
            return
        event = _event_key(meta)
        if event is None:
            out.bad_lines += 1
            out.warn(f"{rel}: line {lineno}: record names no event; skipped")
            return
        if event == "str":
            s = meta.get("str")
            if isinstance(s, list) and len(s) == 2 and isinstance(s[1], int):
                out.strings[s[1]] = str(s[0])
            return
        if event in ("describe_storage", "describe_tensor", "describe_source"):
            if "has_payload" not in meta:
                return  # fake-tensor metadata: not used by the trace; skip cheaply
        if out.rank is None and isinstance(meta.get("rank"), int):
            out.rank = meta["rank"]
        try:
            pid = int(m["thread"])
        except ValueError:
            pid = None
        cur = Record(lineno=lineno, event=event, meta=meta, pid=pid,
                     time=f"{m['md'].decode()} {m['time'].decode()}")
        self.want = str(meta.get("has_payload") or "")
        if self.want and self.check_when_read and cur.name in self.check_when_read:
            cur.payload_md5, self.want = self.want, ""
        self.md5 = hashlib.md5(usedforsecurity=False) if self.want else None
        if event == "chromium_event":
            self.chromium_buf = []
        cur.index = len(out.records)
        out.records.append(cur)
        self.cur = cur


def _scan(f: IO[bytes], out: LogScan, check_when_read: frozenset[str] = frozenset()) -> None:
    sc = _Scanner(out, check_when_read)
    base = 0  # file offset of the chunk
    lineno = 0  # lines before the chunk's current position
    carry = b""
    while True:
        data = f.read(_CHUNK)
        chunk = carry + data if carry else data
        if data:
            cut = chunk.rfind(b"\n") + 1
            if cut == 0:  # no line ends in it yet: read on
                carry = chunk
                continue
            chunk, carry = chunk[:cut], chunk[cut:]
        else:
            carry = b""
        if not chunk:
            break
        size = len(chunk)
        pos = 0  # the first line not read yet
        starts = [0] if chunk[:1] != b"\t" else []
        for p in itertools.chain(starts, (m.end() for m in _NEXT_LINE.finditer(chunk))):
            if p >= size:
                break
            if p > pos:  # payload lines up to this line
                n = chunk.count(b"\n", pos, p)
                sc.payload(chunk[pos:p], base + pos, lineno + 1, n)
                lineno += n
            e = chunk.find(b"\n", p)
            e = size if e < 0 else e + 1
            sc.header(chunk[p:e], base + p, lineno + 1)
            lineno += 1
            pos = e
        if pos < size:
            n = chunk.count(b"\n", pos) + (0 if chunk.endswith(b"\n") else 1)
            sc.payload(chunk[pos:], base + pos, lineno + 1, n)
            lineno += n
        base += size
        if not data:
            break
    sc.close(base)
    sc.flush_orphans()
    out.lines = lineno


def read_payload(f: IO[bytes], rec: Record) -> str:
    """The payload text of a record (tabs removed), from a file opened in binary mode; its
    checksum checked when the scan left it (``rec.payload_ok``)."""
    return _payload_bytes(f, rec).decode("utf-8", errors="replace")


def check_payload(f: IO[bytes], rec: Record) -> bool:
    """Check the checksum the scan left to check when the payload is read, for a payload that
    nothing read; ``rec.payload_ok``."""
    if rec.payload_md5:
        _payload_bytes(f, rec)
    return rec.payload_ok


def _payload_bytes(f: IO[bytes], rec: Record) -> bytes:
    if rec.payload_start < 0:
        return b""
    f.seek(rec.payload_start)
    data = f.read(rec.payload_end - rec.payload_start)
    # each line's leading tab dropped, as bytes (a tab or a newline is never part of a UTF-8
    # sequence: decoding after is decoding each line), the newline that ends the last dropped
    if data.endswith(b"\n"):
        data = data[:-1]
    if data.startswith(b"\t"):
        data = data[1:]
    data = data.replace(b"\n\t", b"\n")
    if rec.payload_md5:  # what the scan hashes: the lines without their tab and CR
        hashed = b"\n".join(ln[:-1] if ln.endswith(b"\r") else ln
                            for ln in data.split(b"\n")) if b"\r" in data else data
        rec.payload_ok = hashlib.md5(hashed, usedforsecurity=False).hexdigest() == \
            rec.payload_md5
        rec.payload_md5 = ""
    return data


def is_torch_trace_file(path: Path, probe_lines: int = 20) -> bool:
    """Does this file look like a TORCH_TRACE log (a header line among its first lines)?"""
    try:
        with safefile.open_regular(path) as f:
            for _ in range(probe_lines):
                raw = f.readline(safefile.MAX_LINE_BYTES)  # a huge first line is not held
                if not raw:
                    return False
                if raw[:1] == b"\t" or not raw.strip():
                    continue
                m = _HEADER_RE.match(raw.rstrip(b"\r\n"))
                if m:
                    try:
                        return isinstance(safefile.loads(m["json"].decode("utf-8")), dict)
                    except (UnicodeDecodeError, json.JSONDecodeError):
                        continue
    except OSError:
        return False
    return False
