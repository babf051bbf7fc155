"""Distributed jobs: capture overhead per rank, storage, and cross-rank analysis of many ranks.

    .venv/bin/python bench/ranks.py overhead [--ranks 2,4] [--steps 30] [--keep DIR]
    .venv/bin/python bench/ranks.py analysis JOBDIR [--ranks 1024,4096] [--repeat 3] [--profile]

``overhead``: wall time of ``tuidebug trace --nproc-per-node N`` over plain ``python -m
torch.distributed.run --nproc-per-node N`` on ``_rank_train.py`` (gloo, CPU, a compiled MLP
trained data-parallel, gradients all-reduced by hand), each run a fresh process tree with its own
empty Inductor cache (a cold compile), plain and capture alternating; ratios side by side. Also
the job folder's bytes on disk before and after identical files were linked (tuidebug.trace.jobs.dedup;
the launcher does it when the job ends). Goal: capture/plain at most 1.15.

``analysis``: a synthetic job of ``--ranks`` ranks made of perturbed copies of the ranks of a real
job folder (every rank's compile times and absolute paths differ, as they do between real ranks;
one rank's graph differs), then ``analyze_job`` timed (CPU seconds of this process, and wall
seconds with the load average) — on plain copies, and again once identical files are
hard-linked as the launcher leaves them. Goal: under 2 s at 1,024 ranks, linear in the ranks.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
JOB = ROOT / "bench" / "_rank_train.py"

from tuidebug.machine import load1  # noqa: E402


def _env(tmp: str) -> dict[str, str]:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=f"{tmp}/cache", PYTHONPATH=str(ROOT))
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "SLURM_PROCID"):
        env.pop(name, None)
    return env


def run_once(mode: str, nproc: int, steps: int, keep: Path | None) -> tuple[float, Path | None]:
    tmp = tempfile.mkdtemp(prefix="tuidebug-ranks-bench-")
    out = Path(tmp) / "job"
    if mode == "plain":
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node", str(nproc), str(JOB), str(steps)]
    else:
        cmd = [sys.executable, "-m", "tuidebug.cli", "trace", "--nproc-per-node", str(nproc),
               "--no-check", "-o", str(out), str(JOB), str(steps)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=_env(tmp), capture_output=True, text=True)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{mode} x{nproc} failed:\n{proc.stderr[-3000:]}")
    kept = None
    if mode == "capture" and keep is not None:
        kept = keep / f"job{nproc}"
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(out, kept, symlinks=True)
    stored = re.search(r"stored once: .*?([\d.]+) MB → ([\d.]+) MB", proc.stderr)
    if stored:
        print(f"    x{nproc} job folder: {stored.group(1)} MB → {stored.group(2)} MB on disk "
              "once identical files are linked", flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return took, kept


def overhead(ns: argparse.Namespace) -> None:
    keep = Path(ns.keep) if ns.keep else None
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in [int(x) for x in ns.ranks.split(",")]:
        plain, cap = [], []
        for _ in range(ns.repeat):
            plain.append(run_once("plain", n, ns.steps, None)[0])
            cap.append(run_once("capture", n, ns.steps, keep)[0])
        rows.append((n, min(plain), min(cap)))
    print(f"{'ranks':>5} {'plain s':>9} {'capture s':>10} {'ratio':>7}")
    for n, p, c in rows:
        print(f"{n:>5} {p:9.2f} {c:10.2f} {c / p:7.3f}")


def synthetic_job(source: Path, out: Path, ranks: int) -> None:
    """``ranks`` ranks copied from ``source``'s rank folders in turn; per copy, compile times
    scaled and absolute paths renamed; rank ``ranks // 2`` gets another constant in one graph."""
    from tuidebug.trace.jobs.job import rank_dirs, write_job, write_record

    src = [source / f"rank_{r}" for r in rank_dirs(source)]
    if not src:
        raise SystemExit(f"{source}: no rank_<r>/ folders")
    odd = ranks // 2
    for r in range(ranks):
        d = out / f"rank_{r}"
        shutil.copytree(src[r % len(src)], d)
        for f in [*(d / "compiles").glob("*.json"), d / "manifest.json"]:
            text = re.sub(r'("entire_frame_compile_time_s": )([0-9.]+)',
                          lambda m: f"{m.group(1)}{float(m.group(2)) * (1 + r / 1000):.6f}",
                          f.read_text())
            f.write_text(text.replace("/tmp/", f"/tmp/rank{r}/"))
        if r == odd:  # one rank's graph differs (its first snapshot's first constant)
            for st in sorted(d.glob("graphs/*/stages/*.json"))[:1]:
                st.write_text(re.sub(r"\b2\b", "3", st.read_text(), count=1))
        write_record(out, {"rank": r, "world_size": ranks, "status": "ok", "trace": d.name,
                           "hostname": f"node{r // 8}", "node_rank": r // 8,
                           "local_rank": r % 8, "launcher": "torchrun"})
    write_job(out, launcher="torchrun")


def analysis(ns: argparse.Namespace) -> None:
    from tuidebug.trace.jobs.dedup import link_identical
    from tuidebug.trace.jobs.ranks import analyze_job

    for n in [int(x) for x in str(ns.ranks).split(",")]:
        with tempfile.TemporaryDirectory(prefix=f"tuidebug-{n}-") as tmp:
            job = Path(tmp) / "job"
            t0 = time.perf_counter()
            synthetic_job(Path(ns.job), job, n)
            print(f"built a {n}-rank job in {time.perf_counter() - t0:.1f} s", flush=True)
            for label in ("copies", "linked"):
                if label == "linked":
                    s = link_identical(job)
                    print(f"linked {s['linked']} of {s['files']} files: "
                          f"{s['bytes_before'] / 1e6:.1f} MB → {s['bytes_after'] / 1e6:.1f} MB",
                          flush=True)
                for _ in range(ns.repeat):
                    prof = cProfile.Profile() if ns.profile else None
                    load = load1()
                    c0, t0 = time.process_time(), time.perf_counter()
                    if prof:
                        prof.enable()
                    report = analyze_job(job)
                    if prof:
                        prof.disable()
                    cpu, took = time.process_time() - c0, time.perf_counter() - t0
                    d = report["divergence"] or {}
                    print(f"{n:>5} ranks {label:>7}: analyze_job {cpu:.2f} CPU s, {took:.2f} s "
                          f"wall (load average {load:.1f} before); groups "
                          f"{[len(g['ranks']) for g in report['groups']]}; divergence "
                          f"{d.get('kind')} on {len(d.get('diverging_ranks') or [])} ranks",
                          flush=True)
                    if prof:
                        pstats.Stats(prof).sort_stats("cumulative").print_stats(18)


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("overhead")
    o.add_argument("--ranks", default="2,4")
    o.add_argument("--steps", type=int, default=30)
    o.add_argument("--repeat", type=int, default=1)
    o.add_argument("--keep", help="copy the traced jobs here (job2/, job4/)")
    a = sub.add_parser("analysis")
    a.add_argument("job", help="a real job folder whose ranks are copied")
    a.add_argument("--ranks", default="256", help="rank counts, comma-separated (1024,4096)")
    a.add_argument("--repeat", type=int, default=1)
    a.add_argument("--profile", action="store_true")
    ns = ap.parse_args()
    overhead(ns) if ns.cmd == "overhead" else analysis(ns)


if __name__ == "__main__":
    main()
