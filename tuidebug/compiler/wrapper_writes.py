"""Which buffers each kernel call of Inductor's wrapper code writes, read from its text.

The wrapper (the generated module's ``call``) is straight-line code: buffers are allocated
(``buf3 = empty_strided_cpu(...)``), renamed for reuse (``buf4 = buf0; del buf0  # reuse``)
and passed to kernels (``cpp_fused_relu_0(buf2, buf4, arg2_1)``, ``triton_poi_0.run(buf0, …)``,
``extern_kernels.mm(…, out=buf5)``). The call a buffer name first appears in is the call that
writes it; a name seen before is an input. No torch: text only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tuidebug.trace.format.kernels import split_args

_CALL = re.compile(r"^([A-Za-z_]\w*)(?:\.run)?\((.*)\)\s*$")
_BUF = re.compile(r"\bbuf\d+\b")
_START = re.compile(r"^\s*def (?:call|partition_\d+)\(")


@dataclass
class CallSite:
    """One call of a generated kernel in the wrapper: its argument texts, and the positions of
    the buffers it writes."""

    kernel: str
    args: list[str]
    writes: list[int] = field(default_factory=list)


def call_sites(source: str, kernels: set[str]) -> list[CallSite]:
    """The calls of ``kernels`` in the wrapper's ``call`` (and its partitions), in the order
    of the text, each with the buffers it writes."""
    sites: list[CallSite] = []
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
            args = split_args(m.group(2))
            writes = [i for i, a in enumerate(args) if _BUF.fullmatch(a) and a not in seen]
            sites.append(CallSite(m.group(1), args, writes))
        seen.update(_BUF.findall(text))
    return sites
