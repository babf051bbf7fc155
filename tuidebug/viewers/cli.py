"""``tuidebug svg``: export a captured graph as SVG (registered by ``tuidebug.cli``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "svg", help="export a captured graph as SVG (Graphviz)",
        description="Render a captured FX graph as SVG with Graphviz's dot. Graphs over the node "
                    "budget are collapsed by nn.Module automatically; long edges become stubs.")
    p.add_argument("trace", help="trace directory")
    p.add_argument("--graph", metavar="ID", help="graph id (default: the first; see tuidebug info)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--stage", metavar="NAME",
                       help="stage name, snapshot file stem or index (default: the last snapshot)")
    which.add_argument("--pass", dest="pass_index", metavar="N", type=int,
                       help="the graph after pass N (an index from the pass list)")
    p.add_argument("--kernels", action="store_true",
                   help="post-fusion view: one cluster per generated kernel around its FX nodes")
    p.add_argument("--diff", nargs="*", metavar="STAGE",
                   help="what changed: --diff STAGE_A STAGE_B, or --pass N --diff for one pass")
    p.add_argument("--depth", type=int, metavar="N",
                   help="collapse nodes into their nn.Module, keeping N levels of the module path")
    p.add_argument("--budget", type=int, default=400, metavar="N",
                   help="above this many nodes, collapse automatically (default: 400)")
    p.add_argument("--full", action="store_true", help="never collapse automatically (slow when big)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="S",
                   help="seconds for all layout attempts together (default: 60)")
    p.add_argument("--keep-dot", action="store_true", help="keep the .dot file beside the SVG")
    p.add_argument("-o", "--output", metavar="FILE", help="SVG file (default: <trace>-<graph>-<stage>.svg)")
    p.set_defaults(fn=cmd_svg)


def cmd_svg(ns: argparse.Namespace) -> int:
    from tuidebug.trace.reader import Trace, TraceError
    from tuidebug.viewers.svg import ViewerError, export

    from tuidebug.cli import CliError
    diff: list[str] | bool | None = None
    if ns.diff is not None:
        if len(ns.diff) == 2:
            diff = list(ns.diff)
        elif not ns.diff and (ns.pass_index is not None or ns.stage is not None):
            diff = True
        else:
            raise CliError("--diff takes two stages (--diff STAGE_A STAGE_B), or none with "
                           "--pass N / --stage NAME to compare it with the snapshot before")
        if ns.stage is not None and diff is not True:
            raise CliError("--stage and --diff STAGE_A STAGE_B cannot be combined")
    try:
        trace = Trace(ns.trace)
        e = export(trace, ns.graph, ns.stage, ns.kernels, diff, ns.depth, ns.output,
                   pass_index=ns.pass_index, budget=ns.budget, collapse=not ns.full,
                   timeout=ns.timeout, keep_dot=ns.keep_dot)
    except (TraceError, ViewerError) as err:
        raise CliError(str(err)) from err
    for w in e.warnings:
        print(f"warning: {w}", file=sys.stderr)
    d = e.dot
    what = f"{d.total} nodes" + (f", {d.shown} shown" if d.shown != d.total else "")
    notes = "; ".join(d.notes)
    print(f"wrote {e.svg} ({what}{'; ' + notes if notes else ''}; "
          f"{e.rendered.engine} {e.rendered.seconds:.2f}s)")
    if len(e.rendered.tries) > 1:
        print("layout: " + "; ".join(e.rendered.tries), file=sys.stderr)
    return 0
