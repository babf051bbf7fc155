"""Benchmark: ``safefile.loads`` of this checkout against another's, in one process, alternating.

    .venv/bin/python bench/safe_loads.py --base DIR [--record FILE ...] [--log LOG] [--runs 30]

``--base``: the root of another checkout (``git archive main | tar -x -C DIR``); its
``tuidebug/trace/format/safefile.py`` is loaded on its own (it imports only the standard
library). ``--record``: JSON files to read whole (default: the largest compile record
``compiles/<id>.json``, shapes record and snapshot of ``/tmp/tuidebug-bench/tr24-fusion16``,
the 24-layer trace ``bench/tui_open.py`` makes). ``--log``: a TORCH_TRACE log imported once in this process with
``safefile.loads`` and ``loads_lines`` recording what they are given (the import bench's reads:
headers, metadata, payloads); then each recorded input is read by both versions.

Each file (and the log's inputs, all together) is read ``--runs`` times by each version,
old and new alternating, the garbage collector run before each read and off during it (a
collection inside a read of a big file was most of the spread); reported: thread CPU milliseconds as median [min–max] for each, the
new/old ratio per alternating pair as median [min–max], and the load average before and after.
Both versions' values are compared (equal, or both refused) before anything is timed.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _spread import spread  # noqa: E402
from tuidebug.machine import cores, load1  # noqa: E402
from tuidebug.trace.format import safefile  # noqa: E402

BENCH = Path("/tmp/tuidebug-bench/tr24-fusion16")


def _module(base: Path) -> ModuleType:
    path = base / "tuidebug" / "trace" / "format" / "safefile.py"
    spec = importlib.util.spec_from_file_location("base_safefile", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"no safefile.py under {base}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _outcome(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except ValueError as e:
        return ("refused", type(e).__name__)


def _compare(name: str, old: Callable[[], Any], new: Callable[[], Any], runs: int) -> None:
    a, b = _outcome(old), _outcome(new)
    if a != b:
        raise SystemExit(f"{name}: the two versions read it differently")
    times: dict[str, list[float]] = {"old": [], "new": []}
    for i in range(runs):
        order = (("old", old), ("new", new)) if i % 2 == 0 else (("new", new), ("old", old))
        for label, read in order:
            gc.collect()  # the last read's values freed, none collected during this one
            gc.disable()
            t0 = time.thread_time()
            _outcome(read)
            times[label].append((time.thread_time() - t0) * 1e3)
            gc.enable()
    ratios = [n / o for n, o in zip(times["new"], times["old"]) if o > 0]
    print(f"{name}\n  old {spread(times['old'])} ms   new {spread(times['new'])} ms   "
          f"new/old {spread(ratios)}  ({runs} runs each)", flush=True)


def _recorded(log: Path) -> tuple[list[Any], list[list[bytes]]]:
    """What ``safefile.loads`` and ``loads_lines`` are given while ``log`` is imported."""
    from tuidebug.trace.importers import import_path

    given: list[Any] = []
    lines: list[list[bytes]] = []
    loads, loads_lines = safefile.loads, safefile.loads_lines

    def recording(data: Any) -> Any:
        given.append(data)
        return loads(data)

    def recording_lines(raws: list[bytes]) -> list[Any]:
        lines.append(list(raws))
        return loads_lines(raws)
    safefile.loads, safefile.loads_lines = recording, recording_lines  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            import_path(log, Path(tmp) / "t")
    finally:
        safefile.loads, safefile.loads_lines = loads, loads_lines  # type: ignore[assignment]
    return given, lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", type=Path, required=True)
    ap.add_argument("--record", type=Path, action="append")
    ap.add_argument("--log", type=Path)
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    old = _module(args.base)
    largest = lambda paths: max(paths, key=lambda p: p.stat().st_size)  # noqa: E731
    records = args.record or [
        largest(p for p in (BENCH / "compiles").glob("*.json") if "." not in p.stem),
        largest(BENCH.glob("compiles/*.shapes.json")),
        largest(BENCH.glob("graphs/*/stages/*.json"))]
    print(f"load before: {load1():.2f} on {cores()} cores", flush=True)
    for path in records:
        raw = path.read_bytes()
        _compare(f"{path} ({len(raw) / 1e6:.1f} MB)", lambda: old.loads(raw),
                 lambda: safefile.loads(raw), args.runs)
    if args.log is not None:
        given, lines = _recorded(args.log)
        size = sum(len(d) for d in given) + sum(len(r) for ls in lines for r in ls)
        print(f"{args.log}: {len(given)} loads and {len(lines)} loads_lines calls, "
              f"{size / 1e6:.1f} MB", flush=True)

        def reads(mod: ModuleType) -> Callable[[], Any]:
            def read() -> Any:
                out = [_outcome(lambda d=d: mod.loads(d)) for d in given]
                out += [[v if not isinstance(v, ValueError) else "refused"
                         for v in mod.loads_lines(ls)] for ls in lines]
                return out
            return read
        _compare("the import's reads, all together", reads(old), reads(safefile), args.runs)
    print(f"load after: {load1():.2f}", flush=True)


if __name__ == "__main__":
    main()
