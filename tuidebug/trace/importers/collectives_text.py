"""The collectives of an imported graph (``collectives.json``), from what a TORCH_TRACE log holds:
the post-grad graph as printed text (kept as text or parsed into a snapshot by ``fxtext``) and
the output code (already split into kernels, ``code/kernels.json``, and ``code/wrapper.py``).
Pure text; no torch.

Each ``torch.ops._c10d_functional.*`` node of the post-grad snapshot (and ``c10d.*``,
``_c10d_functional_autograd.*``) becomes an entry of the same shape the capture writes
(``tuidebug/compiler/capture/collectives.py``): its positional arguments are named by the op's
schema (below: the functional collectives' schemas, stable since torch 2.3), its tensor meta is
the annotations of its input and output nodes, its ``source`` the ``# File:`` comment above it.
Program order (``index``) is the order the wrapper calls the ops: each call of the output code is
matched to a node by provenance where the log has it, a wait by the buffer it waits on, else by
op and scalar arguments in graph order (two collectives with the same op and arguments that the
scheduler swapped cannot be told apart: they are compared alike).

What a log does not hold: a process group's ranks and backend (the graph names the group only;
``group_ranks`` is null, ``groups`` gives the size where an argument says it), and the user's
line when torch's own code issued the collective (a printed node carries its innermost frame;
a log with provenance, ``INDUCTOR_PROVENANCE=1``, has the call's whole stack: its user frame is
taken from there).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from tuidebug.trace.format import compressed, fxtext, layout
from tuidebug.trace.format import safefile
from tuidebug.trace.format.graph_meta import StageEntry
from tuidebug.trace.format.kernel_entry import KernelEntry

NAMESPACES = ("_c10d_functional", "c10d", "_c10d_functional_autograd")
WAIT = "wait_tensor"
# positional argument names per op (torch/csrc/distributed/c10d/Functional.cpp)
_REDUCE = ("input", "reduce_op", "group_name")
_GATHER = ("input", "group_size", "group_name")
_SCATTER = ("input", "reduce_op", "group_size", "group_name")
SCHEMAS: dict[str, tuple[str, ...]] = {
    "all_reduce": _REDUCE, "all_reduce_": _REDUCE,
    "all_reduce_coalesced": ("inputs", "reduce_op", "group_name"),
    "all_reduce_coalesced_": ("inputs", "reduce_op", "group_name"),
    "all_gather_into_tensor": _GATHER, "all_gather_into_tensor_out": _GATHER,
    "all_gather_into_tensor_coalesced": ("inputs", "group_size", "group_name"),
    "reduce_scatter_tensor": _SCATTER, "reduce_scatter_tensor_out": _SCATTER,
    "reduce_scatter_tensor_coalesced": ("inputs", "reduce_op", "group_size", "group_name"),
    "all_to_all_single": ("input", "output_split_sizes", "input_split_sizes", "group_name"),
    "broadcast": ("input", "src", "group_name"), "broadcast_": ("input", "src", "group_name"),
    WAIT: ("tensor",),
}
_TENSOR_ARGS = ("input", "inputs", "tensor", "tensors", "out", "output")
_GROUP_ARGS = ("group_name", "process_group", "group")
_ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
             "int16": 2, "int8": 1, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1,
             "complex32": 4, "complex64": 8, "complex128": 16, "float8_e4m3fn": 1,
             "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
             "float8_e8m0fnu": 1}
# a frame in torch's own files (a checkout or an installed torch) is not the user's line
_TORCH_FILE = re.compile(r"(^|[/\\])torch[/\\]")
_MAX_COLLECTIVES = 20000
# what the import's "missing" says when a graph has collectives
MISSING = ("process groups' ranks and backend (a log names each group only: collectives on a group "
           "that only one of two ranks uses are not compared), and the user's line of a "
           "collective issued through torch's own code")


def op_of(target: Any) -> tuple[str, str] | None:
    """``"_c10d_functional.all_reduce_.default"`` -> ``("_c10d_functional", "all_reduce_")``;
    None for any other target."""
    if not isinstance(target, str):
        return None
    t = target[len("torch.ops."):] if target.startswith("torch.ops.") else target
    parts = t.split(".")
    if len(parts) < 2 or parts[0] not in NAMESPACES or not parts[1]:
        return None
    return parts[0], parts[1]


def _plain(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict) and isinstance(value.get("node"), str):
        return {"node": value["node"]}
    return str(value)[:200]


def _metas(node: dict[str, Any] | None) -> list[dict[str, Any] | None]:
    if not isinstance(node, dict):
        return [None]
    t = node.get("tensor")
    if isinstance(t, dict):
        return [] if str(t.get("dtype", "")).startswith("sym") else [dict(t)]
    ts = node.get("tensors")
    if isinstance(ts, list):
        return [dict(x) if isinstance(x, dict) else None for x in ts]
    return [None]


def _bytes(metas: list[dict[str, Any] | None]) -> int | None:
    total = 0
    for m in metas:
        size = _ITEMSIZE.get(str((m or {}).get("dtype")))
        shape = (m or {}).get("shape")
        if size is None or not isinstance(shape, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) for d in shape):
            return None
        n = 1
        for d in shape:
            n *= d
        total += n * size
    return total


def _source(node: dict[str, Any]) -> dict[str, Any] | None:
    src = node.get("source")
    if not isinstance(src, dict) or not isinstance(src.get("line"), int):
        return None
    return {k: src.get(k) for k in ("file", "line", "fn", "code")}


def _user(src: dict[str, Any] | None) -> dict[str, Any] | None:
    if src is None or _TORCH_FILE.search(str(src.get("file") or "")):
        return None
    return src


def graph_collectives(nodes: list[Any]) -> list[dict[str, Any]]:
    """Every collective (and wait) of a post-grad snapshot's ``nodes``, in graph order, with the
    fields the capture records (no ``group_ranks``: a log does not say them)."""
    by_name = {n.get("name"): n for n in nodes if isinstance(n, dict)}
    out: list[dict[str, Any]] = []
    for position, n in enumerate(nodes):
        if not isinstance(n, dict) or n.get("op") != "call_function":
            continue
        name = op_of(n.get("target"))
        if name is None or not isinstance(n.get("name"), str):
            continue
        args = n.get("args") if isinstance(n.get("args"), list) else []
        kwargs = n.get("kwargs") if isinstance(n.get("kwargs"), dict) else {}
        schema = SCHEMAS.get(name[1]) if name[0] != "c10d" else None
        bound: dict[str, Any] = {}
        for i, v in enumerate(args):
            bound[schema[i] if schema and i < len(schema) else f"arg{i}"] = v
        bound.update({str(k): v for k, v in kwargs.items()})
        group = next((bound[k] for k in _GROUP_ARGS if k in bound), None)
        inputs = [x for x in (n.get("inputs") or []) if isinstance(x, str)]
        ins = [m for x in inputs for m in _metas(by_name.get(x))]
        src = _source(n)
        rec: dict[str, Any] = {
            "position": position, "node": n["name"], "namespace": name[0], "op": name[1],
            "target": str(n.get("target"))[len("torch.ops."):] if str(n.get("target")).startswith(
                "torch.ops.") else str(n.get("target")),
            "group": None if group is None or isinstance(group, dict) else str(group)[:200],
            "args": {k: _plain(v) for k, v in bound.items()
                     if k not in _GROUP_ARGS and k not in _TENSOR_ARGS
                     and not (isinstance(v, dict) and "node" in v)},
            "inputs": ins, "outputs": _metas(n), "bytes": _bytes(ins), "group_ranks": None,
            "source": src, "user_source": _user(src)}
        if name[1] == WAIT:
            rec["waits_for"] = inputs[0] if inputs else None
        out.append(rec)
        if len(out) >= _MAX_COLLECTIVES:
            break
    return out


def _call(line: str) -> tuple[str | None, list[Any]] | None:
    """A wrapper line calling an op: (the name it assigns, its positional arguments: a buffer as
    ``("buf", name)``, a constant as itself, anything else as None). Parsed, never run."""
    try:
        tree = ast.parse(line.strip())
    except (SyntaxError, ValueError, RecursionError):
        return None
    if len(tree.body) != 1:
        return None
    st = tree.body[0]
    target = None
    if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
        target, value = st.targets[0].id, st.value
    elif isinstance(st, ast.Expr):
        value = st.value
    else:
        return None
    if not isinstance(value, ast.Call):
        return None
    return target, [_arg(a) for a in value.args]


def _arg(a: ast.expr) -> Any:
    if isinstance(a, ast.Subscript):
        a = a.value
    if isinstance(a, ast.Name):
        return ("buf", a.id)
    try:
        v = ast.literal_eval(a)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None
    return list(v) if isinstance(v, tuple) else v


def _fits(c: dict[str, Any], call: list[Any] | None, fx_args: list[Any]) -> bool:
    """Whether a wrapper call's constant arguments are the node's."""
    if call is None:
        return True
    for x, y in zip(fx_args, call):
        if isinstance(y, tuple) or y is None or (isinstance(x, dict) and "node" in x):
            continue
        if isinstance(x, (str, int, float, bool)) and x != y:
            return False
    return True


def program_order(fx: list[dict[str, Any]], nodes: list[Any], kernels: list[KernelEntry],
                  handles: dict[str, Any], wrapper: list[str]) -> list[str]:
    """The FX nodes of ``fx`` in the order the wrapper calls them (each matched call's entry gets
    ``kernel`` and ``wrapper_line``); nodes the wrapper does not call are left out."""
    by_node = {c["node"]: c for c in fx}
    fx_args = {n.get("name"): n.get("args") if isinstance(n.get("args"), list) else []
               for n in nodes if isinstance(n, dict) and n.get("name") in by_node}
    calls = [k for k in kernels if k.extern and op_of(k.call) is not None
             and k.wrapper_line is not None]
    issued: list[str] = []
    bound: dict[str, str] = {}  # wrapper buffer -> the collective last issued on it
    for k in sorted(calls, key=lambda k: k.wrapper_line or 0):
        op = op_of(k.call)[1]  # type: ignore[index]
        line = k.wrapper_line or 0
        parsed = _call(wrapper[line - 1]) if 0 < line <= len(wrapper) else None
        args = parsed[1] if parsed else None
        free = [c for c in fx if c["op"] == op and c["node"] not in issued]
        named = [x for h in k.handles for x in ((handles.get(h) or {}).get("fx_nodes") or [])]
        named += k.source_nodes
        node = next((c["node"] for c in free if c["node"] in named), None)
        if node is None and op == WAIT and args and isinstance(args[0], tuple):
            on = bound.get(args[0][1])
            node = next((c["node"] for c in free if on and c.get("waits_for") == on), None)
        if node is None:
            node = next((c["node"] for c in free if _fits(c, args, fx_args.get(c["node"], []))),
                        None)
        if node is None:
            continue
        issued.append(node)
        by_node[node].update(kernel=k.name, wrapper_line=line)
        if by_node[node]["user_source"] is None:
            by_node[node]["user_source"] = _user_frame(k, handles)
        if op != WAIT and parsed:
            buf = parsed[0] or next((a[1] for a in parsed[1] if isinstance(a, tuple)), None)
            if buf:
                bound[buf] = node
    return issued


def _user_frame(kernel: KernelEntry, handles: dict[str, Any]) -> dict[str, Any] | None:
    """The user's line of an extern call from the stack traces the log gives its provenance
    handle (``inductor_provenance_tracking_kernel_stack_traces``): the innermost frame outside
    torch's files."""
    for h in kernel.handles:
        traces = handles.get(h) or {}
        for st in traces.get("stack_traces") or []:
            if not isinstance(st, str):
                continue
            frames = [f for f in layout.stack_frames(st[:100_000], {})
                      if not _TORCH_FILE.search(str(f.get("file") or ""))]
            if frames:
                return {k: frames[-1].get(k) for k in ("file", "line", "fn", "code")}
    return None


def collectives_json(graph_id: str, rank: Any, nodes: list[Any], kernels: list[KernelEntry],
                     handles: dict[str, Any], wrapper: list[str]) -> dict[str, Any] | None:
    """``collectives.json`` of an imported graph, None when it issues no collective."""
    fx = graph_collectives(nodes)
    if not fx:
        return None
    issued = program_order(fx, nodes, kernels, handles, wrapper)
    order = issued + [c["node"] for c in fx if c["node"] not in issued]
    by_node = {c["node"]: c for c in fx}
    entries = [{"index": i, "fx_index": fx.index(by_node[n]), **by_node[n]}
               for i, n in enumerate(order)]
    groups: dict[str, Any] = {}
    for c in fx:
        if c["group"] is not None:
            g = groups.setdefault(c["group"], {"name": c["group"], "ranks": None, "size": None,
                                               "backend": None, "desc": None})
            size = c["args"].get("group_size")
            if isinstance(size, int) and not isinstance(size, bool):
                g["size"] = size

    def issuing(names: list[str]) -> list[str]:
        return [n for n in names if "waits_for" not in by_node[n]]

    return {"graph": graph_id, "rank": rank if isinstance(rank, int) else None,
            "groups": groups, "collectives": entries,
            "reordered": issuing(order) != issuing([c["node"] for c in fx]),
            "issued_by_wrapper": bool(issued), "imported": True}


def from_graph_dir(graph_dir: Path, graph_id: str, rank: Any, stages: list[StageEntry],
                   kernels: list[KernelEntry], handles: dict[str, Any]) -> dict[str, Any] | None:
    """``collectives.json`` of an imported graph from the files its import wrote: its last
    post-grad snapshot and its output code."""
    post = [s for s in stages if s.get("name") == "post_grad" and s.get("file")]
    if not post:
        return None
    try:
        raw = compressed.read_bytes(graph_dir / str(post[-1]["file"]), safefile.MAX_JSON_BYTES)
    except (OSError, ValueError):
        return None
    if b"c10d" not in raw:  # no collective: the snapshot (maybe large) is not parsed
        return None
    if layout.is_fx_text(str(post[-1]["file"])):  # kept as the log printed it
        snap: Any = fxtext.parse_graph(raw.decode("utf-8", "replace")).to_json()
    else:
        try:
            snap = safefile.loads(raw)
        except ValueError:
            return None
    nodes = snap.get("nodes") if isinstance(snap, dict) else None
    if not isinstance(nodes, list) or not any(
            isinstance(n, dict) and op_of(n.get("target")) for n in nodes):
        return None
    try:
        wrapper = safefile.read_text(graph_dir / "code" / "wrapper.py").split("\n")
    except (OSError, safefile.Refused):
        wrapper = []
    return collectives_json(graph_id, rank, nodes, kernels, handles, wrapper)
