"""The minifier: a failed trace -> the smallest ``repro.py`` that still fails the same way.

Steps: (1) the kernel the failure points to (provenance; for an accuracy mismatch, the first
diverging kernel when the trace's check judged the kernels one by one) is tried as a region,
else the whole graph, and that start is run twice more on its own (a flaky failure stops here: its repro
would not reproduce); (2) delta debugging over its compute nodes; (3) over the config flags;
(4) over input simplifications (contiguous strides, sizes of 1, shared tensors, zeros/ones for
random values); (5) over scalar constants (float and int, to 1). Each candidate is rendered to
a standalone script, keyed by its canonical text (never tested twice) and run by a pool of warm
workers; it counts only if it fails with the trace's signature. The result is written to
``out`` and re-run in a fresh process; one that does not fail there is moved into the work
directory, so ``out`` never holds a repro that does not reproduce (an interrupted or cancelled
run keeps its best candidate at ``out``, marked not verified).

This module (the parent side) never imports torch: the workers do.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from tuidebug import proc
from tuidebug.minify import ddmin
from tuidebug.minify.candidates import CandidateTester, Progress, _Best, _Cancelled
from tuidebug.minify.codegen import ReproInfo, check_node, render
from tuidebug.minify.pool import WorkerPool, child_env
from tuidebug.minify.program import Reducer, Spec, Unsupported
from tuidebug.minify.signature import Signature
from tuidebug.minify.source import Failure, MinifyError, diverging_kernel, load_failure, regions

__all__ = ["MinifyError", "MinifyResult", "Progress", "minify"]


# Where delta debugging may start (``minify``'s ``start``).
STARTS = ("divergence", "kernels", "graph")
# The starting candidate must fail the trace's way this many times in a row (flaky failures).
CONFIRM_RUNS = 3


@dataclass
class MinifyResult:
    """What a minification did.

    ``nodes_before``/``nodes_after``: compute nodes (ATen calls and tuple indexing) of the
    captured graph and of the repro; ``attempts``: distinct candidates compiled and run;
    ``confirm_runs``: re-runs of the starting candidate (flakiness check; compiles too, not
    counted in ``attempts``); ``cache_hits``: candidates answered from the cache; ``rejected``:
    candidates that failed differently; ``launches``: processes started (workers,
    replacements, the fresh verification run); ``verified``: the written repro failed the
    trace's way in a fresh process; ``interrupted``: stopped early (Ctrl-C, or ``on_progress``
    raised to cancel), the repro written is the best so far and not verified.
    """

    repro_path: Path | None
    trace: str
    graph: str
    signature: str
    nodes_before: int
    nodes_after: int
    inputs_after: int
    attempts: int
    cache_hits: int
    rejected: int
    launches: int
    wall_s: float
    verified: bool
    interrupted: bool = False
    message: str = ""
    flags: dict[str, Any] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    work_dir: str | None = None
    confirm_runs: int = 0
    start: str = ""  # where delta debugging started: a kernel's region, or the whole graph

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["repro_path"] = str(self.repro_path) if self.repro_path else None
        return d


class Minifier(CandidateTester):
    """One minification run (use :func:`minify`): its steps; candidates are run by
    ``CandidateTester``."""

    def __init__(self, failure: Failure, out: Path, *, jobs: int = 2, timeout: float = 60.0,
                 tol: float | None = None,
                 on_progress: Callable[[Progress], None] | None = None,
                 work_dir: Path | None = None, start: str = "divergence") -> None:
        if tol is None:  # judge as the trace did
            tol = failure.trace.manifest.accuracy_tol
        for name, value in (("timeout", timeout), ("accuracy tol", tol)):
            if name != "timeout" and value is None:
                continue
            if not (isinstance(value, (int, float)) and 0 < value < float("inf")):
                raise MinifyError(f"{name} must be a positive number of "
                                  f"{'seconds' if name == 'timeout' else 'tolerance'}, "
                                  f"not {value!r}")
        self.failure = failure
        self.out = out
        signature = failure.signature
        exclude = {n.name for n in failure.graph.compute_nodes()
                   if check_node(n.target, n.args, n.kwargs) is not None}
        try:
            reducer = Reducer(failure.graph, failure.flags, exclude)
        except Unsupported as e:
            raise MinifyError(str(e)) from e
        info = ReproInfo(
            trace=str(failure.trace.root), graph=failure.record.id, stage=failure.stage.name,
            describe=signature.describe(), kind=signature.kind, type=signature.type,
            key=signature.key, diags=tuple(sorted(signature.diags)),
            nodes_before=reducer.compute_count, tol=tol)
        super().__init__(reducer, info, signature,
                         work_dir or Path(tempfile.mkdtemp(prefix="tuidebug-minify-")),
                         jobs=jobs, timeout=timeout, on_progress=on_progress)
        self.verify_launches = 0
        if start not in STARTS:
            raise MinifyError(f"start must be one of {', '.join(STARTS)}, not {start!r}")
        self.start_from = start
        self.start = ""

    # -- steps ---------------------------------------------------------------------------------
    def _spec(self, **changes: Any) -> Spec:
        assert self.best is not None
        return self.best.spec.with_(**changes)

    def find_start(self) -> None:
        """Try the regions the failure points to, smallest first; else the whole graph."""
        mark = self._begin("region")
        full = self.reducer.full_spec()
        units = set(self.reducer.units)
        found = [] if self.start_from == "graph" else \
            regions(self.failure, units, from_divergence=self.start_from == "divergence")
        specs = [Spec(frozenset(r), full.flags) for r in found]
        i = self.first_failing(specs) if specs else None
        if i is None:
            self.step = "graph"
            self.progress("no kernel region reproduces on its own; trying the whole graph")
            if self.first_failing([full]) is None:
                raise MinifyError(self._no_repro_message())
            self.best = _Best(full, self._entry(full)[1])  # type: ignore[arg-type]
            self.start = f"the whole graph ({len(units)} nodes)"
        else:
            self.best = _Best(specs[i], self._entry(specs[i])[1])  # type: ignore[arg-type]
            first = diverging_kernel(self.failure) if self.start_from == "divergence" else None
            self.start = (f"the first diverging kernel {first}" if i == 0 and first else
                          "a kernel the failure points to") + f" ({len(found[i])} nodes)"
        self._drain()  # a speculative run still going counts here; the confirmation runs alone
        self._end(mark)

    def confirm_start(self) -> None:
        """Run the starting candidate again, alone: a failure that comes and goes would make
        every later verdict a coin toss and end in a repro that does not reproduce."""
        assert self.best is not None and self.pool is not None
        mark = self._begin("confirm")
        self._drain()  # nothing else runs meanwhile
        _, prog, key = self._entry(self.best.spec)
        assert prog is not None and key is not None
        path = self._paths[key]
        for run in range(2, CONFIRM_RUNS + 1):
            self.progress(f"confirming the start: run {run} of {CONFIRM_RUNS}")
            fut = self.pool.submit(path, self.timeout)
            while True:
                try:
                    result = fut.result(timeout=0.5)
                    break
                except FutureTimeout:
                    self.progress()
            self.confirm_runs += 1
            sig = Signature.from_result(result)
            ok = self.signature.matches(sig)
            self._log(key, prog, result, ok, confirm=run)
            if not ok:
                got = sig.describe() if sig else str(result.get("outcome") or "no result")
                raise MinifyError(
                    f"the failure is flaky: {path.name} ({prog.size} compute nodes) failed the "
                    f"trace's way ({self.signature.describe()}) in {run - 1} of {run} runs; run {run} "
                    f"gave {got!r}. A repro minified from a failure that comes and goes would "
                    f"not reliably reproduce, so none was written. Make the failure deterministic "
                    f"first (fixed seeds, one compile thread, a stable toolchain), then minify "
                    f"again. (candidates and worker logs: {self.work_dir})")
        self._end(mark)

    def reduce_nodes(self) -> None:
        mark = self._begin("nodes")
        assert self.best is not None
        items = self.reducer.sort(self.best.spec.keep)
        ddmin.ddmin(items, self._tester(lambda kept: self._spec(keep=kept)))
        self._end(mark)

    def reduce_set(self, step: str, items: list[Any], make: Callable[[list[Any]], Spec]) -> None:
        """Keep as few of ``items`` as possible (``make(kept)`` builds the spec)."""
        if not items:
            return
        mark = self._begin(step)
        ddmin.minimal_needed(items, self._tester(make))
        self._end(mark)

    def reduce_rest(self) -> None:
        assert self.best is not None
        flags = sorted(self.best.spec.flags)
        self.reduce_set("flags", flags, lambda kept: self._spec(flags=kept))
        self.reduce_inputs()
        self.simplify("constants", "constants", self.reducer.simplifiable_constants)

    def reduce_inputs(self) -> None:
        """Simpler inputs, each a delta-debugging pass over what could be simplified (every
        candidate must still fail the trace's way): strided inputs made contiguous; dimension
        sizes made 1 (a size at a time, in every input at once, so that inputs that must agree
        still do; a graph that no longer runs eagerly is rejected before compiling); inputs
        with equal meta sharing one tensor; random values replaced by zeros, else by ones."""
        self.simplify("inputs", "contiguous", self.reducer.noncontiguous_inputs)
        self.simplify("inputs", "shrunk", self.reducer.shrinkable_sizes)
        self.simplify("inputs", "merged", self.reducer.mergeable_inputs)
        for value in ("zeros", "ones"):
            self.simplify("inputs", "fill", self.reducer.random_inputs,
                          lambda names, v=value: {(n, v) for n in names})

    def simplify(self, step: str, field_name: str, applicable: Callable[[Spec], list[Any]],
                 as_items: Callable[[set[Any]], set[Any]] = lambda s: s) -> None:
        """Apply as many of the simplifications ``applicable(best spec)`` (added to the spec's
        ``field_name``, through ``as_items``) as the failure survives: keep as few unsimplified
        as possible."""
        assert self.best is not None
        base = self.best.spec
        items = applicable(base)
        done = getattr(base, field_name)
        self.reduce_set(step, items, lambda kept: self._spec(
            **{field_name: done | as_items(set(items) - set(kept))}))

    def _no_repro_message(self) -> str:
        last = ""
        try:
            with open(self.work_dir / "candidates.jsonl") as f:
                rows = [json.loads(line) for line in f if line.strip()]
            if rows:
                r = rows[-1]
                last = (f" The whole graph gave: {r.get('outcome')}"
                        f"{' (' + str(r.get('kind')) + ': ' + str(r.get('type')) + ')' if r.get('kind') else ''}"
                        f" {r.get('message', '')[:200]}")
        except OSError:
            pass
        return (f"the failure ({self.signature.describe()}) does not reproduce when the captured "
                f"graph is compiled on its own with random inputs.{last} "
                f"(candidates and worker logs: {self.work_dir})")

    # -- output --------------------------------------------------------------------------------
    def write(self) -> Path | None:
        if self.best is None:
            return None
        self.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.out.with_name(f".{self.out.name}.tmp")
        tmp.write_text(render(self.best.program, self.info))
        os.replace(tmp, self.out)
        return self.out

    def verify(self) -> tuple[bool, str]:
        """Run the written repro in a fresh process; does it fail with the trace's signature?"""
        mark = self._begin("verify")
        result_file = self.work_dir / "verify.json"
        result_file.unlink(missing_ok=True)
        env = child_env({"TUIDEBUG_REPRO_RESULT": str(result_file)})
        log = open(self.work_dir / "verify.log", "wb")
        self.verify_launches += 1
        child = proc.spawn([sys.executable, str(self.out.resolve())], env=env,
                           cwd=str(self.work_dir), stdout=log, stderr=log)
        limit = max(self.timeout * 3, 180.0)
        try:  # progress (and the chance to cancel) every half second; killed on timeout
            rc = proc.wait(child, limit, tick=self.progress)
        finally:
            log.close()
        if rc is None:
            self._end(mark)
            return False, f"the repro did not finish within {limit:.0f}s in a fresh process"
        self._end(mark)
        try:
            result = json.loads(result_file.read_text())
        except (OSError, json.JSONDecodeError):
            return False, f"the repro exited with status {rc} without reporting a result"
        sig = Signature.from_result(result)
        if self.signature.matches(sig):
            return True, f"reproduces in a fresh process (exit status {rc})"
        got = sig.describe() if sig else str(result.get("outcome"))
        return False, f"in a fresh process the repro gave {got!r}, not the trace's failure"

    # -- the whole run -------------------------------------------------------------------------
    def run(self) -> MinifyResult:
        interrupted = False
        verified, message = False, ""
        self.pool = WorkerPool(self.jobs, log_dir=self.work_dir)
        try:
            try:
                self.find_start()
                self.confirm_start()
                self.reduce_nodes()
                self.reduce_rest()
            finally:
                self._cancel_queued()
                self.pool.close()
        except (KeyboardInterrupt, _Cancelled):
            interrupted = True
        path = self.write()
        if not interrupted and path is not None:
            try:
                verified, message = self.verify()
            except (KeyboardInterrupt, _Cancelled):
                interrupted = True
            if not verified and not interrupted:  # never leave a repro that does not reproduce
                kept = self.work_dir / f"unverified-{path.name}"
                shutil.move(str(path), kept)
                path = None
                message = (f"{message}; no repro written (the unverified candidate is kept "
                           f"as {kept})")
        if interrupted:
            how = "cancelled" if self.cancelled is not None else "interrupted"
            message = (f"{how}: wrote the best repro found so far ({self.nodes} compute "
                       f"nodes, not verified) to {path}" if path else
                       f"{how} before any candidate reproduced the failure; nothing written")
        result = self._result(path, verified, interrupted, message)
        self.step = "done"
        try:
            self.progress(message)
        except _Cancelled:  # cancelled once all was done: the result stands
            pass
        return result

    def _result(self, path: Path | None, verified: bool, interrupted: bool,
                message: str) -> MinifyResult:
        prog = self.best.program if self.best else None
        return MinifyResult(
            repro_path=path, trace=str(self.failure.trace.root), graph=self.failure.record.id,
            signature=self.signature.describe(), nodes_before=self.reducer.compute_count,
            nodes_after=prog.size if prog else self.reducer.compute_count,
            inputs_after=len(prog.inputs) if prog else 0, attempts=self.attempts,
            cache_hits=self.cache_hits, rejected=self.rejected,
            launches=(self.pool.launches if self.pool else 0) + self.verify_launches,
            wall_s=round(time.perf_counter() - self.t0, 2), verified=verified,
            interrupted=interrupted, message=message, flags=dict(prog.flags) if prog else {},
            steps=self.steps, work_dir=str(self.work_dir), confirm_runs=self.confirm_runs,
            start=self.start)


def minify(trace_path: str | os.PathLike[str], out: str | os.PathLike[str] = "repro.py",
           jobs: int = 2, timeout: float = 60.0,
           on_progress: Callable[[Progress], None] | None = None, *, tol: float | None = None,
           keep_work: bool = False, allowed: Mapping[str, Any] | Iterable[str] = (),
           start: str = "divergence") -> MinifyResult:
    """Minify the failed trace at ``trace_path`` into a standalone repro written to ``out``.

    Safe to call from a worker thread (the TUI does): it starts its own worker processes and
    reports through ``on_progress``. To cancel, raise from ``on_progress``: the run stops as on
    Ctrl-C and returns (``interrupted``, the best repro so far written to ``out``, not
    verified). ``start`` (to measure what each start saves): ``divergence`` (an accuracy
    mismatch's first diverging kernel when the trace knows it, else as ``kernels``),
    ``kernels`` (the kernels the error points to, or every generated kernel of a graph of at
    most six), ``graph`` (the whole graph). Raises
    :class:`MinifyError` for a trace that cannot be minified (it did not
    fail, has no graph, or the failure does not reproduce) or out-of-range limits.
    """
    failure = load_failure(trace_path, allowed)  # risky flags of the trace: only if allowed
    m = Minifier(failure, Path(out), jobs=jobs, timeout=timeout, tol=tol,
                 on_progress=on_progress, start=start)
    result = m.run()
    if (result.verified or result.interrupted) and not keep_work:
        shutil.rmtree(m.work_dir, ignore_errors=True)
        result.work_dir = None
    return result
