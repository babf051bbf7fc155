"""Which buffers each kernel call of Inductor's wrapper code writes, read from its text.

The wrapper (the generated module's ``call``) is straight-line code: buffers are allocated
(``buf3 = empty_strided_cpu(...)``), renamed for reuse (``buf4 = buf0; del buf0  # reuse``)
and passed to kernels (``cpp_fused_relu_0(buf2, buf4, arg2_1)``, ``triton_poi_0.run(buf0, …)``,
``extern_kernels.mm(…, out=buf5)``). The call a buffer name first appears in is the call that
writes it; a name seen before is an input — unless the kernel's own signature, defined above
``call`` (``async_compile.cpp_pybinding(['const float*', 'float*'], …)``: a pointer not
``const``; ``def triton_…(in_ptr0, out_ptr0, …)``: ``out_ptr``/``in_out_ptr``), says it writes
that argument: then a later kernel writes the buffer again (``embedding_dense_backward``: one
kernel fills it with zeros, a later one accumulates into it) and its value is final only after
the last call that writes it, where it is recorded; an extern call that writes it again
(``out=buf5``, or the first argument of an in-place ATen fallback: ``aten.index_put_(buf0, …)``,
``aten.scatter_reduce_.two(buf0, …)``, which Inductor emits for deterministic mode, bool
indices, integer accumulation…) leaves it recorded nowhere. Where it is recorded, the calls
that wrote it before are named beside it (``also_written_by``): a wrong value there may be
theirs. No torch: text only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tuidebug.trace.format.kernels import split_args

_CALL = re.compile(r"^([A-Za-z_]\w*)(?:\.run)?\((.*)\)\s*$")
_BUF = re.compile(r"\bbuf\d+\b")
_OUT = re.compile(r"\bout=(buf\d+)\b")
# an in-place ATen call (a fallback kernel): it writes its first argument
_INPLACE = re.compile(r"^(?:\w+ = )?((?:torch\.ops\.)?aten\.\w*[^_\W]_)(?:\.\w+)?\((.*)\)\s*$")
_START = re.compile(r"^\s*def (?:call|partition_\d+)\(")
_CPP = re.compile(r"^(\w+) = async_compile\.cpp_pybinding\(\[([^\]]*)\]")
_TRITON = re.compile(r"^(\w+) = async_compile\.triton\(")
_DEF = re.compile(r"^def (\w+)\(([^)]*)\)")


@dataclass
class CallSite:
    """One call of a generated kernel in the wrapper: its argument texts, and the positions of
    the buffers it writes."""

    kernel: str
    args: list[str]
    writes: list[int] = field(default_factory=list)
    # per position written: the calls that wrote that buffer before (kernels, extern calls)
    also_written_by: dict[int, list[str]] = field(default_factory=dict)


def written_params(source: str) -> dict[str, set[int]]:
    """Per kernel defined in the wrapper, the positions of the parameters it writes (none for
    a kernel whose definition is not in the text)."""
    out: dict[str, set[int]] = {}
    pending = None  # a Triton kernel whose source string is being read
    for line in source.splitlines():
        if m := _CPP.match(line):
            types = [t.strip().strip("'\"") for t in m.group(2).split(",")]
            out[m.group(1)] = {i for i, t in enumerate(types)
                               if t.endswith("*") and not t.startswith("const ")}
        elif m := _TRITON.match(line):
            pending = m.group(1)
        elif pending and (m := _DEF.match(line)) and m.group(1) == pending:
            params = [p.split(":")[0].strip() for p in m.group(2).split(",")]
            out[pending] = {i for i, p in enumerate(params)
                            if p.startswith(("out_ptr", "in_out_ptr"))}
            pending = None
        elif _START.match(line):
            break
    return out


def call_sites(source: str, kernels: set[str]) -> list[CallSite]:
    """The calls of ``kernels`` in the wrapper's ``call`` (and its partitions), in the order
    of the text, each with the buffers it writes last."""
    written = written_params(source)
    sites: list[CallSite] = []
    last: dict[str, tuple[CallSite, int] | None] = {}  # buffer -> where it was last written
    writers: dict[str, list[str]] = {}  # buffer -> the calls that wrote it, in order
    seen: set[str] = set()
    started = False
    for line in source.splitlines():
        if not started:
            started = bool(_START.match(line))
            continue
        text = line.strip()
        if not text or text.startswith(("#", "del ", "assert")) or "# reuse" in text or \
                re.match(r"^buf\d+ = empty", text):
            continue
        m = _CALL.match(text)
        if m and m.group(1) in kernels:
            site = CallSite(m.group(1), split_args(m.group(2)))
            sites.append(site)
            for i, a in enumerate(site.args):
                if _BUF.fullmatch(a) and (a not in seen or (a in last
                                                            and i in written.get(site.kernel, ()))):
                    _moved(last.get(a))
                    site.writes.append(i)
                    if writers.get(a):
                        site.also_written_by[i] = list(writers[a])
                    writers.setdefault(a, []).append(site.kernel)
                    last[a] = (site, i)
        else:  # an extern call writing a buffer a kernel wrote: its value is not that kernel's
            for callee, a in extern_writes(text):
                if a in last:
                    _moved(last[a])
                    last[a] = None
                writers.setdefault(a, []).append(callee)
        seen.update(_BUF.findall(text))
    return sites


def extern_writes(text: str) -> list[tuple[str, str]]:
    """The buffers a wrapper line that calls no generated kernel writes, with the call:
    ``out=buf5`` (``extern_kernels.mm``), and the first argument of an in-place ATen call
    (``aten.index_put_(buf0, [buf1], buf2, True)``: ``("aten.index_put_", "buf0")``)."""
    inplace = _INPLACE.match(text)
    if inplace:
        first = (split_args(inplace.group(2)) or [""])[0]
        buf = _BUF.search(first)
        return [(inplace.group(1), buf.group(0))] if buf else []
    callee = text.split("(", 1)[0].split("=")[-1].strip() if "(" in text else ""
    return [(callee or "an extern call", a) for a in _OUT.findall(text)]


def _moved(at: tuple[CallSite, int] | None) -> None:
    """A buffer written again later: not recorded where it was written before."""
    if at is not None:
        at[0].writes.remove(at[1])
