"""Testing minification candidates: each rendered to a script, run by a pool of warm workers,
its verdict cached by canonical text (never tested twice), and the next candidates started
speculatively while the current one runs. ``CandidateTester`` is the half of the minifier
(``tuidebug.minify.minifier.Minifier``) that runs candidates and keeps the best one that fails
the trace's way; the minifier's steps decide which candidates to try.

This module never imports torch: the workers do.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import Future, TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from tuidebug.minify.codegen import ReproInfo, cache_key, render
from tuidebug.minify.pool import WorkerPool
from tuidebug.minify.program import Program, Reducer, Spec, Unsupported
from tuidebug.minify.signature import Signature


@dataclass
class Progress:
    """A progress report (passed to ``on_progress``)."""

    step: str
    attempts: int
    cache_hits: int
    nodes: int
    nodes_before: int
    elapsed_s: float
    message: str = ""


@dataclass
class _Best:
    spec: Spec
    program: Program


class _Cancelled(BaseException):
    """``on_progress`` raised: stop like Ctrl-C (a BaseException, so that no ``except
    Exception`` on the way swallows it)."""


class CandidateTester:
    """Runs candidates (``Spec`` → program → script → a worker) and records their verdicts."""

    def __init__(self, reducer: Reducer, info: ReproInfo, signature: Signature, work_dir: Path,
                 *, jobs: int, timeout: float,
                 on_progress: Callable[[Progress], None] | None) -> None:
        self.reducer = reducer
        self.info = info
        self.signature = signature
        self.work_dir = work_dir
        (self.work_dir / "candidates").mkdir(parents=True, exist_ok=True)
        self.jobs = max(1, jobs)
        self.timeout = timeout
        self.on_progress = on_progress
        self.pool: WorkerPool | None = None
        self.verdict: dict[str, bool] = {}
        self.pending: dict[str, Future[dict[str, Any]]] = {}
        self.programs: dict[str, tuple[Spec, Program]] = {}
        self.best: _Best | None = None
        self.attempts = self.cache_hits = self.rejected = self.confirm_runs = 0
        #: what ``on_progress`` raised to cancel the run (None: not cancelled)
        self.cancelled: BaseException | None = None
        self.step = "start"
        self.steps: list[dict[str, Any]] = []
        self.t0 = time.perf_counter()
        self._n = 0
        self._paths: dict[str, Path] = {}

    # -- reporting -----------------------------------------------------------------------------
    @property
    def nodes(self) -> int:
        return self.best.program.size if self.best else self.reducer.compute_count

    def progress(self, message: str = "") -> None:
        """Report to ``on_progress``. Whatever it raises is a request to cancel: the run stops
        as on Ctrl-C (``_Cancelled``), and it is not called again."""
        if not self.on_progress or self.cancelled is not None:
            return
        try:
            self.on_progress(Progress(self.step, self.attempts, self.cache_hits, self.nodes,
                                      self.reducer.compute_count,
                                      time.perf_counter() - self.t0, message))
        except Exception as e:  # noqa: BLE001 - the caller's way to cancel (the TUI's)
            self.cancelled = e
            raise _Cancelled() from e

    def _begin(self, step: str) -> tuple[str, int, int, float]:
        self.step = step
        self.progress()
        return step, self.attempts, self.confirm_runs, time.perf_counter()

    def _end(self, mark: tuple[str, int, int, float]) -> None:
        step, attempts, confirm_runs, t = mark
        row = {"step": step, "attempts": self.attempts - attempts, "nodes": self.nodes,
               "seconds": round(time.perf_counter() - t, 2)}
        if self.confirm_runs > confirm_runs:
            row["confirm_runs"] = self.confirm_runs - confirm_runs
        self.steps.append(row)

    # -- testing candidates ----------------------------------------------------------------------
    def _entry(self, spec: Spec) -> tuple[Spec, Program | None, str | None]:
        try:
            prog = self.reducer.build(spec)
            return spec, prog, (cache_key(prog, self.info) if prog is not None else None)
        except Unsupported:
            return spec, None, None

    def _submit(self, entry: tuple[Spec, Program | None, str | None]) -> None:
        spec, prog, key = entry
        if key is None or prog is None or key in self.verdict or key in self.pending:
            return
        assert self.pool is not None
        self._n += 1
        path = self.work_dir / "candidates" / f"c{self._n:04d}.py"
        path.write_text(render(prog, self.info))
        self.programs[key] = (spec, prog)
        self.pending[key] = self.pool.submit(path, self.timeout)
        self._paths[key] = path

    def _collect(self) -> None:
        for key, fut in list(self.pending.items()):
            if not fut.done():
                continue
            del self.pending[key]
            if fut.cancelled():
                self.programs.pop(key, None)
                continue
            self._record(key, fut.result())

    def _record(self, key: str, result: dict[str, Any]) -> None:
        self.attempts += 1
        sig = Signature.from_result(result)
        ok = self.signature.matches(sig)
        self.verdict[key] = ok
        if sig is not None and not ok:
            self.rejected += 1
        spec, prog = self.programs[key]
        self._log(key, prog, result, ok)
        if ok and (self.best is None or (prog.size, len(prog.inputs), len(prog.flags)) <
                   (self.best.program.size, len(self.best.program.inputs),
                    len(self.best.program.flags))):
            self.best = _Best(spec, prog)
        self.progress()

    def _log(self, key: str, prog: Program, result: dict[str, Any], ok: bool,
             **extra: Any) -> None:
        with open(self.work_dir / "candidates.jsonl", "a") as log:
            log.write(json.dumps({
                "n": self.attempts, "file": str(self._paths.get(key, "")), "nodes": prog.size,
                "inputs": len(prog.inputs), "outcome": result.get("outcome"),
                "kind": result.get("kind"), "type": result.get("type"), "match": ok,
                "message": str(result.get("message") or result.get("reason") or "")[:300],
                "seconds": result.get("seconds"), **extra}) + "\n")

    def _inflight(self) -> int:
        return sum(1 for f in self.pending.values() if not f.done())

    def first_failing(self, specs: Sequence[Spec]) -> int | None:
        """Index of the first spec whose candidate fails like the trace; None if none does.

        The next ``jobs - 1`` candidates are started speculatively while the current one runs;
        results are cached, so a speculative run is never repeated.
        """
        entries = [self._entry(s) for s in specs]
        nxt = 0
        for i, (_, _, key) in enumerate(entries):
            if key is None:
                continue
            if key in self.verdict:
                self.cache_hits += 1
            while key not in self.verdict:
                nxt = max(nxt, i)
                if key not in self.pending:
                    self._submit(entries[i])
                while nxt < min(len(entries), i + self.jobs) and self._inflight() < self.jobs:
                    self._submit(entries[nxt])
                    nxt += 1
                fut = self.pending.get(key)
                if fut is not None:
                    try:
                        fut.result(timeout=0.5)
                    except FutureTimeout:
                        self.progress()
                self._collect()
            if self.verdict[key]:
                self._cancel_queued()
                return i
        return None

    def _cancel_queued(self) -> None:
        for key, fut in list(self.pending.items()):
            if fut.cancel():
                del self.pending[key]
                self.programs.pop(key, None)

    def _drain(self) -> None:
        """Cancel what has not started and wait for what has (recording its verdict)."""
        self._cancel_queued()
        while self.pending:
            for fut in list(self.pending.values()):
                try:
                    fut.result(timeout=0.5)
                except FutureTimeout:
                    self.progress()
                except Exception:  # noqa: BLE001 - a cancelled/broken run has no verdict
                    pass
            self._collect()

    def _tester(self, make: Callable[[list[Any]], Spec]) -> Callable[[Sequence[Sequence[Any]]], int | None]:
        """The test ddmin calls: the first subset (``make`` turns it into a spec) whose candidate
        fails like the trace becomes the best so far."""
        def test(subsets: Sequence[Sequence[Any]]) -> int | None:
            specs = [make(list(s)) for s in subsets]
            i = self.first_failing(specs)
            if i is not None:
                self.best = _Best(specs[i], self._entry(specs[i])[1])  # type: ignore[arg-type]
            return i
        return test
