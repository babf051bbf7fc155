"""Which operators a generated repro may call: tensor computations only (docs/security.md).

The ops of a repro come from a trace's snapshot, which is untrusted: a crafted one could name
``aten.from_file`` (maps a file, and with ``shared=True`` writes it), a save/load op, or an op
of a custom namespace registered by some library. A repro (``minify``, ``bisect --repro``) may
call only ``aten`` / ``prims`` operators that are not on the list of ops with effects outside
the process, and a few ``operator`` functions; ``refusal(target)`` says why any other is not.
"""

from __future__ import annotations

import re

NAMESPACES = frozenset({"aten", "prims"})
OPERATOR_FUNCTIONS = frozenset({
    "getitem", "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "abs",
    "eq", "ne", "lt", "le", "gt", "ge", "and_", "or_", "xor", "not_", "invert", "lshift",
    "rshift", "matmul", "sym_float", "sym_int", "sym_max", "sym_min", "sym_not"})
# op names with effects outside the process: files, serialisation, printing, IPC, processes
_EFFECTS = re.compile(
    r"from_file|save|load|pickle|file|print|fopen|_write|_read|socket|mmap|share_memory|"
    r"shm|ipc|process|system|exec|spawn|network|url|download|upload|_send|_recv|record_stream",
    re.IGNORECASE)


def refusal(target: str) -> str | None:
    """Why ``target`` (``aten.relu.default``, ``operator.getitem``) may not be called in a
    repro, or None when it may."""
    parts = target.split(".")
    if parts[0] == "operator":
        if len(parts) == 2 and parts[1] in OPERATOR_FUNCTIONS:
            return None
        return f"{target} is not an allowed operator function"
    if parts[0] not in NAMESPACES:
        return (f"{target}: only aten and prims operators are run in a repro (not the "
                f"{parts[0]!r} namespace)")
    if len(parts) > 1 and _EFFECTS.search(parts[1]):
        return (f"{target} is refused: it has effects outside the process (file I/O, "
                "save/load, printing, process or network)")
    return None
