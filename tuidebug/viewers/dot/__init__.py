"""A captured FX graph as Graphviz DOT: styling, module/kernel collapse and long-edge stubs.

Pure data in, ``graphviz.Digraph`` out: no trace files, no subprocesses (``svg.py`` does those).
Layout cost in ``dot`` follows long edges, so before anything is emitted the graph is reduced:

- nodes can be collapsed into one box per nn.Module (``depth`` levels of the module path; over
  ``budget``, just enough modules, deepest and largest first) or per generated kernel; a box
  never mixes forward with backward, nor a diff's added, removed, changed and untouched nodes;
- a diff over the budget draws its changes with 2, 1 or 0 hops of context, whichever fits;
- an edge spanning more than ``long_span`` ranks (saved activations, weights used far away, the
  many inputs of the output node) is replaced by labelled stubs at both ends;
- the forward and backward halves of a joint graph go in clusters of their own, linked by stubs.
"""

from __future__ import annotations

from tuidebug.viewers.dot.builder import build_dot
from tuidebug.viewers.dot.collapse import (absorb_into_kernels, backward_nodes, infer_modules,
                                          looks_joint, module_levels, plan_collapse,
                                          truncate_module, users_of)
from tuidebug.viewers.dot.labels import group_label, node_label, node_tooltip, target_text
from tuidebug.viewers.dot.options import DotOptions, DotResult, Overlay
from tuidebug.viewers.dot.style import (CLUSTER_STYLE, DIFF_STYLE, FONT, KIND_STYLE, STUB_EDGE,
                                       STUB_NAMES, STUB_STYLE, legend_label, node_kind)

__all__ = ["CLUSTER_STYLE", "DIFF_STYLE", "FONT", "KIND_STYLE", "STUB_EDGE", "STUB_NAMES",
           "STUB_STYLE", "DotOptions", "DotResult", "Overlay", "absorb_into_kernels",
           "backward_nodes", "build_dot", "group_label", "infer_modules", "legend_label",
           "looks_joint", "module_levels", "node_kind", "node_label", "node_tooltip",
           "plan_collapse", "target_text", "truncate_module", "users_of"]
