"""SVG export time by node count, with and without collapse.

    python bench/svg_scaling.py                       # synthetic graphs, 100..2000 nodes, and real
                                                      # traces of the bundled examples + 24 layers
    python bench/svg_scaling.py --trace-dir ~/.cache/tuidebug-bench   # keep/reuse those traces
    python bench/svg_scaling.py TRACE [TRACE ...]     # every graph of the traces given instead
    python bench/svg_scaling.py --sizes 100,500 --timeout 30 --no-synthetic TRACE
    python bench/svg_scaling.py --quick               # a smoke run: 100 nodes and the mlp example

With no TRACE, the bundled examples and a 24-layer transformer training step
(``examples/transformer_block.py --layers 24``, about 4 minutes on 2 cores) are traced into
``--trace-dir`` (default: a temporary directory, removed afterwards); a trace already there is
reused. Real graphs are measured at their final stage and, for training graphs, at the AOT
joint graph (the biggest), plain and as kernels.

Synthetic graphs are transformer-like stacks built as tuidebug ``Graph`` objects: blocks of
LayerNorm / attention / MLP ops with module paths, a residual stream, weights as placeholders,
and every block saving activations for the output (the long edges that make ``dot`` slow).
Times are wall-clock seconds: "build" is reading the trace and graph → DOT, "layout" is every
Graphviz attempt together (the engine column says which one finished; "(fallback)" when the
first ran out of its time-box). "CPU" (real traces) is the CPU seconds of the whole export, this
process's and ``dot``'s together: on a loaded machine wall time is mostly waiting for a core.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuidebug.machine import load1  # noqa: E402
from tuidebug.trace.format.graph import Graph, Node  # noqa: E402
from tuidebug.trace.format.reader import Trace, TraceError  # noqa: E402
from tuidebug.viewers.dot import DotOptions, Overlay, build_dot  # noqa: E402
from tuidebug.viewers.svg import (INSTALL_HINT, Attempt, DotMissing, LayoutFailed,  # noqa: E402
                                  ViewerError, attempts, export, load, resolve_stage, run_layout,
                                  snapshot_for)

# (trace name, example script, its arguments): what runs when no TRACE is given
REAL = [
    ("mlp", "mlp.py", []), ("conv_net", "conv_net.py", []), ("graph_break", "graph_break.py", []),
    ("reductions", "reductions.py", []), ("failing_compile", "failing_compile.py", []),
    ("transformer_block", "transformer_block.py", []),
    ("transformer_24", "transformer_block.py", ["--layers", "24"]),
]

BLOCK = [  # (name, target, module suffix, inputs as offsets into the block or "w"/"x")
    ("ln1", "aten.native_layer_norm.default", "ln1", ["x", "w"]),
    ("q", "aten.addmm.default", "attn.q_proj", ["ln1", "w"]),
    ("k", "aten.addmm.default", "attn.k_proj", ["ln1", "w"]),
    ("v", "aten.addmm.default", "attn.v_proj", ["ln1", "w"]),
    ("qv", "aten.view.default", "attn", ["q"]),
    ("kv", "aten.view.default", "attn", ["k"]),
    ("s", "aten.bmm.default", "attn", ["qv", "kv"]),
    ("p", "aten._softmax.default", "attn", ["s"]),
    ("a", "aten.bmm.default", "attn", ["p", "v"]),
    ("o", "aten.addmm.default", "attn.out_proj", ["a", "w"]),
    ("r1", "aten.add.Tensor", "", ["x", "o"]),
    ("ln2", "aten.native_layer_norm.default", "ln2", ["r1", "w"]),
    ("f1", "aten.addmm.default", "mlp.fc1", ["ln2", "w"]),
    ("g", "aten.gelu.default", "mlp.act", ["f1"]),
    ("f2", "aten.addmm.default", "mlp.fc2", ["g", "w"]),
    ("x", "aten.add.Tensor", "", ["r1", "f2"]),
]
SAVED = ("ln1", "p", "g")


def synthetic_graph(n_nodes: int, seed: int = 0) -> Graph:
    """A transformer-like forward graph of about ``n_nodes`` nodes."""
    rnd = random.Random(seed)
    meta = {"dtype": "float32", "shape": [8, 128, 256]}
    nodes: dict[str, Node] = {}
    order: list[str] = []

    def add(name: str, op: str, target: str, inputs: list[str], module: str = "") -> None:
        nodes[name] = Node(name, op, target, inputs=inputs, tensor=dict(meta), module=module,
                           module_type=module.rsplit(".", 1)[-1].title() if module else "")
        for i in inputs:
            nodes[i].users.append(name)
        order.append(name)

    add("x_in", "placeholder", "x_in", [])
    x, saved, b = "x_in", [], 0
    per_block = len(BLOCK) + 8  # ops + weights
    while len(order) + per_block + 1 <= n_nodes or b == 0:
        local: dict[str, str] = {"x": x}
        for name, target, mod, ins in BLOCK:
            args = []
            for i in ins:
                if i == "w":
                    w = f"w{b}_{name}"
                    add(w, "placeholder", w, [])
                    args.append(w)
                else:
                    args.append(local[i])
            full = f"{name}_{b}" if name != "x" else f"x_{b}"
            module = f"layers.{b}" + (f".{mod}" if mod else "")
            add(full, "call_function", target, args, module)
            local[name] = full
        saved += [local[s] for s in SAVED]
        x, b = local["x"], b + 1
    while len(order) < n_nodes - 1:  # top up with small ops off the residual stream
        name = f"extra_{len(order)}"
        add(name, "call_function", "aten.mul.Tensor", [rnd.choice(order[-40:])], f"layers.{b - 1}")
    add("output", "output", "output", [x] + saved)
    return Graph([nodes[k] for k in order], f"synthetic-{n_nodes}", "synthetic")


ADAMW = [  # one parameter's update in a compiled AdamW step, as Inductor decomposes foreach ops
    ("decay", "aten.mul.Tensor", ["p", "lr"]), ("p1", "aten.sub.Tensor", ["p", "decay"]),
    ("gm", "aten.sub.Tensor", ["g", "m"]), ("gm1", "aten.mul.Tensor", ["gm"]),
    ("m1", "aten.add.Tensor", ["m", "gm1"]), ("v0", "aten.mul.Tensor", ["v"]),
    ("gg", "aten.mul.Tensor", ["g", "g"]), ("gg1", "aten.mul.Tensor", ["gg"]),
    ("v1", "aten.add.Tensor", ["v0", "gg1"]), ("b1", "aten.pow.Scalar", ["step"]),
    ("c1", "aten.rsub.Scalar", ["b1"]), ("b2", "aten.pow.Scalar", ["step"]),
    ("c2", "aten.rsub.Scalar", ["b2"]), ("lrc", "aten.div.Tensor", ["lr", "c1"]),
    ("sq2", "aten.sqrt.default", ["c2"]), ("vs", "aten.sqrt.default", ["v1"]),
    ("den", "aten.div.Tensor", ["vs", "sq2"]), ("den1", "aten.add.Tensor", ["den"]),
    ("upd", "aten.div.Tensor", ["m1", "den1"]), ("upd1", "aten.mul.Tensor", ["upd", "lrc"]),
    ("p2", "aten.sub.Tensor", ["p1", "upd1"]), ("cp", "aten.copy_.default", ["p", "p2"]),
    ("cm", "aten.copy_.default", ["m", "m1"]), ("cv", "aten.copy_.default", ["v", "v1"]),
]
LAYER_SHAPES = [[128], [128], [128, 128], [128, 128], [128, 128], [128, 128], [128],
                [512, 128], [128, 512], [512], [128]]  # one transformer layer's parameters


def optimizer_graph(layers: int) -> Graph:
    """A compiled AdamW step over a ``layers``-layer model's parameters: no module paths, shared
    ``lr`` and ``step`` inputs, and one independent chain of :data:`ADAMW` per parameter (24
    layers: 7,395 nodes; the 24-layer training step's compiled AdamW graph has 6,790)."""
    nodes: dict[str, Node] = {}

    def add(name: str, op: str, target: str, inputs: list[str], shape: list[int]) -> None:
        nodes[name] = Node(name, op, target, inputs=inputs, tensor={"dtype": "float32", "shape": shape})
        for i in inputs:
            nodes[i].users.append(name)

    add("lr", "placeholder", "lr", [], [])
    add("step", "placeholder", "step", [], [])
    shapes = [s for _ in range(layers) for s in LAYER_SHAPES]
    for i, shape in enumerate(shapes):
        for kind in ("p", "g", "m", "v"):
            add(f"{kind}{i}", "placeholder", f"{kind}{i}", [], shape)
        for name, target, ins in ADAMW:
            add(f"{name}_{i}", "call_function", target,
                [x if x in ("lr", "step") else f"{x}{i}" if x in ("p", "g", "m", "v") else f"{x}_{i}" for x in ins],
                shape)
    add("output", "output", "output", [], [])
    return Graph(list(nodes.values()), f"adamw-{layers}-layers", "synthetic")


def canvas(svg: Path) -> str:
    """The drawing's size in points, ``width×height``, from the SVG's root element."""
    head = svg.read_text(errors="replace")[:2000]
    size = [re.search(rf'{k}="([0-9.]+)pt"', head) for k in ("width", "height")]
    return "×".join(f"{float(m.group(1)):.0f}" if m else "?" for m in size)


RAW = DotOptions(collapse=False, long_span=10 ** 9, max_fanout=10 ** 9, max_fanin=10 ** 9)


def time_graph(graph: Graph, mode: str, timeout: float, overlay: Overlay | None = None):
    """mode: collapse (the default export), full (no collapse), raw (plain dot, no stubs)."""
    t0 = time.perf_counter()
    opts = RAW if mode == "raw" else DotOptions(collapse=mode == "collapse")
    res = build_dot(graph, overlay, opts)
    build_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as d:
        dot_file = Path(d) / "g.dot"
        dot_file.write_text(res.dot.source)
        try:
            tries = [Attempt("dot", [], timeout)] if mode == "raw" else attempts(res.shown, timeout)
            t1 = time.perf_counter()
            r = run_layout(dot_file, Path(d) / "g.svg", tries)
            layout_s = time.perf_counter() - t1  # every attempt, not only the one that finished
            engine = r.engine + (" (fallback)" if len(r.tries) > 1 else "")
            return res.shown, build_s, layout_s, engine, canvas(Path(d) / "g.svg")
        except LayoutFailed:
            return res.shown, build_s, float("nan"), f"gave up after {timeout:.0f}s", "-"


def cpu_now() -> float:
    """CPU seconds of this process and of its finished children (``dot``): the cost of an
    export whatever the machine's load (wall time on a loaded machine is mostly waiting)."""
    import resource

    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + ch.ru_utime + ch.ru_stime


def row(name: str, nodes: int, mode: str, shown: int | str, build_s: float, layout_s: float,
        engine: str, size: str = "-", cpu_s: float | None = None) -> None:
    total = build_s + layout_s
    cpu = f"{cpu_s:>6.2f}" if cpu_s is not None else f"{'-':>6}"
    print(f"{name:<44} {nodes:>6} {mode:<10} {shown:>6} {build_s:>7.2f} {layout_s:>7.2f} "
          f"{total:>7.2f} {cpu} {size:>13}  {engine}", flush=True)


def build_traces(trace_dir: Path, which: list[tuple[str, str, list[str]]]) -> list[Path]:
    """Trace the bundled examples into ``trace_dir`` (a trace already there is reused)."""
    out = []
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for name, script, args in which:
        path = trace_dir / name
        if not (path / "manifest.json").exists():
            print(f"# tracing examples/{script} {' '.join(args)} -> {path}", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            shutil.rmtree(path, ignore_errors=True)
            proc = subprocess.run([sys.executable, "-m", "tuidebug.cli", "trace", "-o", str(path),
                                   str(ROOT / "examples" / script), *args], env=env,
                                  capture_output=True, text=True)
            print(f"#   rc={proc.returncode} in {time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
            if not (path / "manifest.json").exists():
                print(f"#   no trace written: {(proc.stderr or proc.stdout).strip()[-300:]}",
                      file=sys.stderr, flush=True)
                continue
        out.append(path)
    return out


def graph_size(rec, stage: str | None) -> int:
    """Node count of the graph an export of ``stage`` draws (for rows where layout failed)."""
    try:
        return len(load(rec, snapshot_for(rec, resolve_stage(rec, stage))))
    except ViewerError:
        return 0


def time_trace(path: str | Path, ns: argparse.Namespace) -> None:
    """Every graph of a trace: final stage (collapsed and full), the joint graph of a training
    graph, and the kernel view."""
    try:
        tr = Trace(path)
    except TraceError as e:
        print(f"# {path}: {e}", file=sys.stderr)
        return
    for rec in tr.graphs:
        stages: list[str | None] = [None]
        if ns.joint and rec.kind == "forward":  # a training graph: its joint graph is the biggest
            stages += [s.name for s in rec.snapshots() if s.name == "aot_joint"]
        views = [(stage, mode, False) for stage in stages for mode in ("collapse", "full")]
        views.append((None, "kernels", True))
        for stage, mode, kernels in views:
            label = f"{tr.name}/{rec.id}" + (f"@{stage}" if stage else "")
            with tempfile.TemporaryDirectory() as d:
                t0, c0 = time.perf_counter(), cpu_now()
                try:
                    e = export(tr, rec.id, stage, kernels=kernels, out=Path(d) / "g.svg",
                               collapse=mode != "full", timeout=ns.timeout)
                except LayoutFailed:
                    n = graph_size(rec, stage)
                    row(label, n, mode, "?", 0, time.perf_counter() - t0,
                        f"gave up after {ns.timeout:.0f}s")
                    continue
                except DotMissing:
                    raise
                except ViewerError as err:  # no kernels in a failed compile, say
                    row(label, graph_size(rec, stage), mode, "-", 0, 0, f"skipped: {str(err)[:60]}")
                    continue
                wall, cpu = time.perf_counter() - t0, cpu_now() - c0
                size = canvas(e.svg)
            engine = e.rendered.engine + (" (fallback)" if len(e.rendered.tries) > 1 else "")
            row(label, e.dot.total, mode, e.dot.shown, e.build_s, wall - e.build_s, engine, size,
                cpu)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", help="trace directories to measure")
    ap.add_argument("--sizes", default="100,250,500,1000,1500,2000")
    ap.add_argument("--timeout", type=float, default=60.0, help="layout time-box per graph")
    ap.add_argument("--no-synthetic", action="store_true")
    ap.add_argument("--optimizer", type=int, default=24, metavar="LAYERS",
                    help="also a synthetic AdamW step over this many layers' parameters (0: none)")
    ap.add_argument("--joint", action=argparse.BooleanOptionalAction, default=True,
                    help="also the AOT joint graph of each training graph (default: on)")
    ap.add_argument("--raw", action="store_true",
                    help="also plain dot without stubs or collapse (synthetic graphs; slow)")
    ap.add_argument("--trace-dir", metavar="DIR",
                    help="with no TRACE: build the example traces here, or reuse those already "
                         "here (default: a temporary directory, removed afterwards)")
    ap.add_argument("--no-real", action="store_true", help="with no TRACE: synthetic graphs only")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: one 100-node synthetic graph and the mlp example")
    ns = ap.parse_args()
    if shutil.which("dot") is None:
        print(f"Graphviz's 'dot' is not on PATH: {INSTALL_HINT}", file=sys.stderr)
        return 2
    if ns.quick:
        ns.sizes = "100"
    print(f"{'graph':<44} {'nodes':>6} {'mode':<10} {'shown':>6} {'build':>7} {'layout':>7} "
          f"{'total':>7} {'CPU':>6} {'canvas (pt)':>13}  engine")
    print(f"# load average {load1():.2f}")
    try:
        if not ns.no_synthetic:
            for n in (int(s) for s in ns.sizes.split(",")):
                g = synthetic_graph(n)
                for mode in ("collapse", "full") + (("raw",) if ns.raw else ()):
                    row(g.graph_id, len(g), mode, *time_graph(g, mode, ns.timeout))
        if ns.optimizer:  # a graph without module paths: its alike per-parameter chains drawn once
            g = optimizer_graph(ns.optimizer)
            row(g.graph_id, len(g), "collapse", *time_graph(g, "collapse", ns.timeout))
        if ns.traces:
            for path in ns.traces:
                time_trace(path, ns)
        elif not ns.no_real:
            which = [r for r in REAL if r[0] == "mlp"] if ns.quick else REAL
            keep = ns.trace_dir is not None
            trace_dir = Path(ns.trace_dir) if keep else Path(tempfile.mkdtemp(prefix="svg-bench-"))
            trace_dir.mkdir(parents=True, exist_ok=True)
            try:
                for path in build_traces(trace_dir, which):
                    time_trace(path, ns)
            finally:
                if not keep:
                    shutil.rmtree(trace_dir, ignore_errors=True)
    except DotMissing as e:
        print(str(e), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
