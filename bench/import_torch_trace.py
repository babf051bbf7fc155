"""Benchmark: import a TORCH_TRACE log of a 24-layer transformer training step, next to tlparse.

    .venv/bin/python bench/import_torch_trace.py [--log-dir DIR] [--layers 24] [--repeat 3]

The log is made once (``examples/transformer_block.py --layers N`` under TORCH_TRACE, with a
private Inductor cache so that nothing is a cache hit; minutes on a small machine) and kept in
``--log-dir`` (default ``/tmp/tuidebug-bench/torch_trace_transformer<N>``) for later runs.
Then, on that same log:

* tuidebug: ``tuidebug.trace.importers.import_path`` (log -> trace directory: every graph parsed
  into snapshots, kernels split, metrics ...), and opening the result with the reader;
* tlparse (``pip install tlparse``): ``tlparse LOG -o DIR --overwrite --no-browser`` (log ->
  HTML report).

Both write a complete output directory from scratch each repetition; the best and median wall
times are printed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuidebug.trace import importers  # noqa: E402
from tuidebug.trace.importers import tracelog  # noqa: E402
from tuidebug.trace.format.reader import Trace  # noqa: E402


def make_log(log_dir: Path, layers: int) -> Path:
    logs = importers.trace_logs(log_dir)
    marker = log_dir / ".layers"
    if logs and marker.is_file() and marker.read_text().strip() == str(layers):
        return logs[0]
    shutil.rmtree(log_dir, ignore_errors=True)  # made for another model size, or unfinished
    partial = log_dir.with_name(log_dir.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    cache = log_dir.with_name(log_dir.name + ".inductor-cache")
    shutil.rmtree(cache, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_COMPILE_DEBUG", "TORCH_LOGS")}
    env.update(TORCH_TRACE=str(partial), TORCHINDUCTOR_CACHE_DIR=str(cache))
    cmd = [sys.executable, str(ROOT / "examples" / "transformer_block.py"), "--layers", str(layers)]
    print(f"generating the log (once): TORCH_TRACE={partial} {' '.join(cmd[1:])}", flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True)
    print(f"  compiled in {time.perf_counter() - t0:.0f} s", flush=True)
    shutil.rmtree(cache, ignore_errors=True)
    log_dir.parent.mkdir(parents=True, exist_ok=True)
    (partial / ".layers").write_text(str(layers))
    os.replace(partial, log_dir)
    return importers.trace_logs(log_dir)[0]


def find_tlparse() -> str | None:
    here = Path(sys.executable).parent / "tlparse"
    if here.exists():
        return str(here)
    return shutil.which("tlparse")


def timed(fn, repeat: int) -> list[float]:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def fmt(times: list[float]) -> str:
    return f"best {min(times):6.2f} s   median {statistics.median(times):6.2f} s   " \
           f"(n={len(times)})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--log-dir", type=Path, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ns = ap.parse_args()
    log_dir = ns.log_dir or Path(tempfile.gettempdir()) / "tuidebug-bench" / \
        f"torch_trace_transformer{ns.layers}"
    log = make_log(log_dir, ns.layers)

    scan = tracelog.scan(log)
    size = log.stat().st_size
    print(f"log: {log}")
    print(f"     {size / 1e6:.1f} MB, {scan.lines} lines, {len(scan.records)} records "
          f"(transformer_block.py --layers {ns.layers}, one training step)")

    work = Path(tempfile.mkdtemp(prefix="tuidebug-bench-import-"))
    try:
        n = 0

        def do_import() -> None:
            nonlocal n
            n += 1
            importers.import_path(log, work / f"trace{n}")

        imp_times = timed(do_import, ns.repeat)
        tr = Trace(work / f"trace{n}")
        t0 = time.perf_counter()
        graphs = [(g.id, len(g.final_graph() or []), len(g.snapshots()), len(g.kernels))
                  for g in tr.graphs]
        open_time = time.perf_counter() - t0
        nodes = sum(s.nodes or 0 for g in tr.graphs for s in g.snapshots())
        print(f"tuidebug import   {fmt(imp_times)}")
        print(f"                  -> {len(graphs)} graphs "
              + ", ".join(f"{gid}: {n_} nodes, {s} snapshots, {k} kernels"
                          for gid, n_, s, k in graphs)
              + f"; {nodes} snapshot nodes in all; "
              f"opening the final graphs afterwards: {open_time:.2f} s")
        tl = find_tlparse()
        if tl is None:
            print("tlparse is not installed (pip install tlparse): nothing to compare with",
                  file=sys.stderr)
            return 2
        else:
            version = subprocess.run([tl, "--version"], capture_output=True,
                                     text=True).stdout.strip()

            def do_tlparse() -> None:
                subprocess.run([tl, str(log), "-o", str(work / "tl_out"), "--overwrite",
                                "--no-browser"], check=True, capture_output=True)

            tl_times = timed(do_tlparse, ns.repeat)
            print(f"tlparse           {fmt(tl_times)}   ({version})")
            print(f"ratio             tuidebug / tlparse = "
                  f"{min(imp_times) / max(min(tl_times), 1e-9):.1f}x (best times)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
