"""What reading one graph snapshot costs, part by part, against another checkout's code.

    .venv/bin/python bench/snapshot_parse.py --base DIR [TRACE] [--rounds N] [--files K]

TRACE (default /tmp/tuidebug-bench/tr24: see bench/tui_open.py): its K largest snapshot files
(default 3). DIR: another checkout (``git archive main | tar -x -C DIR``), whose shape check
(``format/shapes.py``) and graph model (``format/graph.py``) are loaded beside this one's (both
modules import nothing of tuidebug). In this one process, with the collector off as the app's
read-ahead has it (``tui/heap.reading``), rounds alternate base/new (the order flipped every
round); each round times in CPU ms, per file: the read and ``safefile.loads`` (the same code for
both), then checking its shape and building the graph (base: ``check("snapshot", …)`` then
``Graph.from_json``; new: as ``GraphRecord._read_json_graph`` does). Prints per part and file the median
[min–max] of base and new, and the ratio new/base of the whole read per round, median
[min–max]; the load average. Both graphs are checked to hold the same nodes.
"""

from __future__ import annotations

import gc
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _spread import spread  # noqa: E402

from tuidebug.machine import cores, load1  # noqa: E402
from tuidebug.trace.format import graph, safefile, shapes  # noqa: E402


def _load(base: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"base_{name}", base / "tuidebug" / "trace" / "format" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def base_way(old_shapes: ModuleType, old_graph: ModuleType):  # type: ignore[no-untyped-def]
    def read(data: dict) -> object:  # the shape checked, then the graph built node by node
        return old_graph.Graph.from_json(old_shapes.check("snapshot", data, print))
    return read


def new_way(data: dict) -> object:
    """What ``GraphRecord._read_json_graph`` does with the parsed file."""
    nodes = graph.plain_nodes(data.get("nodes"))
    if nodes is None:
        return graph.Graph.from_json(shapes.check("snapshot", data, print))
    rest = shapes.check("snapshot", {**data, "nodes": None}, print)
    return graph.Graph(nodes, str(rest.get("graph", "")), str(rest.get("stage", "")))


def one(path: Path, build) -> tuple[list[float], object]:  # type: ignore[no-untyped-def]
    """CPU ms of read+loads, check+build; and the graph."""
    t0 = time.process_time()
    raw, _ = safefile.read_bytes(path, safefile.MAX_JSON_BYTES)
    data = safefile.loads(raw)
    t1 = time.process_time()
    g = build(data)
    t2 = time.process_time()
    return [(t1 - t0) * 1e3, (t2 - t1) * 1e3], g


def main() -> int:
    args = sys.argv[1:]

    def option(name: str, default: str) -> str:
        if name in args:
            i = args.index(name)
            value = args[i + 1]
            del args[i:i + 2]
            return value
        return default
    rounds, k = int(option("--rounds", "20")), int(option("--files", "3"))
    base_dir = Path(option("--base", ""))
    trace = Path(args[0] if args else "/tmp/tuidebug-bench/tr24")
    files = sorted(trace.glob("graphs/*/stages/*.json"), key=lambda p: -p.stat().st_size)[:k]
    assert files, trace
    old_shapes, old_graph = _load(base_dir, "shapes"), _load(base_dir, "graph")
    ways = {"base": base_way(old_shapes, old_graph), "new": new_way}
    parts = ("read+loads", "check+build")
    got: dict[tuple[str, str, str], list[float]] = {}
    ratios: list[float] = []
    load_before = load1()
    gc.disable()
    for r in range(rounds):
        total = {"base": 0.0, "new": 0.0}
        for way in ("base", "new") if r % 2 == 0 else ("new", "base"):
            for f in files:
                ms, g = one(f, ways[way])
                for part, v in zip(parts, ms):
                    got.setdefault((f.name, way, part), []).append(v)
                total[way] += sum(ms)
                if r == 0:
                    got.setdefault((f.name, way, "nodes"), []).append(
                        [n.to_json() for n in g.nodes])  # type: ignore[attr-defined]
                del g
                gc.collect()
        ratios.append(total["new"] / total["base"])
    gc.enable()
    print(f"load average {load_before:.2f} → {load1():.2f} on {cores()} cores; {rounds} rounds, "
          "CPU ms, median [min–max]")
    for f in files:
        same = got[(f.name, "base", "nodes")] == got[(f.name, "new", "nodes")]
        assert same, f"{f.name}: the graphs differ"
        print(f"{f.name} ({f.stat().st_size / 1e6:.1f} MB, {len(got[(f.name, 'new', 'nodes')][0]):,} "
              "nodes; the same graph both ways)")
        for part in parts:
            print(f"  {part:11} base {spread(got[(f.name, 'base', part)], '{:.1f}'):24} "
                  f"new {spread(got[(f.name, 'new', part)], '{:.1f}')}")
        whole = {w: [sum(x) for x in zip(*(got[(f.name, w, p)] for p in parts))]
                 for w in ("base", "new")}
        print(f"  {'whole':11} base {spread(whole['base'], '{:.1f}'):24} "
              f"new {spread(whole['new'], '{:.1f}')}")
    print(f"new/base per round (all files): {spread(ratios, '{:.3f}')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
