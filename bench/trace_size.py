"""Where a trace's bytes go, and what storing each snapshot as a delta would save.

    .venv/bin/python bench/trace_size.py [TRACE]      (default /tmp/tr24: see bench/tui_open.py)

Prints the trace's size by kind of file (snapshots, compile records and shapes, IR, code,
provenance, the rest) as stored, and beside it what the files hold (a file stored compressed,
``NAME.gz``, format 2, counted as its decompressed size), then, per graph, each snapshot file's size beside the size of a delta
against the snapshot before it in the same graph: its nodes in order, a node equal to the
earlier snapshot's node of that name written as the name alone (compact JSON, the stage's other
fields kept). The last line: the trace's size with every snapshot so stored, and the ratio. The
snapshots are read through the trace reader (``Trace``), never parsed here from raw files.
"""

from __future__ import annotations

import collections
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuidebug.trace.format import compressed, safefile  # noqa: E402
from tuidebug.trace.format.reader import Trace  # noqa: E402


def kind_of(rel: str) -> str:
    parts = compressed.logical_name(rel).split("/")
    if "stages" in parts:
        return "snapshots"
    if parts[0] == "compiles":
        return "compiles/ (records, shapes, cache keys)"
    if parts[-1].startswith("ir_"):
        return "IR (text and JSON)"
    if "code" in parts or "repro" in parts:
        return "code and repro"
    if parts[-1] == "provenance.json":
        return "provenance"
    return "the rest"


def compact(data: object) -> int:
    return len(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode())


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/tr24")
    by_kind: collections.Counter[str] = collections.Counter()
    held: collections.Counter[str] = collections.Counter()  # decompressed
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            if not path.is_symlink():
                kind = kind_of(str(path.relative_to(root)))
                by_kind[kind] += path.stat().st_size
                held[kind] += len(compressed.read_bytes(path.with_name(
                    compressed.logical_name(name)), safefile.MAX_JSON_BYTES)) \
                    if name.endswith(compressed.SUFFIX) else path.stat().st_size
    total = sum(by_kind.values())
    print(f"{root}: {total / 1e6:.2f} MB stored, {sum(held.values()) / 1e6:.2f} MB of content")
    for kind, size in by_kind.most_common():
        print(f"  {kind:42} {size / 1e6:7.2f} MB  {size / total:4.0%}   "
              f"(content {held[kind] / 1e6:7.2f} MB)")
    saved = 0
    trace = Trace(root)
    for g in trace.graphs:
        before: dict[str, str] = {}
        seen: set[str] = set()
        for stage in g.snapshots():
            assert stage.file is not None
            if stage.file in seen:
                continue  # stored once already
            seen.add(stage.file)
            graph = g.stage_graph(stage)
            if graph is None:
                continue
            nodes = [n.to_json() for n in graph.nodes]
            size = len(compressed.read_bytes(g.dir / stage.file, safefile.MAX_JSON_BYTES))
            line = f"  {g.id}/{stage.file}: {size / 1e6:.2f} MB"
            if before:
                kept = [n["name"] if before.get(n["name"]) == json.dumps(n, sort_keys=True)
                        else n for n in nodes]
                delta = compact({"graph": g.id, "stage": stage.name, "base": "NNN-x.json",
                                 "changes": g.stage_changes(stage), "nodes": kept})
                same = sum(isinstance(n, str) for n in kept)
                line += f" -> delta {delta / 1e6:.2f} MB ({same}/{len(kept)} nodes as names)"
                saved += max(0, size - delta)
            print(line)
            before = {n["name"]: json.dumps(n, sort_keys=True) for n in nodes}
    content = sum(held.values())
    print(f"content with deltas: {(content - saved) / 1e6:.2f} MB of {content / 1e6:.2f} MB "
          f"({(content - saved) / content:.2f}; stored: {total / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
