"""vLLM's own TORCH_TRACE records, read into the import.

vLLM (the largest user of torch.compile for inference) logs records of its own beside PyTorch's:

- ``artifact:vllm_compilation_config`` (JSON): the model, backend, mode, splitting ops, CUDA graph
  mode, compile sizes, the split points of its compile ranges, its enabled passes;
- ``graph_dump`` ``vllm_piecewise_split_graph``: the Dynamo graph split at the splitting ops into
  piecewise submodules (``submod_0`` …, printed as one module; each submodule's graph is also
  kept as a file of its own, ``vllm/split/<submodule>.txt``);
- ``artifact:vllm_piecewise_compile_start`` (JSON): one per compile of a piecewise submodule for
  a compile range or a single size (``piecewise_index``, ``submod_name``,
  ``compile_range_start``/``end``, ``is_single_size``, ``is_cudagraph_capture_size``);
- ``graph_dump`` ``vllm_subgraph_*`` / ``vllm_submod_*``: a submodule's graph;
- ``graph_dump`` ``vllm_post_grad.<i>.<PassName>``: the graph after each of vLLM's post-grad
  passes — imported as a stage of the Inductor graph it runs in (kind ``pass``, subsystem
  ``vllm_post_grad``), so the stepper shows what each pass changed, as for Inductor's passes;
- other ``vllm_*`` dumps (``vllm_patterns.<Pass>``: a pass's patterns) are kept as text.

As every record parser (``records``), the parsers here turn one record into facts; the driver
hands those facts to :class:`VllmBook`, which writes the dumps under ``vllm/`` and, at the end,
``vllm.json`` (``schema.VLLM``; its shape is ``shapes.SHAPES["vllm"]``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from tuidebug.trace.format import layout, schema
from tuidebug.trace.format.writer import TraceWriter
from tuidebug.trace.importers import records as r

SUBSYSTEM = schema.VLLM_POST_GRAD
CONFIG = "artifact:vllm_compilation_config"
COMPILE_START = "artifact:vllm_piecewise_compile_start"
GLOBAL = frozenset({CONFIG, COMPILE_START, "graph_dump"})  # also outside a compile
_POST_GRAD = re.compile(r"^vllm_post_grad\.(?P<index>\d+)\.(?P<name>.+)$")
SPLIT_GRAPH = "vllm_piecewise_split_graph"
# a piecewise submodule inside the printed split graph (print_readable of its GraphModule)
_SUBMODULE = re.compile(r"^    class (?P<name>[A-Za-z_]\w*)\(torch\.nn\.Module\):[ \t]*$", re.M)
_START_KEYS = ("piecewise_index", "submod_name", "total_piecewise_compiles",
               "compile_range_start", "compile_range_end", "is_single_size",
               "is_cudagraph_capture_size")


@dataclass
class VllmConfig:
    data: dict[str, Any]
    line: int


@dataclass
class VllmCompileStart:
    entry: dict[str, Any]
    line: int


@dataclass
class VllmDump:
    """A ``vllm_*`` graph dump kept as text (``name``: vLLM's name for it)."""
    name: str
    text: str
    line: int


class JsonArtifactParser:
    """A vLLM artifact whose payload is a JSON object, into a fact made by ``make``."""

    def __init__(self, name: str, what: str, make: Callable[[dict[str, Any], int], r.Fact]
                 ) -> None:
        self.name, self.what, self.make = name, what, make
        self.names = frozenset({name})

    def metadata(self, env: r.Envelope) -> Any:
        return env.meta.get("artifact") or {}

    def parse(self, env: r.Envelope, metadata: Any) -> list[r.Fact]:
        value, facts = env.json_payload()
        if not isinstance(value, dict):
            return facts + [r.Warn(f"{env.log_name}: line {env.lineno}: {self.what} is not a "
                                   "JSON object; skipped")]
        return facts + [self.make(value, env.lineno)]


class GraphDumpParser:
    """``graph_dump`` records named ``vllm_*`` (other graph dumps are left to the rest)."""
    name = "graph_dump:vllm"
    names: frozenset[str] = frozenset()  # a fallback: its records are told by their own name

    def metadata(self, env: r.Envelope) -> Any:
        if env.event != "graph_dump":
            return None
        name = (env.meta.get("graph_dump") or {}).get("name")
        return name if isinstance(name, str) and name.startswith("vllm_") else None

    def parse(self, env: r.Envelope, name: Any) -> list[r.Fact]:
        m = _POST_GRAD.match(name)
        if m and env.compile_id is not None:
            return [r.Snapshot(r.SEGMENT, m["name"], env, subsystem=SUBSYSTEM)]
        return [VllmDump(name, env.payload() if env.has_payload else "", env.lineno)]


PARSERS = (
    JsonArtifactParser(CONFIG, "vLLM's compilation config", VllmConfig),
    JsonArtifactParser(COMPILE_START, "a vLLM piecewise compile start",
                       lambda v, line: VllmCompileStart({k: v[k] for k in _START_KEYS if k in v},
                                                        line)),
    GraphDumpParser())
Fact = (VllmConfig, VllmCompileStart, VllmDump)


@dataclass
class VllmBook:
    """What the import has read of vLLM's records; written as ``vllm.json`` at the end."""
    config: dict[str, Any] | None = None
    config_line: int | None = None
    compiles: list[dict[str, Any]] = field(default_factory=list)
    dumps: list[dict[str, Any]] = field(default_factory=list)
    files: set[str] = field(default_factory=set)
    submodules: list[dict[str, Any]] = field(default_factory=list)  # of the split graph

    def apply(self, fact: Any, compile_id: str | None, writer: TraceWriter) -> None:
        if isinstance(fact, VllmConfig):
            if self.config is None:
                self.config, self.config_line = fact.data, fact.line
        elif isinstance(fact, VllmCompileStart):
            self.compiles.append({**fact.entry, "line": fact.line, "graphs": []})
        elif isinstance(fact, VllmDump):
            rel = self._file(fact.name)
            writer.write_text(writer.path(rel), fact.text)
            entry = {"name": fact.name, "file": rel, "line": fact.line,
                     "compile_id": compile_id}
            self.dumps.append(entry)
            if fact.name == SPLIT_GRAPH and not self.submodules:
                self.submodules = self._split(fact.text, writer)
            if fact.name.startswith(("vllm_submod_", "vllm_subgraph_")) and self.compiles:
                self.compiles[-1]["graphs"].append(rel)  # the compile it was logged in

    def _split(self, text: str, writer: TraceWriter) -> list[dict[str, Any]]:
        """Each piecewise submodule of the split graph (``class submod_N`` inside the printed
        ``GraphModule``) as a file of its own: ``{name, file, lines}``."""
        found = list(_SUBMODULE.finditer(text))
        out = []
        for m, nxt in zip(found, [*found[1:], None]):
            body = text[m.start():nxt.start() if nxt else len(text)]
            body = "\n".join(ln[4:] if ln.startswith("    ") else ln
                             for ln in body.rstrip().splitlines())
            rel = f"{schema.VLLM_DIR}/split/{layout.safe_id(m['name'])[:80]}.txt"
            if rel in self.files:
                continue
            self.files.add(rel)
            writer.write_text(writer.path(rel), body + "\n")
            out.append({"name": m["name"], "file": rel,
                        "lines": sum(1 for ln in body.splitlines() if ln.strip())})
        return out

    def _file(self, name: str) -> str:
        base = f"{schema.VLLM_DIR}/{layout.safe_id(name)[:80]}"
        rel, n = f"{base}.txt", 1
        while rel in self.files:
            n += 1
            rel = f"{base}-{n}.txt"
        self.files.add(rel)
        return rel

    def finish(self, writer: TraceWriter) -> None:
        if self.config is None and not self.compiles and not self.dumps:
            return
        split = next((d["file"] for d in self.dumps if d["name"] == SPLIT_GRAPH), None)
        writer.write_json(writer.path(schema.VLLM), {
            "config": self.config, "config_line": self.config_line, "split_graph": split,
            "submodules": self.submodules, "compiles": self.compiles, "dumps": self.dumps})
