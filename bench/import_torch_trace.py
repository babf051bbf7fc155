"""Benchmark: ``tuidebug import`` next to ``tlparse`` on TORCH_TRACE logs of 30 MB to 500 MB.

    .venv/bin/python bench/import_torch_trace.py [--log LOG | --layers 24] [--sizes 30,300]
                                                 [--repeat 3] [--same-payloads]

The real log is a 24-layer transformer training step (``examples/transformer_block.py
--layers N`` under TORCH_TRACE, with a private Inductor cache so that nothing is a cache hit;
minutes on a small machine; kept in ``/tmp/tuidebug-bench/torch_trace_transformer<N>``), or
``--log``. Each size is made from it by ``bench/torch_trace_copies.py`` (its compiles repeated as
new frames; each copy's printed graphs and code differ by a comment line unless
``--same-payloads``). At each size the two commands run as child processes, interleaved
(tuidebug, tlparse, tuidebug, …), each writing a complete output directory from scratch:

* ``python -m tuidebug.cli import LOG -o DIR`` (the import and the summary it prints);
* ``tlparse LOG -o DIR --overwrite --no-browser`` (``tlparse`` from requirements-dev.txt).

Reported per command: CPU seconds (user + system of the command, ``os.wait4``; what a loaded
machine does not inflate), wall seconds and peak RSS (the command's own, measured by
``bench/_own_rusage.py``: before, a child forked from the bench reported the bench's peak when
its own was smaller; the wall time from spawn to ``wait4`` in that helper, without its own
Python start-up), each as median [min–max]; the ratio of CPU
seconds, tuidebug / tlparse, per interleaved pair (median [min–max]); the load average before and
after.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _spread import spread  # noqa: E402
from torch_trace_copies import write_copies  # noqa: E402
from tuidebug.trace import importers  # noqa: E402
from tuidebug.trace.format.manifest import find_manifest  # noqa: E402
from tuidebug.machine import cores, load1  # noqa: E402


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
    subprocess.run(cmd, env=env, check=True)
    shutil.rmtree(cache, ignore_errors=True)
    log_dir.parent.mkdir(parents=True, exist_ok=True)
    (partial / ".layers").write_text(str(layers))
    os.replace(partial, log_dir)
    return importers.trace_logs(log_dir)[0]


def find_tlparse() -> str | None:
    here = Path(sys.executable).parent / "tlparse"
    return str(here) if here.exists() else shutil.which("tlparse")


def run(cmd: list[str], env: dict[str, str] | None = None,
        failed_compile: Path | None = None) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of one child process, run in the repository (``python -m``
    puts the working directory first on the module path). Its stderr goes to a file (a pipe
    read only after ``wait4`` blocks the child once the pipe is full: tlparse and the importer
    write a line per record). Exit 0 or it failed (tlparse 0.4.3 exits 0 on our logs, a failed
    compile's included, and 1 on an error); ``tuidebug import`` exits 1 where the log's compile
    failed, accepted only when the trace written to ``failed_compile`` says so."""
    with tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile("r") as usage:
        # started by bench/_own_rusage.py, which reports the command's own CPU and peak RSS (a
        # child forked from this process inherits its RSS high-water mark)
        # and its wall time, spawn to wait4 (timed here, it held the helper's Python start-up)
        code = subprocess.run([sys.executable, str(ROOT / "bench" / "_own_rusage.py"),
                               usage.name, *cmd], stdout=subprocess.DEVNULL, stderr=err,
                              env=env, cwd=ROOT).returncode
        # the exit code first: a command that did not start (or the helper failing) writes no
        # usage, and what it said on stderr is the reason
        if code != 0 and not (code == 1 and failed_compile is not None
                              and _status(failed_compile) == "failed"):
            err.seek(0)
            text = err.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"{' '.join(cmd[:4])} failed (exit {code}):\n{text}")
        cpu_s, maxrss_kb, wall_s = usage.read().split()
    return float(wall_s), float(cpu_s), int(maxrss_kb) / 1024


def _status(trace: Path) -> str | None:
    """The status in a trace's manifest (None: none readable), read by the trace reader."""
    m = find_manifest(trace)
    return m.status if m is not None else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--log", type=Path, default=None, help="a real log (else one is generated)")
    ap.add_argument("--sizes", default="30,300", help="MB, comma-separated (default 30,300)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--same-payloads", action="store_true")
    ap.add_argument("--work", type=Path, default=None, help="folder for the logs and outputs")
    ns = ap.parse_args()
    tl = find_tlparse()
    if tl is None:
        print("tlparse is not installed (pip install -r requirements-dev.txt)", file=sys.stderr)
        return 2
    real = ns.log or make_log(Path(tempfile.gettempdir()) / "tuidebug-bench" /
                              f"torch_trace_transformer{ns.layers}", ns.layers)
    version = subprocess.run([tl, "--version"], capture_output=True, text=True).stdout.strip()
    work = ns.work or Path(tempfile.mkdtemp(prefix="tuidebug-bench-import-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # as installed: modules read from their bytecode (PYTHONDONTWRITEBYTECODE, set in some
    # shells and CI, made every run compile each module from source: a fifth of a 30 MB import)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    print(f"real log: {real} ({real.stat().st_size / 1e6:.1f} MB); {version}; "
          f"{cores()} CPUs")
    try:
        for size in [float(s) for s in ns.sizes.split(",")]:
            log = work / f"copies{size:g}.log"
            copies = write_copies(real, log, size, same_payloads=ns.same_payloads)
            res: dict[str, list[tuple[float, float, float]]] = {"tuidebug": [], "tlparse": []}
            load_before = load1()
            for _ in range(ns.repeat):
                shutil.rmtree(work / "td", ignore_errors=True)
                res["tuidebug"].append(run([sys.executable, "-m", "tuidebug.cli", "import",
                                            str(log), "-o", str(work / "td")], env,
                                           failed_compile=work / "td"))
                res["tlparse"].append(run([tl, str(log), "-o", str(work / "tl"), "--overwrite",
                                           "--no-browser"]))
            load_after = load1()
            print(f"\n{log.stat().st_size / 1e6:.0f} MB ({copies} copies"
                  f"{', same payloads' if ns.same_payloads else ''}), n={ns.repeat}, "
                  f"load {load_before:.1f} -> {load_after:.1f}")
            for name, rows in res.items():
                print(f"  {name:9} CPU {spread([r[1] for r in rows])} s   "
                      f"wall {spread([r[0] for r in rows])} s   "
                      f"peak RSS {spread([r[2] for r in rows], '{:.0f}')} MB")
            ratios = [a[1] / b[1] for a, b in zip(res["tuidebug"], res["tlparse"])]
            print(f"  CPU tuidebug / tlparse per pair: {spread(ratios)}")
            log.unlink()
    finally:
        shutil.rmtree(work / "td", ignore_errors=True)
        shutil.rmtree(work / "tl", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
