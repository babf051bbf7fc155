"""How a drawn graph looks: node, diff, cluster and stub styles, and the legend."""

from __future__ import annotations

from typing import Iterable

from tuidebug.trace.format.graph import Node
from tuidebug.viewers.dot.labels import esc
from tuidebug.viewers.dotescape import html_label

FONT = "Helvetica"
STUB_NAMES = 3  # names listed on a stub before "+N more"

# fill, border, font colour; one entry per node kind or diff status.
KIND_STYLE: dict[str, dict[str, str]] = {
    "compute": {"shape": "box", "style": "rounded,filled", "fillcolor": "#dce9f7", "color": "#5b7fa8"},
    "placeholder": {"shape": "invhouse", "style": "filled", "fillcolor": "#d5f0d2", "color": "#4b8a45"},
    "output": {"shape": "house", "style": "filled", "fillcolor": "#fde0ae", "color": "#b7791f"},
    "get_attr": {"shape": "cylinder", "style": "filled", "fillcolor": "#f1e8c8", "color": "#8f7a32"},
    "view": {"shape": "box", "style": "rounded,dashed,filled", "fillcolor": "#f3f3f3", "color": "#888888"},
    "inplace": {"shape": "box", "style": "filled,bold", "fillcolor": "#fbd5d5", "color": "#c0392b",
                "penwidth": "2"},
    "module": {"shape": "box3d", "style": "filled", "fillcolor": "#e9e1f7", "color": "#6c4fa3",
               "margin": "0.12,0.07"},
    "kernel": {"shape": "component", "style": "filled", "fillcolor": "#d7ecff", "color": "#1f5fa8"},
    "extern": {"shape": "component", "style": "filled", "fillcolor": "#ffe8cc", "color": "#c2620c"},
}
DIFF_STYLE: dict[str, dict[str, str]] = {
    "added": {"fillcolor": "#b9f3b0", "color": "#2e9e44", "fontcolor": "#000000"},
    "removed": {"fillcolor": "#ffc4c4", "color": "#c62828", "fontcolor": "#000000"},
    "changed": {"fillcolor": "#ffe49a", "color": "#c79100", "fontcolor": "#000000"},
    "same": {"fillcolor": "#f4f4f4", "color": "#c8c8c8", "fontcolor": "#9a9a9a"},
}
CLUSTER_STYLE: dict[str, dict[str, str]] = {
    "kernel": {"style": "rounded,filled", "fillcolor": "#f0f7ff", "color": "#1f5fa8", "fontcolor": "#1f5fa8"},
    "extern": {"style": "rounded,dashed,filled", "fillcolor": "#fff6eb", "color": "#c2620c",
               "fontcolor": "#c2620c"},
    "phase": {"style": "rounded", "color": "#999999", "fontcolor": "#555555", "fontsize": "16"},
    "module": {"style": "rounded,dotted", "color": "#8c7bb5", "fontcolor": "#6c4fa3"},
}
# the first diverging kernel and its wrong nodes (the numerics check): a red fill and border
FLAGGED_STYLE = {"color": "#d00000", "fontcolor": "#8b0000", "penwidth": "3", "fillcolor": "#ffcccc"}
STUB_STYLE = {"shape": "plain", "fontsize": "8", "fontcolor": "#666666"}
STUB_EDGE = {"style": "dashed", "color": "#aaaaaa", "arrowsize": "0.4"}


# -- node classification ----------------------------------------------------------------------

def node_kind(n: Node) -> str:
    if n.op in ("placeholder", "output", "get_attr"):
        return n.op
    if n.is_inplace:
        return "inplace"
    if n.is_view:
        return "view"
    return "compute"


# -- legend -----------------------------------------------------------------------------------

def _legend_row(text: str, fill: str, border: str, note: str = "") -> str:
    return (f'<TR><TD BGCOLOR="{fill}" COLOR="{border}" BORDER="1" WIDTH="22"> </TD>'
            f'<TD ALIGN="LEFT">{esc(text)}</TD>'
            f'<TD ALIGN="LEFT"><FONT COLOR="#666666" POINT-SIZE="8">{esc(note)}</FONT></TD></TR>')


def legend_label(kinds: Iterable[str], *, diff: bool, kernels: bool | Iterable[str],
                 stubs: bool, flagged: bool = False) -> str:
    """The legend table; ``kernels``: the kernel styles drawn ("kernel", "extern"), or True;
    ``flagged``: the first diverging kernel is drawn."""
    notes = {
        "placeholder": "graph input (inverted house)", "output": "graph output (house)",
        "get_attr": "attribute read (cylinder)", "compute": "operator (rounded box)",
        "view": "view / reshape (dashed)", "inplace": "in-place op (bold red border)",
        "module": "collapsed nn.Module (node count)",
        "alike": "that node of N alike chains (an optimizer's parameters), drawn once",
    }
    rows = ['<TR><TD COLSPAN="3"><B>legend</B></TD></TR>']
    for k in ("placeholder", "output", "compute", "view", "inplace", "get_attr", "module", "alike"):
        if k in kinds:
            s = KIND_STYLE["compute" if k == "alike" else k]
            label = {"inplace": "in-place", "module": "module box", "alike": "×N (double)"}.get(k, k)
            rows.append(_legend_row(label, s["fillcolor"], s["color"], notes[k]))
    drawn = {"kernel", "extern"} if kernels is True else set(kernels or ())  # styles drawn
    if "kernel" in drawn:
        rows.append(_legend_row("generated kernel", CLUSTER_STYLE["kernel"]["fillcolor"],
                                CLUSTER_STYLE["kernel"]["color"], "cluster / box named after the kernel"))
    if "extern" in drawn:
        rows.append(_legend_row("extern call", CLUSTER_STYLE["extern"]["fillcolor"],
                                CLUSTER_STYLE["extern"]["color"], "extern_kernels.mm / addmm / …"))
    if diff:
        for st, note in (("added", "added by the pass"), ("removed", "removed (from the earlier graph)"),
                         ("changed", "changed"), ("same", "untouched context")):
            rows.append(_legend_row(st, DIFF_STYLE[st]["fillcolor"], DIFF_STYLE[st]["color"], note))
    if flagged:
        rows.append(_legend_row("first diverging", FLAGGED_STYLE["fillcolor"],
                                FLAGGED_STYLE["color"], "kernel (and its wrong nodes) whose output "
                                "departs from float64 by more than eager's"))
    if stubs:
        rows.append('<TR><TD><FONT POINT-SIZE="8" COLOR="#666666">⇢ a, b</FONT></TD>'
                    '<TD ALIGN="LEFT">stub</TD><TD ALIGN="LEFT"><FONT COLOR="#666666" POINT-SIZE="8">'
                    'long edge cut: value comes from / goes to the named nodes</FONT></TD></TR>')
    return html_label('<TABLE BORDER="1" CELLBORDER="0" CELLSPACING="2" CELLPADDING="2" '
                      'COLOR="#bbbbbb">' + "".join(rows) + "</TABLE>")
