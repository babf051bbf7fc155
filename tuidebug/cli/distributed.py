"""``tuidebug trace`` for distributed jobs: launching one under torchrun, and tracing one rank.

``tuidebug trace --nproc-per-node N … -o DIR script.py`` runs PyTorch's own launcher
(``python -m torch.distributed.run``) as a child process, which starts ``tuidebug trace -o DIR
script.py`` in every rank. A ``tuidebug trace`` that finds itself inside a launcher (torchrun,
Slurm; :func:`tuidebug.trace.jobs.job.rank_from_env`) traces its rank into ``DIR/rank_<r>/`` and
writes its record (``tuidebug.trace.jobs.job``). Nothing here imports torch.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tuidebug import proc
from tuidebug.cli.minifying import positive_float
from tuidebug.cli.rank_sigterm import RankSigterm
from tuidebug.errors import CliError
from tuidebug.trace.format import schema

# tuidebug trace's options that are torchrun's, passed on as they are (value-taking ones)
TORCHRUN_OPTIONS = ("--nproc-per-node", "--nnodes", "--node-rank", "--master-addr",
                    "--master-port", "--rdzv-backend", "--rdzv-endpoint", "--rdzv-id",
                    "--rdzv-conf", "--max-restarts", "--monitor-interval", "--local-addr")


def _dest(option: str) -> str:
    return option.lstrip("-").replace("-", "_")


def torchrun_arguments(p: argparse.ArgumentParser) -> list[str]:
    """Add torchrun's options to ``tuidebug trace``; returns their option strings."""
    g = p.add_argument_group("distributed (run the script under torchrun, every rank traced)")
    strings: list[str] = []
    for opt in TORCHRUN_OPTIONS:
        a = g.add_argument(opt, dest=_dest(opt), metavar=_dest(opt).upper(),
                           help=("processes per node: trace every rank of a torchrun job into "
                                 "DIR/rank_<r>/ (see docs/trace-format.md)"
                                 if opt == "--nproc-per-node" else argparse.SUPPRESS))
        strings += a.option_strings
    a = g.add_argument("--standalone", action="store_true",
                       help="torchrun's --standalone (the default for a single node)")
    strings += a.option_strings
    a = g.add_argument("--timeout", type=positive_float, default=None, metavar="SECONDS",
                       help="stop the job when it runs longer (a hang): every rank's process "
                            "group is ended; `tuidebug info DIR` says where each rank waits")
    return strings + a.option_strings


def torchrun_options(ns: argparse.Namespace) -> list[str]:
    """The torchrun command line's options for ``ns``; a single node with no rendezvous given
    gets ``--standalone`` (a free port, so two jobs on one machine never collide)."""
    out: list[str] = []
    for opt in TORCHRUN_OPTIONS:
        value = getattr(ns, _dest(opt), None)
        if value is not None:
            out += [opt, str(value)]
    given = {o for o in TORCHRUN_OPTIONS if getattr(ns, _dest(o), None) is not None}
    multi_node = str(getattr(ns, "nnodes", None) or "1") not in ("1", "1:1")
    if ns.standalone or not (multi_node or given & {"--master-addr", "--master-port",
                                                  "--rdzv-backend", "--rdzv-endpoint"}):
        out.insert(0, "--standalone")
    return out


def _passed_trace_options(ns: argparse.Namespace) -> list[str]:
    out: list[str] = []
    if ns.no_check:
        out.append("--no-check")
    if ns.use_cache:
        out.append("--use-cache")
    if ns.accuracy_tol is not None:
        out += ["--accuracy-tol", repr(float(ns.accuracy_tol))]
    if ns.profile:
        out += ["--profile", str(int(ns.profile))]
    for s in ns.set:
        out += ["--set", s]
    return out


def launch(ns: argparse.Namespace) -> int:
    """Run the job under torchrun, every rank traced into ``-o DIR``; then assemble
    ``DIR/job.json`` and print the cross-rank summary. Returns torchrun's verdict (0 or 1)."""
    from tuidebug.trace.jobs import job

    if not ns.output:
        raise CliError("a distributed trace needs an output directory: -o DIR")
    n = str(ns.nproc_per_node).strip()
    if n.lstrip("+-").isdigit() and int(n) < 1:  # torchrun answers with a bare AssertionError
        raise CliError(f"--nproc-per-node {n}: give the number of processes per node (at least "
                       "1), or one of torchrun's words (auto, cpu, gpu)")
    if ns.profile and ns.no_check:  # every rank would refuse it, after torchrun started them
        raise CliError("--profile runs after the eager check: drop --no-check")
    out = Path(ns.output)
    script = Path(ns.script)
    if not script.is_file():
        raise CliError(f"no such script: {ns.script}")
    multi_node = str(ns.nnodes or "1") not in ("1", "1:1")
    if out.exists() and any(out.iterdir()) and not (multi_node and job.is_job_dir(out)):
        # several nodes share one folder: each rank refuses its own rank_<r>/ if not empty
        raise CliError(f"output directory {out} is not empty; choose another with -o")
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "torch.distributed.run", *torchrun_options(ns),
           "-m", "tuidebug.cli", "trace", "-o", str(out.resolve()), *_passed_trace_options(ns),
           str(script), *ns.args]
    env = proc.child_env()
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "GROUP_RANK", "SLURM_PROCID"):
        env.pop(name, None)  # torchrun sets them per rank; ours must not leak in
    print(f"[tuidebug] tracing {ns.script} under torchrun → {out}", file=sys.stderr, flush=True)
    timed_out = False
    # in the terminal's group, as a single-process trace: Ctrl-C reaches torchrun and every rank
    with proc.spawn(cmd, env=env, own_group=False) as child:
        try:
            code = child.wait(timeout=ns.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            print(f"[tuidebug] the job ran longer than --timeout {ns.timeout:g}s: stopping every "
                  "rank", file=sys.stderr, flush=True)
            _dump_stacks(out)
            code = _stop_job(child, out)
        except KeyboardInterrupt:
            child.terminate()  # torchrun ends every rank on SIGTERM (SIGKILL would orphan them)
            child.wait()
            raise
    _close_records(out, timed_out=timed_out)
    job.write_job(out, launcher="torchrun")
    _store_once(out)
    from tuidebug.cli.viewing import open_path, print_job_info

    print_job_info(out, as_json=False)
    if ns.open and sys.stdout.isatty():
        open_path(out)
    elif ns.open:
        print("tuidebug: --open needs a terminal; open the job with: tuidebug open "
              f"{out}", file=sys.stderr)
    if timed_out:
        print(f"tuidebug: the job was stopped after --timeout {ns.timeout:g}s; where each rank "
              f"waited: tuidebug info {out}", file=sys.stderr)
        return 1
    if code != 0:
        print(f"tuidebug: torchrun exited with code {code}; per-rank traces in {out}",
              file=sys.stderr)
        return 1
    return 0


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, not ours
        return True
    return True


def _job_pids(root: Path) -> list[int]:
    """This node's processes of the job still alive: each running rank (it leads the process
    group torchrun made for it, its capture child included) and its capture child; a rank sent
    SIGTERM that still waits for its script (``killed``, no exit code yet) too."""
    from tuidebug.trace.jobs import job

    host = socket.gethostname()
    pids = []
    for rec in job.read_job(root)["ranks"]:
        waits = rec.get("status") == "killed" and rec.get("exit_code") is None
        if (rec.get("status") != "running" and not waits) or rec.get("hostname") != host:
            continue
        pids += [rec.get("pid"), _capture_pid(root, rec["rank"])]
    return [p for p in pids if _alive(p)]


def _capture_pid(root: Path, rank: int) -> int | None:
    """The pid of rank ``rank``'s capture child (its trace's manifest), or None."""
    from tuidebug.trace.format.manifest import find_manifest
    from tuidebug.trace.jobs import job

    m = find_manifest(job.rank_dir(root, rank))
    return m.pid if m is not None and m.pid is not None and m.pid > 0 else None


def _dump_stacks(root: Path, wait: float = 5.0) -> None:
    """Before a hung job is ended: ask each running rank of this node for its Python stacks
    (SIGUSR1 to its capture child, which dumps every thread to ``job/rank_<r>.stacks.txt``)
    and wait up to ``wait`` seconds for them."""
    from tuidebug.trace.jobs import job
    from tuidebug.trace.jobs.progress import progress_path, stacks_path

    host = socket.gethostname()
    asked = []
    for rec in job.read_job(root)["ranks"]:
        if rec.get("status") != "running" or rec.get("hostname") != host:
            continue
        pid = _capture_pid(root, rec["rank"])
        path = stacks_path(progress_path(root, rec["rank"]))
        if pid is not None and _alive(pid) and path.is_file() and not path.is_symlink():
            try:
                os.kill(pid, signal.SIGUSR1)
                asked.append(path)
            except OSError:
                pass
    deadline = time.monotonic() + wait
    while asked and time.monotonic() < deadline:
        if all(p.stat().st_size > 0 for p in asked):
            time.sleep(0.2)  # let the last thread's lines land
            return
        time.sleep(0.1)


def _stop_job(child: subprocess.Popen[Any], root: Path, grace: float = 20.0) -> int:
    """End a job that ran too long: SIGTERM torchrun (it SIGTERMs every rank's process group,
    then SIGKILLs what is left), then SIGKILL the process group of any rank of this node still
    alive ``grace`` seconds later, and torchrun itself. Returns torchrun's exit code."""
    child.terminate()
    try:
        code = child.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        code = None
    for pid in _job_pids(root):
        proc.kill_group(pid)
    if code is None:
        child.kill()
        code = child.wait()
    deadline = time.monotonic() + 5
    while _job_pids(root) and time.monotonic() < deadline:
        time.sleep(0.1)
    return code


def _close_records(root: Path, timed_out: bool = False) -> None:
    """Records of this node's ranks still ``running`` once torchrun has returned: the rank was
    ended before it could say how (torchrun stops every rank when one fails; ``--timeout``)."""
    from tuidebug.trace.jobs import job

    host = socket.gethostname()
    for rec in job.read_job(root)["ranks"]:
        # a rank --timeout stopped wrote ``killed`` itself on torchrun's SIGTERM
        termed = timed_out and rec.get("status") == "killed" and rec.get("ended_by") == "SIGTERM"
        # sent SIGTERM, it waited for its script and was SIGKILLed first (torchrun's 30 s)
        waited = rec.get("status") == "killed" and rec.get("exit_code") is None
        if ((rec.get("status") == "running" or termed or waited) and rec.get("hostname") == host
                and not _alive(rec.get("pid"))):  # another launcher's rank on this host runs on
            if timed_out:
                job.mark_stopped(root, rec["rank"], "tuidebug trace --timeout: the job ran too "
                                                    "long (a hang); ended while running")
            job.write_record(root, {**rec, "status": "timed_out" if timed_out else "killed",
                                    "finished_at": time.time(),
                                    "note": "stopped by --timeout (the job ran too long)"
                                    if timed_out else "sent SIGTERM, then ended (SIGKILL) "
                                    "before its script did: torchrun stops every rank when one "
                                    "fails, and kills what still runs 30 s later" if waited
                                    else "ended before it finished (torchrun stops every rank "
                                    "when one fails)"})


NO_GRAPH = "no Inductor graph was compiled (the trace's warnings say why); not a failure"


def trace_rank(ns: argparse.Namespace, where: dict[str, Any]) -> int:
    """Trace this rank of a job started by an outer launcher into ``DIR/rank_<r>/``, with its
    record in ``DIR/job/``; returns the script's own exit code (tracing never changes a job's
    outcome: what the capture has to say, such as no Inductor graph, goes into the trace, the
    record and ``tuidebug info``)."""
    from tuidebug.cli.compiling import run_trace
    from tuidebug.trace.format.reader import Trace
    from tuidebug.trace.jobs import job
    from tuidebug.trace.queries.summary import summary_status

    if not ns.output:
        raise CliError("under a distributed launcher, tuidebug trace needs -o DIR (shared by "
                       "every rank; rank r writes DIR/rank_<r>/)")
    root = Path(ns.output)
    rank = int(where["rank"])
    record: dict[str, Any] = {**where, "hostname": socket.gethostname(), "pid": os.getpid(),
                              "trace": job.rank_dir(root, rank).name, "status": "running",
                              "started_at": time.time()}
    job.rank_dir(root, rank).parent.mkdir(parents=True, exist_ok=True)
    job.write_record(root, record)
    from tuidebug.trace.jobs.progress import progress_path

    sigterm = RankSigterm(root, record)

    code, out, last = run_trace(ns.script, ns.args, job.rank_dir(root, rank),
                                check=not ns.no_check, use_cache=ns.use_cache, sets=ns.set,
                                accuracy_tol=ns.accuracy_tol, quiet=rank != 0,
                                profile=ns.profile, progress=progress_path(root, rank),
                                own_exit=True, on_start=sigterm.started)
    record.update(sigterm.end(code))
    if code != 0 and last:  # what the rank said last: a process the NCCL watchdog aborted
        record["last_words"] = [line[:500] for line in last]  # (SIGABRT) raised nothing
    job.write_record(root, record)  # its end, before the trace is read
    status, graphs = record["status"], None
    if sigterm.received:  # within torchrun's 30 s before its SIGKILL: the manifest's count only
        graphs = _listed_graphs(out)
    elif (out / schema.MANIFEST).exists():
        try:
            t = Trace(out)
            graphs = len(t.graphs)
            # as info says it: script_failed where the compile was fine and the script was not
            status = summary_status(t, exit_code=code)
        except Exception:  # noqa: BLE001 - an unreadable trace is reported as such
            status = "unreadable"
    record["status"] = status
    if graphs == 0:
        record["note"] = NO_GRAPH if "note" not in record else f"{record['note']}; {NO_GRAPH}"
    job.write_record(root, record)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # its end is written
    job.write_job(root)
    said = f"; {NO_GRAPH}" if graphs == 0 else ""
    print(f"[tuidebug] rank {rank}: {status}{said} → {out}", file=sys.stderr, flush=True)
    if code < 0:  # the script's process died of a signal: so does the rank, as untraced
        proc.die_of(-code)
    return code  # the script's own: what tuidebug has to say is in the trace and info


def _listed_graphs(out: Path) -> int | None:
    """How many graphs a rank's manifest lists, without reading the trace (None: not told)."""
    from tuidebug.trace.format.manifest import read_manifest

    try:
        listed = read_manifest(out).graphs
    except Exception:  # noqa: BLE001 - no manifest, or an unreadable one: not told
        return None
    return None if listed is None else len(listed)


def _store_once(root: Path) -> None:
    """Identical files of the ranks hard-linked (``tuidebug.trace.jobs.dedup``), and said."""
    from tuidebug.trace.jobs.dedup import link_identical

    s = link_identical(root)
    if s["linked"]:
        print(f"[tuidebug] identical files of the ranks stored once: {s['linked']} of "
              f"{s['files']} files linked, {s['bytes_before'] / 1e6:.1f} MB → "
              f"{s['bytes_after'] / 1e6:.1f} MB", file=sys.stderr, flush=True)


def merge_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("sources", nargs="+", metavar="JOBDIR",
                   help="job folders of the same job (e.g. one per node)")
    p.add_argument("-o", "--output", required=True, help="the new job folder")


def cmd_merge(ns: argparse.Namespace) -> int:
    from tuidebug.trace.jobs import job

    try:
        merged = job.merge([Path(s) for s in ns.sources], Path(ns.output))
    except ValueError as e:
        raise CliError(str(e)) from None
    ranks = [r["rank"] for r in merged["ranks"]]
    _store_once(Path(ns.output))
    print(f"[tuidebug] merged {len(ranks)} rank(s) of world size {merged['world_size']} into "
          f"{ns.output}" + (f"; missing ranks {merged['missing_ranks']}"
                             if merged["missing_ranks"] else ""), file=sys.stderr)
    return 0
