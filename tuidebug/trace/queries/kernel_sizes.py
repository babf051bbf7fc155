"""Which kernels are specialized to their sizes and which take symbolic ones: a kernel compiled
under dynamic shapes takes each symbolic size as a parameter (``ks0``, ``xnumel``, ``r0_numel``)
that the wrapper fills with an expression of the compile's symbols (``s77``, ``4*s77``, ``u0``).
Read from the kernel's code and its call in the wrapper; no torch."""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from tuidebug.trace.format.kernel_entry import KernelEntry
from tuidebug.trace.format.kernels import split_args
from tuidebug.trace.format.reader import GraphRecord

_SYMBOL = re.compile(r"\b[su][0-9]+\b")  # a compile's symbols as the wrapper names them
_KERNEL_SYMBOL = re.compile(r"\bks[0-9]+\b")  # a symbolic size as the kernel names it
MAX_CALL = 64 * 1024  # characters of one kernel call's arguments read from the wrapper
# a Triton kernel's element counts: a constant or a symbol, as its call says
_PAREN = re.compile(r"[()]")
_NUMEL_PARAM = re.compile(r"^(?:[xyz]|r\d*_?)numel$")
_CPP_SIGNATURE = re.compile(r"\bkernel\(([^)]*)\)")
_PY_SIGNATURE = re.compile(r"^def \w+\(([^)]*)\)", re.M)
_ASSIGN = re.compile(r"^\s*(?P<name>\w+) = (?P<expr>[^=\n][^\n]*)$", re.M)
_CALL = re.compile(r"^\s*(?:\w+(?:,\s*\w+)* = )?(?P<fn>[A-Za-z_]\w*)(?:\.run)?\(", re.M)


class _WrapperIndex:
    """What :func:`symbolic_sizes` reads from a wrapper, found in one pass each (not once per
    kernel: a wrapper of 2,000 kernels took two minutes): where each function is first called,
    and every ``name = expr`` assignment."""

    def __init__(self, wrapper: str) -> None:
        self.wrapper = wrapper
        self.first_call: dict[str, int] = {}
        for m in _CALL.finditer(wrapper):
            self.first_call.setdefault(m["fn"], m.end())
        self.assigned = {m["name"]: m["expr"].strip() for m in _ASSIGN.finditer(wrapper)}


@lru_cache(maxsize=4)
def _index(wrapper: str) -> _WrapperIndex:
    return _WrapperIndex(wrapper)


def kernel_params(source: str, kind: str | None) -> list[str]:
    """The kernel's parameter names, in order (C++: its ``kernel(...)``; Triton and other
    Python kernels: its ``def``); [] when the signature is not found."""
    m = (_CPP_SIGNATURE if kind == "cpp" else _PY_SIGNATURE).search(source)
    if m is None:
        return []
    names = []
    for p in split_args(m.group(1)):
        p = p.split(":")[0].split("=")[0].strip()
        words = re.findall(r"\w+", p)
        if words:
            names.append(words[-1])
    return names


def call_args(wrapper: str, name: str) -> list[str] | None:
    """The positional arguments of the wrapper's first call of kernel ``name`` (keyword
    arguments such as ``stream=`` left out); None when no call is found."""
    start = _index(wrapper).first_call.get(name)
    if start is None:
        return None
    depth, end = 1, None
    # parentheses only, and no further than MAX_CALL: a call never closed (a damaged or
    # hostile wrapper) costs one bounded scan, not one to the wrapper's end per kernel
    for m in _PAREN.finditer(wrapper, start, min(len(wrapper), start + MAX_CALL)):
        depth += 1 if m.group() == "(" else -1
        if depth == 0:
            end = m.start()
            break
    if end is None:
        return None
    args = split_args(wrapper[start:end])
    return [a for a in args if not re.match(r"^\w+\s*=[^=]", a)]


def symbolic_sizes(source: str, kind: str | None, wrapper: str | None,
                   name: str) -> list[dict[str, Any]]:
    """The kernel's symbolic sizes: ``[{param, expr, symbols}]`` — the parameter, the
    wrapper's expression for it (a name the wrapper assigned is replaced by what it assigned)
    and the compile's symbols in it; [] for a kernel specialized to its sizes."""
    params = kernel_params(source, kind)
    args = call_args(wrapper, name) if wrapper else None
    out: list[dict[str, Any]] = []
    if args is not None and params:
        assigned = _index(wrapper).assigned if wrapper else {}
        for param, arg in zip(params, args):
            if "ptr" in param:
                continue  # a buffer, not a size
            expr = arg
            if (not _SYMBOL.search(arg) and arg in assigned
                    and not re.search(r"\w\(", assigned[arg])):
                expr = assigned[arg]  # a numel the wrapper computed: xnumel = 4*s77
            symbols = sorted(set(_SYMBOL.findall(expr)), key=lambda s: (s[0], len(s), s))
            if symbols:
                out.append({"param": param, "expr": expr, "symbols": symbols})
        return out
    # no call to read (an imported kernel, a C++ wrapper): the kernel's own ks<N> parameters,
    # and its element counts (xnumel …), which may be symbols: not known, so not called
    # "specialized to its sizes" (a dynamic pointwise kernel takes no ks<N>, only xnumel)
    for param in params or sorted(set(_KERNEL_SYMBOL.findall(source))):
        if _KERNEL_SYMBOL.fullmatch(param) or _NUMEL_PARAM.match(param):
            out.append({"param": param, "expr": None, "symbols": []})
    return out


def _ir_index(g: GraphRecord) -> dict[str, list[int]]:
    """IR node name or member -> the positions of the IR nodes (``ir_post_fusion.json``) that
    are or hold it."""
    index: dict[str, list[int]] = {}
    for i, n in enumerate((g.ir_post or {}).get("nodes") or []):
        for key in dict.fromkeys([n.get("name"), *(n.get("members") or [])]):
            index.setdefault(str(key), []).append(i)
    return index


def kernel_accesses(g: GraphRecord, name: str,
                    index: dict[str, list[int]] | None = None) -> list[dict[str, Any]]:
    """The buffer accesses of the kernel's IR nodes (``ir_post_fusion.json``): ``[{buffer,
    mode, index, ranges}]`` — the index as sympy wrote it (``x0 + 4*x1``) over loop variables
    whose ranges may be symbolic (``{"x1": "s77"}``). ``index``: :func:`_ir_index` of ``g``
    (made once for all of a graph's kernels)."""
    prov = ((g.provenance or {}).get("kernels") or {}).get(name) or {}
    index = _ir_index(g) if index is None else index
    nodes = (g.ir_post or {}).get("nodes") or []
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i in sorted({i for op in prov.get("ir_nodes") or [] for i in index.get(op, [])}):
        for a in nodes[i].get("accesses") or []:
            key = json.dumps(a, sort_keys=True, default=str)
            if key not in seen:
                seen.add(key)
                out.append(a)
    return out


def kernel_sizes(g: GraphRecord, k: KernelEntry, wrapper: str | None,
                 index: dict[str, list[int]] | None = None) -> dict[str, Any]:
    """One kernel (an entry of ``code/kernels.json``): ``{kernel, symbolic_sizes,
    accesses}``."""
    source = g.code(k.file) or "" if k.file else ""
    return {"kernel": k.name,
            "symbolic_sizes": symbolic_sizes(source, k.kind, wrapper, k.name),
            "accesses": kernel_accesses(g, k.name, index)}


def graph_kernel_sizes(g: GraphRecord) -> list[dict[str, Any]]:
    """Per generated kernel of a graph (extern calls left out): :func:`kernel_sizes`."""
    wrapper = g.wrapper_code()
    index = _ir_index(g)
    return [kernel_sizes(g, k, wrapper, index) for k in g.kernels
            if not k.extern and k.file]


def sizes_text(sizes: list[dict[str, Any]]) -> str:
    """``ks0 = s77, xnumel = 4*s77`` or ``specialized to its sizes``."""
    return ", ".join(f"{s['param']} = {s['expr'] or '?'}" for s in sizes) \
        or "specialized to its sizes"
