"""What the minifier reads from a failed trace: the graph, the failure, its flags and its region.

Everything comes from the trace's JSON and text files (``tuidebug.trace.format.reader``); nothing in the
trace is unpickled or executed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from tuidebug.errors import MinifyError
from tuidebug.compiler import trace_config
from tuidebug.minify.codegen import config_flag_ok
from tuidebug.minify.signature import Signature
from tuidebug.trace.format.error_record import ErrorRecord
from tuidebug.trace.format.graph import Graph
from tuidebug.trace.format.reader import GraphRecord, StageInfo, Trace, TraceError
from tuidebug.trace.queries.numerics import first_divergences

#: config that tuidebug's capture sets for itself; a repro never needs it
CAPTURE_ONLY_FLAGS = {"trace.provenance_tracking_level", "force_disable_caches"}
_SNIPPET = re.compile(r"^\s*\d+\s*\|\s?(?P<code>.*\S)\s*$")
_DIAG_LINE = re.compile(r"\berror:", re.IGNORECASE)


@dataclass
class Failure:
    """A failed trace, read for minification."""

    trace: Trace
    record: GraphRecord
    stage: StageInfo
    graph: Graph
    error: ErrorRecord
    signature: Signature
    flags: dict[str, Any]
    skipped_flags: list[str] = field(default_factory=list)
    confirm_flags: dict[str, Any] = field(default_factory=dict)  # risky: applied if named

    @property
    def text(self) -> str:
        return self.error.text()


def load_failure(path: str | Path, allowed: Mapping[str, Any] | Iterable[str] = ()) -> Failure:
    """Open ``path`` and find the failing graph's ATen-level snapshot; raise MinifyError if none.
    The trace's risky flags are applied only when ``allowed`` (confirmed by name)."""
    try:
        trace = Trace(path)
    except TraceError as e:
        raise MinifyError(str(e)) from e
    error = trace.error
    if trace.status != "failed" or error is None:
        raise MinifyError(f"the trace {path} did not fail (status: {trace.status}); only a failed "
                          "trace (compile error, runtime error, accuracy mismatch) can be minified")
    record = _failed_graph(trace, error)
    if record is None:
        raise MinifyError(f"the failure ({error.phase}: {error.type}) happened "
                          "before Inductor received a graph; there is no graph to minify")
    stage = _aot_stage(record)
    if stage is None:
        raise MinifyError(f"graph {record.id} has no ATen-level snapshot (aot_* or post_grad "
                          "stage); the compile failed too early to minify")
    graph = record.stage_graph(stage)
    if graph is None:
        problems = "; ".join(str(p) for p in trace.problems) or "unreadable"
        raise MinifyError(f"cannot read the {stage.name} snapshot of graph {record.id}: {problems}")
    flags, skipped, confirm = _flags(trace, allowed)
    return Failure(trace, record, stage, graph, error, Signature.from_trace_error(error), flags,
                   skipped, confirm)


def _failed_graph(trace: Trace, error: ErrorRecord) -> GraphRecord | None:
    gid = error.graph
    if gid:
        try:
            return trace.graph(gid)
        except KeyError:
            pass
    failed = [g for g in trace.graphs if g.status == "failed"]
    return failed[0] if failed else None


def _aot_stage(record: GraphRecord) -> StageInfo | None:
    snaps = record.snapshots()
    for s in snaps:
        if s.name.startswith("aot_") and s.name != "aot_joint":
            return s
    return next((s for s in snaps if s.name == "post_grad"), None)


def _flags(trace: Trace, allowed: Mapping[str, Any] | Iterable[str] = ()
           ) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """Config values that differ from the defaults (minus tuidebug's own), as in the capture:
    (applied, left out, risky ones waiting to be confirmed by name)."""
    cfg = trace.config
    own = set(cfg.get("set_by_tuidebug") or []) | CAPTURE_ONLY_FLAGS
    own |= set(trace.manifest.tuidebug_config)
    changed = cfg.get("changed") or {}
    out: dict[str, Any] = {}
    skipped: list[str] = []
    for name, entry in changed.items():
        if name in own:
            continue
        value = entry.get("value") if isinstance(entry, dict) else entry
        if config_flag_ok(name, value):
            out[name] = value
        else:
            skipped.append(name)
    for name, value in trace.manifest.config_overrides.items():
        if name not in out and name not in own and config_flag_ok(name, value):
            out[name] = value
    # config from a trace is applied only where the flag registry vouches for it
    config = trace_config.split(out, allowed)
    skipped += [f"{name} ({why})" for name, why in config.left_out.items()]
    return config.apply, skipped, config.confirm


def diverging_kernel(failure: Failure) -> str | None:
    """The first diverging kernel of the failed graph (``trace.queries.numerics``: the eager
    check judged its kernels one by one), when the failure is an accuracy mismatch and the
    kernel is in the graph that failed; else None."""
    if failure.error.phase != "accuracy":
        return None
    found = [d.kernel for d in first_divergences(failure.trace) if d.graph == failure.record.id]
    return found[0] if found else None


def regions(failure: Failure, units: set[str], max_unnamed: int = 6,
            from_divergence: bool = True) -> list[list[str]]:
    """Node sets of the kernels the failure points to, smallest first.

    An accuracy mismatch whose first diverging kernel is known (``diverging_kernel``; not
    with ``from_divergence=False``) points to that kernel alone. Otherwise a kernel is
    implicated when the error text names it (a runtime error's traceback shows the kernel
    call), or when a source line the C++/Triton compiler quoted next to an ``error:`` is in its
    code. When nothing is implicated (an accuracy mismatch), every generated kernel is a region
    if there are at most ``max_unnamed`` of them.
    """
    prov = failure.record.provenance.get("kernels") or {}
    text = failure.text
    first = diverging_kernel(failure) if from_divergence else None
    named = [first] if first in prov else []
    if not named:
        named = [k for k in prov if re.search(rf"(?<!\w){re.escape(k)}(?!\w)", text)]
    if not named:
        snippets = _error_snippets(text)
        if snippets:
            for k, info in prov.items():
                entry = failure.record.kernel(k)
                if info.get("kind") == "extern" or not entry or not entry.file:
                    continue
                code = failure.record.code(entry.file) or ""
                if any(s in code for s in snippets):
                    named.append(k)
    if not named:
        generated = [k for k, info in prov.items() if info.get("kind") != "extern"]
        if len(generated) <= max_unnamed:
            named = generated
    out: list[list[str]] = []
    for k in named:
        nodes = [n for n in (prov.get(k) or {}).get("fx_nodes") or [] if n in units]
        if nodes and nodes not in out:
            out.append(nodes)
    return sorted(out, key=len)


def _error_snippets(text: str) -> list[str]:
    """Source lines a compiler quoted right after an ``error:`` diagnostic."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines[:-1]):
        if _DIAG_LINE.search(line) and "warning" not in line.lower():
            m = _SNIPPET.match(lines[i + 1])
            if m and len(m.group("code")) >= 6 and any(c.isalpha() for c in m.group("code")):
                out.append(m.group("code").strip())
    return out
