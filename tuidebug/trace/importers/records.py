"""What a record parser sees (an ``Envelope``) and what it returns (facts). Pure data; no torch.

As in tlparse (``src/parsers.rs``), each kind of TORCH_TRACE record has one parser with one small
interface::

    class RecordParser(Protocol):
        name: str                         # for messages
        names: frozenset[str]             # the record names it takes (Record.name)
        def metadata(self, env) -> Any    # what it reads from the record; None: skip the record
        def parse(self, env, metadata) -> list[Fact]

A parser never writes and keeps no state: it turns one record into facts (a graph snapshot, the
output code, a compile's metrics, a chromium timing …). The driver (``torch_trace``) decides
which graph a fact belongs to, keeps the import's state and writes the trace.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

from tuidebug.trace.format import safefile
from tuidebug.trace.importers import tracelog
from tuidebug.trace.importers.tracelog import Record

# Which graph of a compile a fact is about (the driver resolves it):
FRAME = "frame"  # the frame's first graph (forward or inference)
FRAME_IF_GRAPH = "frame_if_graph"  # the same, when the compile has a graph at all
SEGMENT = "segment"  # the Inductor compile this record belongs to (see segments.py)
INFERENCE = "inference"  # the compile's inference graph
FORWARD = "forward"  # its forward graph (the first forward segment)
BACKWARD = "backward"  # its backward graph


class Envelope:
    """One record with its compile id, its payload (read on first use) and the log's strings."""

    __slots__ = ("record", "compile_id", "strings", "log_name", "_file", "_payload")

    def __init__(self, record: Record, compile_id: str | None, strings: dict[int, str],
                 log_name: str, file: IO[bytes] | None) -> None:
        self.record = record
        self.compile_id = compile_id
        self.strings = strings
        self.log_name = log_name
        self._file = file
        self._payload: str | None = None

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def event(self) -> str:
        return self.record.event

    @property
    def meta(self) -> dict[str, Any]:
        return self.record.meta

    @property
    def lineno(self) -> int:
        return self.record.lineno

    @property
    def has_payload(self) -> bool:
        return self.record.has_payload

    @property
    def payload_ok(self) -> bool:
        """Whether the payload's checksum matched (or it had none): read, to check it, where
        the scan left that to the read."""
        if self.record.payload_md5 and self._file is not None:
            self.payload()
        return self.record.payload_ok

    def payload(self) -> str:
        """The payload text (tabs removed); "" when the record has none."""
        if self._payload is None:
            self._payload = tracelog.read_payload(self._file, self.record) \
                if self._file is not None else ""
        return self._payload

    def json_payload(self) -> tuple[Any, list[Fact]]:
        """The payload as JSON; a payload that is not JSON is kept as text (with a warning when
        it was also damaged)."""
        text = self.payload()
        if not text.strip():
            return None, []
        try:
            return safefile.loads(text), []
        except json.JSONDecodeError:
            if self.payload_ok:
                return text, []  # some "json" artifacts are plain text (recompile_reasons)
            return text, [Warn(f"{self.log_name}: line {self.lineno}: {self.name} payload is not "
                               "valid JSON (truncated?); kept as text")]


# -- facts ----------------------------------------------------------------------------------------

@dataclass
class Warn:
    message: str


@dataclass
class Snapshot:
    """A printed FX graph: stage ``stage`` of graph ``target`` (``stage`` None: ``aot_<kind>`` of
    the graph it lands in). ``if_missing``: only when the graph has no such stage yet. The text
    is read from ``env`` only when it is needed (a graph equal to the previous one is not).
    ``subsystem``: the graph after a pass of that subsystem (a stage of kind ``pass``)."""
    target: str
    stage: str | None
    env: Envelope
    if_missing: bool = False
    subsystem: str | None = None  # a pass of this subsystem (vLLM's post-grad passes)


@dataclass
class Touch:
    """The record belongs to graph ``target`` (its log lines, the compile's last graph)."""
    target: str


@dataclass
class Runnable:
    target: str
    text: str


@dataclass
class OutputCode:
    target: str
    code: str
    filename: str | None
    damaged: bool


@dataclass
class Provenance:
    target: str
    mappings: dict[str, Any] | None = None  # inductor_provenance_tracking_node_mappings
    stack_traces: dict[str, Any] | None = None  # …_kernel_stack_traces


@dataclass
class CacheEvent:
    target: str  # the graph whose cache use it is
    cache: str  # "fx_graph" | "aotautograd"
    result: str  # "hit" | "miss" | "bypass"
    line: int
    data: dict[str, Any] | None  # what the cache logged about it


@dataclass
class SetDetail:
    """``compiles/<id>.json``: set a key."""
    key: str
    value: Any


@dataclass
class AppendDetail:
    """``compiles/<id>.json``: append to a list."""
    key: str
    value: Any


@dataclass
class CountEvent:
    """An event nothing reads, counted under ``other_events``."""
    event: str


@dataclass
class DynamicShape:
    entry: dict[str, Any]


@dataclass
class Artifact:
    """Any other artifact, kept as a file of the compile (``text`` None: it had no payload)."""
    name: str
    entry: dict[str, Any]
    text: str | None


@dataclass
class Metrics:
    metrics: dict[str, Any]
    backward: bool


@dataclass
class Config:
    """The Inductor (and Dynamo, functorch, compiler) config the log's metrics carry."""
    data: dict[str, Any]


@dataclass
class Version:
    key: str
    value: Any
    first_wins: bool = False  # keep a value already known


@dataclass
class Times:
    """Wall-clock times of the compile (seconds since the epoch)."""
    values: list[float]


@dataclass
class Failure:
    """A failed compile (metrics with ``fail_type``); where it failed is the driver's to say."""
    backward: bool
    error: dict[str, Any]  # type, message, wrapper_type, log_line, user_frame
    stack: str  # the exception's stack trace from the metrics ("" when none)


@dataclass
class Chromium:
    """A ``dynamo_timed`` begin/end event (``ts`` in seconds)."""
    name: str
    ph: str | None
    ts: float
    phase: str | None  # the compilation phase it starts (schema.PHASES), if any
    pass_name: tuple[str, str] | None = None  # ("post_grad_passes", "<pass>") for pass.* events
    # (None for a pass.* event whose name has no subsystem: ignored)


Fact = Any  # one of the dataclasses above


class RecordParser(Protocol):
    name: str
    names: frozenset[str]

    def metadata(self, env: Envelope) -> Any: ...

    def parse(self, env: Envelope, metadata: Any) -> list[Fact]: ...


@dataclass
class Registry:
    """Parsers by record name, and the fallbacks for records no parser names."""
    by_name: dict[str, RecordParser] = field(default_factory=dict)
    fallbacks: list[RecordParser] = field(default_factory=list)

    def add(self, parser: RecordParser) -> None:
        if not parser.names:
            self.fallbacks.append(parser)
        for n in parser.names:
            assert n not in self.by_name, f"two parsers for {n}"
            self.by_name[n] = parser

    def parse(self, env: Envelope) -> list[Fact]:
        p = self.by_name.get(env.name)
        if p is not None:
            meta = p.metadata(env)
            return p.parse(env, meta) if meta is not None else []
        for p in self.fallbacks:
            meta = p.metadata(env)
            if meta is not None:
                return p.parse(env, meta)
        return []

