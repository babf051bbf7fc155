"""Compare two traces: config, passes, IR and fusion, kernels (with code diffs), times. No torch.

``diff_traces(a, b)`` returns plain JSON-able data (``tuidebug diff --json`` prints it; the TUI's
comparison screen and ``viewers/diff_view.py`` render it)::

    {"a": SIDE, "b": SIDE,                       # path, name, status, overrides, recompile info
     "config": {"changed": [{"name", "a", "b", "capture"}], "overrides": [...],
                "install_paths": [{"name", "a", "b"}],   # same file of two installs
                "capture_settings": [...], "note"},
     "graphs": [GRAPH, ...],                      # matched by graph id
     "compiles": [{"id", "in", "compile_time_s", "inductor_time_s", "code_gen_time_s",
                   "counters": {NAME: {"a", "b"}}}],
     "runtime": [{"compile_id", "first_call_s", "eager_s", "close", "max_abs"}],
     "profile": None | {"profiled": {"a","b"}, "totals": {NAME: {"a","b"}},   # --profile
                        "kernels"|"lines"|"modules": [{"key", "a", "b", "delta", …}]},
     "cache": [{"compile_id", "cache", "graph_kind", "result": {"a","b"}, "same_key",
                "reasons": [text]}],              # graph-cache lookups (trace --use-cache)
     "graph_breaks": {"added": [BREAK], "gone": [BREAK],   # queries/break_diff: each break once
                      "kept": n,                           # distinct breaks both have
                      "met": [BREAK + {"times_a", "times_b"}]},  # both, met a different number
                                                           # of times (once per compile)
     "summary": {...}, "lines": [one-line findings, most important first]}

    GRAPH = {"id", "in" ("both" | "a" | "b"), "kind", "status": {"a", "b"}, "nodes": {"a", "b"},
             "stages": [{"name", "a", "b"}],                     # snapshot node counts that differ
             "passes": [{"name", "subsystem", "a", "b"}],        # passes whose effect differs
             "ir": {"pre": COUNTS, "post": COUNTS, "groups_only_a", "groups_only_b"},
             "fusion": {"fused": {"a","b"}, "rejected": {"a","b"}, "reasons": [{"reason","a","b"}]},
             "kernels": [{"status" (unchanged|changed|added|removed), "a", "b", "kind",
                          "lines": {"a","b"}, "diff", "compile_s": {"a","b"},
                          "compiled": {"a","b"} ("built" | "cached" | None),
                          "run_s": {"a","b"}, "run_min_s": {"a","b"}, "calls": {"a","b"},
                          "timed": {"a","b"} (calls timed: calls × the graph's runs),
                          "run_ratio" (B/A of run_s)}],
             "externs": [{"name", "a", "b"}], "wrapper": {"lines", "markers", "diff"},
             "phase_s": {PHASE: {"a","b"}}, "compile_s": {"a","b"}, "error": {"a","b"}}

Every ``{"a": x, "b": y}`` pair holds the value in trace A and trace B (``None`` where absent).
Kernels are matched by name with the numeric suffix dropped (``cpp_fused_add_0`` and
``cpp_fused_add_3`` are the same kernel), and their code compared with their own names
normalised, so renumbering alone is never a change.
"""

from __future__ import annotations

import os
from typing import Any

from tuidebug.trace.queries import cache_keys
from tuidebug.trace.diff.common import pair
from tuidebug.trace.diff.config import config_diff, side
from tuidebug.trace.diff.findings import finding_lines, format_duration, summary
from tuidebug.trace.diff.graphs import graph_diff
from tuidebug.trace.diff.kernels import WRAPPER_MARKERS, normalize_kernel_name
from tuidebug.trace.diff.profile import machine, profile_diff, profile_findings
from tuidebug.trace.diff.runs import compile_diffs, runtime_diffs
from tuidebug.trace.format.reader import GraphRecord, Trace
from tuidebug.trace.queries import break_diff
from tuidebug.trace.queries.attempts import first_attempt, is_compile_id

__all__ = ["diff_traces", "normalize_kernel_name", "finding_lines", "format_duration",
           "WRAPPER_MARKERS"]


def _attempt_key(g: GraphRecord) -> tuple[str, str] | None:
    """A graph's compile without its attempt (``0/0_2`` -> ``0/0``) and its kind and piece
    (the id after the compile's: ``inference``, ``backward-2``); None where its compile is not
    known ("?"): such graphs are no attempts of one compile."""
    if not is_compile_id(g.compile_id):
        return None
    return first_attempt(str(g.compile_id)), g.id.split("-", 1)[-1]


def _paired(a: list[GraphRecord], b: list[GraphRecord]
            ) -> list[tuple[GraphRecord | None, GraphRecord | None]]:
    """The graphs of A and B side by side: by id, a graph an analysis abandoned (status
    ``restarted``) only with another such; then each graph left of A with the one left of B
    of the same compile, kind and piece, whichever attempt made it (Dynamo made compile 0/0's
    graph in attempt ``0/0_2`` in one run, ``0/0_1`` in another); the rest alone."""
    def done(g: GraphRecord) -> bool:
        return g.status != "restarted"

    by_b = {g.id: g for g in b}
    out: list[tuple[GraphRecord | None, GraphRecord | None]] = []
    used: set[str] = set()
    left_a = []
    for g in a:
        other = by_b.get(g.id)
        if other is not None and done(other) == done(g):
            out.append((g, other))
            used.add(other.id)
        else:
            left_a.append(g)
    left_b = {key: g for g in b if g.id not in used and done(g)
              and (key := _attempt_key(g)) is not None}
    for g in left_a:
        key = _attempt_key(g)
        other = left_b.pop(key, None) if done(g) and key is not None else None
        out.append((g, other))
        if other is not None:
            used.add(other.id)
    out += [(None, g) for g in b if g.id not in used]
    return out


def diff_traces(a: Trace | str | os.PathLike[str], b: Trace | str | os.PathLike[str], *,
                code: bool = True, context: int = 3, max_diff_lines: int = 400) -> dict[str, Any]:
    """Compare trace ``a`` (before) with ``b`` (after). ``code=False`` leaves out diff texts."""
    ta, tb = (t if isinstance(t, Trace) else Trace(t) for t in (a, b))
    graphs = []
    for ga, gb in _paired(ta.graphs, tb.graphs):
        g = graph_diff((ga or gb).id, ga, gb, code=code,  # type: ignore[union-attr]
                       context=context, max_diff_lines=max_diff_lines)
        if ga is not None and gb is not None and ga.id != gb.id:
            g["id_b"] = gb.id
        graphs.append(g)
    out: dict[str, Any] = {
        "format": "tuidebug.diff/1",
        "a": side(ta), "b": side(tb),
        "config": config_diff(ta, tb),
        "graphs": graphs,
        "compiles": compile_diffs(ta, tb),
        "runtime": runtime_diffs(ta, tb),
        "profile": profile_diff(ta, tb),
        "machine": pair(machine(ta), machine(tb)),
        "cache": cache_keys.across(ta.cache_lookups(), tb.cache_lookups()),
        "graph_breaks": break_diff.across(ta, tb).to_json(),
    }
    out["summary"] = summary(out)
    out["lines"] = (finding_lines(out) + break_diff.finding_lines(out["graph_breaks"])
                    + cache_keys.finding_lines(out["cache"])
                    + profile_findings(out["profile"], format_duration))
    out["problems"] = {"a": [str(p) for p in ta.problems], "b": [str(p) for p in tb.problems]}
    return out
