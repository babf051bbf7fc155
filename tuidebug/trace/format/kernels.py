"""Split Inductor's generated wrapper (output code) into its kernels. Pure text; no torch.

Recognises ``name = async_compile.cpp_pybinding([...], r'''<C++>''')``,
``name = async_compile.triton('name', '''<Triton>''', ...)`` and other ``async_compile.*``
definitions, extern calls in the wrapper's ``call`` (``extern_kernels.mm(...)``,
``torch.ops.aten.x.default(...)``), and Inductor's provenance comments
(``# [Provenance debug handles] cpp_fused_relu_0:2``) and source-node comments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from tuidebug.trace.format.kernel_entry import EXTERN, KernelEntry

_DEF_RE = re.compile(r"^(?P<name>[A-Za-z_]\w*) = async_compile\.(?P<api>\w+)\(", re.M)
_QUOTE_RE = re.compile(r"[rb]?('''|\"\"\")")
_HANDLE_RE = re.compile(r"#\s*\[Provenance debug handles\]\s*(?P<handles>.+)$")
_SOURCE_RE = re.compile(
    r"#\s*(?:Topologically Sorted )?Source Nodes: \[(?P<nodes>[^\]]*)\], "
    r"Original ATen: \[(?P<aten>[^\]]*)\]")
_EXTERN_RE = re.compile(
    r"^\s*(?:\w+(?:,\s*\w+)* = )?(?P<call>(?:extern_kernels|torch\.ops\.\w+|aten|"
    r"torch\.ops\.aten)\.[\w.]+)\(")

_NEUTRAL_RE = re.compile(r"^(stream\w* = get_raw_stream\(|torch\.cuda\.set_device\(|del )")
# With dynamic shapes the wrapper computes a kernel's sizes between its comments and its call:
# ``triton_poi_fused_view_1_xnumel = 128*s27`` (also ``_ynumel``, ``_r0_numel``, ``_rnumel``).
_NUMEL_RE = re.compile(r"^(?P<kernel>[A-Za-z_]\w*?)_(?:[xyz]|r\d*_?)numel = ")
_KIND_BY_API = {"cpp_pybinding": "cpp", "cpp": "cpp", "triton": "triton", "cuda": "cuda",
                "rocm": "rocm", "halide": "halide", "mps": "mps", "pallas": "pallas"}
_EXT = {"cpp": ".cpp", "triton": ".py", "cuda": ".cu", "halide": ".py", "rocm": ".cpp"}


@dataclass
class KernelDef:
    name: str
    kind: str
    source: str
    line: int  # 1-based line of the definition in the wrapper
    handles: list[str] = field(default_factory=list)  # "name:N" provenance keys
    source_nodes: list[str] = field(default_factory=list)
    original_aten: list[str] = field(default_factory=list)
    calls: int = 0

    @property
    def ext(self) -> str:
        return _EXT.get(self.kind, ".txt")


@dataclass
class ExternCall:
    name: str  # e.g. extern_kernels.addmm
    line: int
    handles: list[str] = field(default_factory=list)
    source_nodes: list[str] = field(default_factory=list)
    original_aten: list[str] = field(default_factory=list)


@dataclass
class WrapperCode:
    kernels: list[KernelDef]
    externs: list[ExternCall]


def _kernel_source(code: str, start: int) -> tuple[str, int] | None:
    """The first triple-quoted string after ``start``: (its text, index after it)."""
    m = _QUOTE_RE.search(code, start)
    if not m:
        return None
    quote = m.group(1)
    body_start = m.end()
    end = code.find(quote, body_start)
    if end < 0:
        return None
    return code[body_start:end], end + 3


def split_wrapper(code: str) -> WrapperCode:
    kernels: dict[str, KernelDef] = {}
    for m in _DEF_RE.finditer(code):
        got = _kernel_source(code, m.end())
        if got is None:
            continue
        src, _ = got
        kind = _KIND_BY_API.get(m["api"], m["api"])
        line = code.count("\n", 0, m.start()) + 1
        kd = KernelDef(name=m["name"], kind=kind, source=src.strip("\n") + "\n", line=line)
        hdr = _SOURCE_RE.search(src)
        if hdr:
            kd.source_nodes = _split_list(hdr["nodes"])
            kd.original_aten = _split_list(hdr["aten"])
        kernels[kd.name] = kd

    externs: list[ExternCall] = []
    pending_handles: list[str] = []
    pending_src: tuple[list[str], list[str]] | None = None
    in_kernel_text = _string_lines(code)
    for lineno, line in enumerate(code.splitlines(), 1):
        if lineno in in_kernel_text:
            continue
        stripped = line.strip()
        h = _HANDLE_RE.search(stripped)
        if h:
            pending_handles = [x.strip() for x in h["handles"].split(",") if x.strip()]
            continue
        s = _SOURCE_RE.search(stripped)
        if s:
            pending_src = (_split_list(s["nodes"]), _split_list(s["aten"]))
            continue
        numel = _NUMEL_RE.match(stripped)
        if (not stripped or stripped.startswith("#") or _NEUTRAL_RE.match(stripped)
                or (numel and numel["kernel"] in kernels)):
            continue  # lines between a kernel's comments and its call
        called = re.match(r"(?:\w+(?:,\s*\w+)* = )?(?P<fn>[A-Za-z_]\w*)(?:\.run)?\(", stripped)
        if called and called["fn"] in kernels:
            kd = kernels[called["fn"]]
            kd.calls += 1
            kd.handles.extend(x for x in pending_handles if x not in kd.handles)
            if pending_src and not kd.source_nodes:
                kd.source_nodes, kd.original_aten = pending_src
        else:
            e = _EXTERN_RE.match(line)
            if e and (pending_handles or pending_src):
                externs.append(ExternCall(
                    name=e["call"], line=lineno, handles=list(pending_handles),
                    source_nodes=pending_src[0] if pending_src else [],
                    original_aten=pending_src[1] if pending_src else []))
        pending_handles = []
        pending_src = None
    return WrapperCode(kernels=list(kernels.values()), externs=externs)


def _split_list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _string_lines(code: str) -> set[int]:
    """Line numbers covered by kernel source strings (so their comments are not misread)."""
    lines: set[int] = set()
    for m in _DEF_RE.finditer(code):
        got = _kernel_source(code, m.end())
        if got:
            _, end = got
            lines.update(range(code.count("\n", 0, m.start()) + 1, code.count("\n", 0, end) + 2))
    return lines


def kernel_index_entry(k: KernelDef, file: str) -> KernelEntry:
    """The row of ``code/kernels.json`` of generated kernel ``k``, its code in ``file``."""
    return KernelEntry(k.name, k.kind, file, k.line, k.handles, k.source_nodes, k.original_aten,
                       calls=k.calls, lines=k.source.count("\n"))


def extern_index_entry(e: ExternCall) -> KernelEntry:
    """The row of ``code/kernels.json`` of an extern call the wrapper makes."""
    name = e.handles[0] if e.handles else f"{e.name}@{e.line}"
    return KernelEntry(name, EXTERN, None, e.line, e.handles, e.source_nodes, e.original_aten,
                       call=e.name)


def split_args(text: str) -> list[str]:
    """``text`` split at its top-level commas."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out
