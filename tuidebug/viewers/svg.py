"""Export a captured graph as SVG: pick the graph and stage, build DOT, run Graphviz time-boxed.

``export_svg(trace, ...)`` is what the CLI and the TUI call. Layout runs ``dot`` in a subprocess
with a timeout; if it runs out of time it is retried with cheaper settings, then with ``sfdp``;
if all fail (or ``dot`` is not installed) the ``.dot`` file is kept and the error says so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from tuidebug.errors import DotMissing, LayoutFailed, ViewerError
from tuidebug.trace.format import safefile
from tuidebug.trace.format.graph import Graph
from tuidebug.trace.queries.provenance import kernel_owners
from tuidebug.trace.format.reader import GraphRecord, StageInfo, Trace, TraceError
from tuidebug.trace.queries.stages import find_stage, is_joint, snapshot_at, stage_diff, stage_label
from tuidebug.trace.queries.provenance import kernel_launches
from tuidebug.trace.queries.numerics import (FirstDivergence, first_divergences,
                                             testing_only_banner, testing_only_flags)
from tuidebug.viewers.summary_text import launch_text
from tuidebug.viewers.dot import DotOptions, DotResult, Overlay, build_dot, infer_modules

INSTALL_HINT = ("install Graphviz (Debian/Ubuntu: apt-get install graphviz; macOS: brew install "
                "graphviz; conda: conda install graphviz)")
DEFAULT_TIMEOUT_S = 60.0  # all layout attempts together
FAST_DOT = ["-Gnslimit=1", "-Gnslimit1=1", "-Gmclimit=0.3"]
CHEAP_DOT = ["-Gnslimit=0.2", "-Gnslimit1=0.2", "-Gmclimit=0.05", "-Gremincross=false"]


@dataclass
class Attempt:
    engine: str
    args: list[str]
    timeout: float


@dataclass
class Rendered:
    engine: str
    args: list[str]
    seconds: float
    tries: list[str] = field(default_factory=list)  # what was tried and how it ended


@dataclass
class Export:
    svg: Path
    dot: DotResult
    rendered: Rendered
    build_s: float
    warnings: list[str] = field(default_factory=list)  # for the user (the CLI prints them)


# -- choosing what to draw ----------------------------------------------------------------------

def resolve_graph(trace: Trace, graph_id: str | None) -> GraphRecord:
    if not trace.graphs:
        raise ViewerError(f"trace {trace.name} has no compiled graphs")
    if graph_id is None:
        return trace.graphs[0]
    for g in trace.graphs:
        if g.id == graph_id:
            return g
    raise ViewerError(f"no graph {graph_id!r} in {trace.name}; valid graphs: "
                      + ", ".join(g.id for g in trace.graphs))


def resolve_stage(rec: GraphRecord, stage: str | None = None, pass_index: int | None = None) -> StageInfo:
    """A stage by name, file stem or index (``--stage``), by pass index (``--pass``), or the last."""
    snaps = rec.snapshots()
    if not snaps:
        raise ViewerError(f"graph {rec.id} has no graph snapshots"
                          + (f" (status: {rec.status})" if rec.status else ""))
    if pass_index is not None:
        found = next((s for s in rec.stages if s.index == pass_index), None)
        if found is None:
            raise ViewerError(f"no pass {pass_index} in graph {rec.id}; valid passes: "
                              + ", ".join(f"{s.index} ({s.name})" for s in rec.stages))
        return found
    if stage is not None:
        found = find_stage(rec, stage)
        if found is None and stage.isdigit():
            found = next((s for s in rec.stages if s.index == int(stage)), None)
        if found is None:
            raise ViewerError(f"no stage {stage!r} in graph {rec.id}; valid stages: "
                              + ", ".join(stage_label(s) for s in snaps)
                              + " (or any pass index 0–" + str(len(rec.stages) - 1) + ")")
        return found
    return snaps[-1]


def ambiguous_stage(rec: GraphRecord, stage: str | None) -> str | None:
    """A warning when ``--stage NAME`` names several passes (``pattern_matcher`` runs many
    times): which one was taken, and how to pick another."""
    if stage is None:
        return None
    same = [s for s in rec.stages if s.name == stage]
    if len(same) < 2 or rec.find_stage(stage) is not same[0]:
        return None
    listed = ", ".join(f"{s.index}{'' if s.file else ' (no change)'}" for s in same)
    return (f"--stage {stage} matches {len(same)} passes ({listed}); drawing pass {same[0].index}. "
            f"Pick one with --pass N or a snapshot file stem.")


def snapshot_for(rec: GraphRecord, info: StageInfo) -> StageInfo:
    """The snapshot holding the graph as it was after ``info`` (a stage before every snapshot:
    the first)."""
    return snapshot_at(rec, info) or rec.snapshots()[0]


def load(rec: GraphRecord, info: StageInfo) -> Graph:
    g = rec.stage_graph(info)
    if g is None:
        problems = "; ".join(str(p) for p in rec.trace.problems) or "unreadable"
        raise ViewerError(f"cannot read the graph of {rec.id} at {stage_label(info)}: {problems}")
    return g


# -- overlays -----------------------------------------------------------------------------------

def kernel_overlay(rec: GraphRecord, graph: Graph) -> tuple[dict[str, str], dict[str, str],
                                                             dict[str, list[str]]]:
    """FX node -> the one kernel drawn around it, kernel -> kind, and kernel -> every FX node it
    lists (``provenance.kernel_owners``).
    """
    owners = kernel_owners(rec, graph)
    if owners is None:
        raise ViewerError(f"graph {rec.id} has no kernel provenance (status: {rec.status}); "
                          "the kernel view needs a graph that compiled to code")
    return owners.kernel_of, owners.kind, owners.listed


def diff_graphs(rec: GraphRecord, a: StageInfo, b: StageInfo) -> tuple[Graph, Overlay]:
    """The union of two snapshots with each node's status; removed nodes come from ``a``."""
    sa, sb = snapshot_for(rec, a), snapshot_for(rec, b)
    d = stage_diff(rec, sa, sb, load(rec, sa), load(rec, sb))
    return d.union(), Overlay(status=d.status(), extra_edges=d.removed_edges())


def forward_hints(rec: GraphRecord) -> dict[str, str]:
    """Module paths of a backward graph's saved activations, from its forward graph."""
    if rec.kind != "backward":
        return {}
    for other in rec.trace.graphs:
        if other.kind == "forward" and other.compile_id == rec.compile_id:
            fg = other.final_graph()
            return infer_modules(fg) if fg is not None else {}
    return {}


# -- running Graphviz ---------------------------------------------------------------------------

def attempts(shown: int, total_s: float) -> list[Attempt]:
    """Layout tries within ``total_s`` seconds, by drawn node count: plain dot for small graphs,
    dot with the network simplex cut short (``nslimit``, the one knob that matters at scale),
    cheaper still, and last sfdp (not top-down, but it finishes)."""
    tries = []
    if shown <= 200:
        tries.append(Attempt("dot", [], 0.4))
    if shown <= 1500:
        tries.append(Attempt("dot", FAST_DOT, 0.4))
    tries.append(Attempt("dot", CHEAP_DOT, 0.4))
    tries.append(Attempt("sfdp", ["-Goverlap=prism", "-Gsplines=false"], 0.3))
    share = sum(t.timeout for t in tries)
    for t in tries:
        t.timeout = max(1.0, total_s * t.timeout / share)
    return tries


def run_layout(dot_file: Path, svg: Path, tries: Sequence[Attempt]) -> Rendered:
    """Run the first layout that finishes in time; raise LayoutFailed if none does."""
    if shutil.which("dot") is None:
        raise DotMissing(f"Graphviz's 'dot' is not on PATH; the graph was written as DOT to "
                         f"{dot_file}. To get the SVG, {INSTALL_HINT}, then run: "
                         f"dot -Tsvg {dot_file} -o {svg}", dot_file)
    log: list[str] = []
    for t in tries:
        exe = shutil.which(t.engine)
        if exe is None:
            log.append(f"{t.engine}: not installed")
            continue
        fd, tmp = tempfile.mkstemp(prefix=".tuidebug-", suffix=".svg", dir=svg.parent)
        os.close(fd)
        t0 = time.perf_counter()
        try:
            proc = subprocess.run([exe, "-Tsvg", *t.args, "-o", tmp, str(dot_file)],
                                  capture_output=True, text=True, timeout=t.timeout)
        except subprocess.TimeoutExpired:
            log.append(f"{t.engine} {' '.join(t.args)}: no layout in {t.timeout:.0f}s")
            Path(tmp).unlink(missing_ok=True)
            continue
        dt = time.perf_counter() - t0
        if proc.returncode != 0 or Path(tmp).stat().st_size == 0:
            err = (proc.stderr or "").strip().splitlines()[-1:] or ["no output"]
            log.append(f"{t.engine}: failed ({err[0]})")
            Path(tmp).unlink(missing_ok=True)
            continue
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, svg)
        log.append(f"{t.engine} {' '.join(t.args)}: {dt:.2f}s")
        return Rendered(t.engine, t.args, dt, log)
    raise LayoutFailed("no layout finished in time (" + "; ".join(log) + f"); the DOT is kept in "
                       f"{dot_file}: render it with a longer --timeout, a smaller --depth, or "
                       f"'sfdp -Tsvg {dot_file} -o {svg}'", dot_file)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# -- the entry point ----------------------------------------------------------------------------

def flag_divergence(overlay: Overlay, fd: FirstDivergence) -> None:
    """Draw the first diverging kernel (its cluster or box) and its wrong FX nodes red-filled,
    each with a line under its label: what diverged, by how much against float64."""
    errs = (f"compiled↔fp64 {fd.err_compiled:.3g}, eager↔fp64 {fd.err_eager:.3g}"
            if fd.err_compiled is not None and fd.err_eager is not None else "")
    overlay.flagged[fd.kernel] = f"first diverging kernel {fd.kernel}" + (f": {errs}" if errs else "")
    overlay.flag_label[fd.kernel] = "✗ first diverging kernel" + (f": {errs}" if errs else "")
    for b in fd.buffers:
        overlay.flagged[b.node] = overlay.flagged[fd.kernel]
        overlay.flag_label[b.node] = (f"✗ diverges: {b.err_compiled:.3g} vs eager {b.err_eager:.3g}"
                                      if b.err_compiled is not None and b.err_eager is not None
                                      else "✗ diverges")


def default_out(trace: Trace, rec: GraphRecord, label: str, suffix: str) -> Path:
    # every part is data (a folder's name, a graph id, a stage name): one safe name
    return Path(safefile.safe_name(f"{trace.name}-{rec.id}-{label}{suffix}", limit=200) + ".svg")


def export(trace: Trace | str | os.PathLike[str], graph_id: str | None = None, stage: str | None = None,
           kernels: bool = False, diff: Sequence[str] | bool | None = None, depth: int | None = None,
           out: str | os.PathLike[str] | None = None, *, pass_index: int | None = None,
           budget: int = 400, collapse: bool = True, timeout: float = DEFAULT_TIMEOUT_S,
           keep_dot: bool = False) -> Export:
    """Render one graph to SVG and say how (see ``export_svg``)."""
    t0 = time.perf_counter()
    try:
        tr = trace if isinstance(trace, Trace) else Trace(trace)
    except TraceError as e:
        raise ViewerError(str(e)) from e
    rec = resolve_graph(tr, graph_id)
    if depth is not None and depth < 1:
        raise ViewerError("--depth must be 1 or more")
    overlay = Overlay(module_hints=forward_hints(rec))
    named = [stage] + (list(diff) if diff and diff is not True else [])
    warnings = [w for w in (ambiguous_stage(rec, s) for s in named if pass_index is None) if w]
    if diff:
        if diff is True:
            b = resolve_stage(rec, stage, pass_index)
            snaps = rec.snapshots()
            sb = snapshot_for(rec, b)
            earlier = [s for s in snaps if s.index < sb.index]
            a = earlier[-1] if earlier else sb
            if b.file is None:
                a = sb  # the pass changed nothing: same snapshot on both sides
        else:
            if len(diff) != 2:
                raise ViewerError("--diff takes two stages (or none, with --pass N)")
            a, b = resolve_stage(rec, diff[0]), resolve_stage(rec, diff[1])
        graph, d = diff_graphs(rec, a, b)
        joint = is_joint(rec, snapshot_for(rec, a)) or is_joint(rec, snapshot_for(rec, b))
        overlay.status, overlay.extra_edges = d.status, d.extra_edges
        label = f"diff {stage_label(a)} → {stage_label(b)}"
        if b.file is None:
            label += f" (pass {b.index} {b.name} changed nothing)"
        suffix, name = "-diff", f"{stage_label(a)}_to_{stage_label(b)}"
    else:
        info = resolve_stage(rec, stage, pass_index)
        snap = snapshot_for(rec, info)
        graph = load(rec, snap)
        joint = is_joint(rec, snap)
        if info.file is None:  # a pass that changed nothing: say so, and which graph is drawn
            label = f"pass {info.index} {info.name} (changed nothing; graph as of {stage_label(snap)})"
        elif info.kind == "pass":
            label = f"after pass {info.index} {info.name}"
        else:
            label = f"stage {stage_label(info)}"
        suffix, name = "", stage_label(info)
    if kernels:
        overlay.kernel_of, overlay.kernel_kind, overlay.kernel_nodes = kernel_overlay(rec, graph)
        launches = kernel_launches(rec)  # a repeated call "k:2" launches kernel k
        overlay.kernel_note = {unit: launch_text(launches[unit.split(":")[0]], brief=True)
                               for unit in overlay.kernel_nodes if unit.split(":")[0] in launches}
        suffix += "-kernels"
    for fd in first_divergences(tr):  # the first diverging kernel, and its wrong nodes, in red
        if fd.graph == rec.id:
            flag_divergence(overlay, fd)
    opts = DotOptions(depth=depth, budget=budget, collapse=collapse, split_phases=joint,
                      title=f"{tr.name} · {rec.id} ({rec.kind}) · {label}"
                      + (f"\n{banner}" if (banner := testing_only_banner(
                          testing_only_flags(tr))) else ""))
    result = build_dot(graph, overlay, opts)
    svg = Path(out) if out is not None else default_out(tr, rec, name, suffix)
    svg.parent.mkdir(parents=True, exist_ok=True)
    dot_file = svg.with_suffix(".dot")
    dot_file.write_text(result.dot.source, encoding="utf-8")
    build_s = time.perf_counter() - t0
    try:
        rendered = run_layout(dot_file, svg, attempts(result.shown, timeout))
    except LayoutFailed as e:
        if collapse or result.shown <= budget:
            raise
        raise LayoutFailed(f"{e} — or drop --full: {result.shown} nodes drawn, where the automatic "
                           f"collapse would draw at most {budget}", e.dot_file) from e
    if not keep_dot:
        dot_file.unlink(missing_ok=True)
    return Export(svg, result, rendered, build_s, warnings)


def export_svg(trace: Trace | str | os.PathLike[str], graph_id: str | None = None,
               stage: str | None = None, kernels: bool = False,
               diff: Sequence[str] | bool | None = None, depth: int | None = None,
               out: str | os.PathLike[str] | None = None, **kw) -> Path:
    """Render a captured graph to an SVG file and return its path.

    ``graph_id``: a graph of the trace (default: the first). ``stage``: a stage name, snapshot
    file stem or index (default: the last snapshot); ``pass_index=N`` picks a pass by index.
    ``kernels``: cluster nodes by the kernel that computes them. ``diff``: two stages to compare,
    or True to compare ``stage``/``pass_index`` with the snapshot before it. ``depth``: collapse
    to that many nn.Module levels (default: automatic above ``budget`` nodes; ``collapse=False``
    turns that off). ``timeout``: seconds for all layout attempts. Raises ViewerError (also
    DotMissing and LayoutFailed, which keep the ``.dot`` file) with a message for the user.
    """
    return export(trace, graph_id, stage, kernels, diff, depth, out, **kw).svg
