"""What comparing a trace with another works out from that trace alone, worked out ahead, in
small steps: the TUI compares its open trace with one trace after another, and does this while
nobody presses a key (``tui/prebuild.py``), so that even its first comparison reads only the
other trace.

Each step is what ``diff_traces`` keeps of one graph (``common.kept``): its records (meta, kernel
times, autotuning, error), its kernel index, its
kernels' code normalised, its wrapper folded and its markers counted, its IR before and after
fusion counted, its fusion decisions counted, its last snapshot's op counts — the digests of
the files a comparison asks ``same_file`` about, and the trace's own records (config, compiles,
runtime checks, profile). The values are the ones a comparison
makes; worked out here first, the comparison finds them kept.
"""

from __future__ import annotations

from typing import Callable

from tuidebug.trace.diff.graphs import _fusion_of, _op_counts, _post, _pre
from tuidebug.trace.diff.kernels import _own_markers, _sources
from tuidebug.trace.format import schema
from tuidebug.trace.format.reader import GraphRecord, Trace

Step = Callable[[], object]


def compared_files(g: GraphRecord) -> list[str]:
    """The files of ``g`` a comparison asks whether another graph holds in the same bytes."""
    snaps = g.snapshots()
    return [f for f in (snaps[-1].file if snaps else None, schema.KERNELS_INDEX, schema.WRAPPER,
                        f"{schema.IR_POST}.json", f"{schema.IR_PRE}.json", schema.FUSION,
                        *(k.file for k in g.kernels if not k.extern)) if f]


def graph_steps(g: GraphRecord) -> list[Step]:
    """The steps of one graph, each a file or two read and worked out."""
    return [
        lambda: (g.meta, g.timings, g.autotune, g.error),  # its records
        lambda: _sources(g, g.kernels),  # the kernel index and each kernel's code
        lambda: _own_markers(g),  # the wrapper folded, its markers counted
        lambda: _post(g),
        lambda: _pre(g),
        lambda: _fusion_of(g),
        lambda: [g.digest(f) for f in compared_files(g)],
        lambda: _op_counts(g),  # the last snapshot read (counted, not kept)
    ]


def trace_steps(trace: Trace) -> list[Step]:
    """What the comparison reads of the trace as a whole: its config, runtime checks and
    profile, its compiles' records (their graph breaks and cache lookups)."""
    from tuidebug.trace.queries.graph_breaks import trace_breaks

    return [lambda: (trace.config, trace.runtime, trace.profile),
            lambda: (trace.cache_lookups(), trace_breaks(trace))]


def side_steps(trace: Trace) -> list[Step]:
    """The trace's steps, then every graph's, the graphs in the trace's order."""
    return [*trace_steps(trace), *(step for g in trace.graphs for step in graph_steps(g))]
