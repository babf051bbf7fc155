"""SVG export time by node count, with and without collapse.

    python bench/svg_scaling.py                       # synthetic graphs, 100..2000 nodes
    python bench/svg_scaling.py TRACE [TRACE ...]     # and every graph of real traces
    python bench/svg_scaling.py --sizes 100,500 --timeout 30 --no-synthetic TRACE

Synthetic graphs are transformer-like stacks built as tuidebug ``Graph`` objects: blocks of
LayerNorm / attention / MLP ops with module paths, a residual stream, weights as placeholders,
and every block saving activations for the output (the long edges that make ``dot`` slow).
Times are wall-clock seconds: "build" is reading the trace and graph → DOT, "layout" is every
Graphviz attempt together (the engine column says which one finished; "(fallback)" when the
first ran out of its time-box).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tuidebug.trace.graph import Graph, Node  # noqa: E402
from tuidebug.trace.reader import Trace  # noqa: E402
from tuidebug.viewers.dot import DotOptions, Overlay, build_dot  # noqa: E402
from tuidebug.viewers.svg import Attempt, LayoutFailed, attempts, export, run_layout  # noqa: E402

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
            return res.shown, build_s, layout_s, r.engine + (" (fallback)" if len(r.tries) > 1 else "")
        except LayoutFailed:
            return res.shown, build_s, float("nan"), f"gave up after {timeout:.0f}s"


def row(name: str, nodes: int, mode: str, shown: int, build_s: float, layout_s: float, engine: str) -> None:
    total = build_s + layout_s
    print(f"{name:<44} {nodes:>6} {mode:<10} {shown:>6} {build_s:>7.2f} {layout_s:>7.2f} "
          f"{total:>7.2f}  {engine}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", help="trace directories to measure")
    ap.add_argument("--sizes", default="100,250,500,1000,1500,2000")
    ap.add_argument("--timeout", type=float, default=60.0, help="layout time-box per graph")
    ap.add_argument("--no-synthetic", action="store_true")
    ap.add_argument("--joint", action="store_true", help="also the joint graph of each trace")
    ap.add_argument("--raw", action="store_true",
                    help="also plain dot without stubs or collapse (synthetic graphs; slow)")
    ns = ap.parse_args()
    print(f"{'graph':<44} {'nodes':>6} {'mode':<10} {'shown':>6} {'build':>7} {'layout':>7} "
          f"{'total':>7}  engine")
    if not ns.no_synthetic:
        for n in (int(s) for s in ns.sizes.split(",")):
            g = synthetic_graph(n)
            for mode in ("collapse", "full") + (("raw",) if ns.raw else ()):
                row(g.graph_id, len(g), mode, *time_graph(g, mode, ns.timeout))
    for path in ns.traces:
        tr = Trace(path)
        for rec in tr.graphs:
            stages = [None]
            if ns.joint:
                stages += [s.name for s in rec.snapshots() if s.name == "aot_joint"]
            for stage in stages:
                label = f"{tr.name}/{rec.id}" + (f"@{stage}" if stage else "")
                for mode in ("collapse", "full"):
                    with tempfile.TemporaryDirectory() as d:
                        t0 = time.perf_counter()
                        try:
                            e = export(tr, rec.id, stage, out=Path(d) / "g.svg",
                                       collapse=mode == "collapse", timeout=ns.timeout)
                        except LayoutFailed:
                            row(label, 0, mode, 0, 0, float("nan"), f"gave up after {ns.timeout:.0f}s")
                            continue
                        wall = time.perf_counter() - t0
                    engine = e.rendered.engine + (" (fallback)" if len(e.rendered.tries) > 1 else "")
                    row(label, e.dot.total, mode, e.dot.shown, e.build_s, wall - e.build_s, engine)
    return 0


if __name__ == "__main__":
    sys.exit(main())
