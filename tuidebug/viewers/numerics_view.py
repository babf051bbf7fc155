"""What ``info`` says of the first diverging kernel of a compile (trace/queries/numerics.py):
the kernel, its graph, the wrong buffers with their node, errors, values and user line."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from tuidebug.inert import inert_text


def _num(x: Any) -> str:
    return f"{x:.3g}" if isinstance(x, (int, float)) and not isinstance(x, bool) else "—"


def _range(r: Any) -> str:
    return f"[{_num(r[0])}, {_num(r[1])}]" if isinstance(r, list) and len(r) == 2 else "—"


def _line(src: Any) -> str:
    if not isinstance(src, dict):
        return ""
    return f"{str(src.get('file') or '?').rsplit('/', 1)[-1]}:{src.get('line')}  " \
           f"{str(src.get('code') or '').strip()}"


def numerics_lines(entry: dict[str, Any]) -> list[Text]:
    """The lines for one compile's ``numerics`` entry of the summary."""
    first = entry.get("first")
    kernels = entry.get("kernels") or []
    if not isinstance(first, dict):
        note = entry.get("note")
        if not kernels and not note:
            return []
        classified = sum(1 for k in kernels if isinstance(k, dict) and k.get("classified"))
        said = f"{len(kernels)}, none diverging" if not classified else \
            f"{len(kernels)}, {classified} differing for a reason that is not a bug"
        return [Text.assemble(("    kernels judged: ", "dim"),
                              inert_text(said + (f" — {note}" if note else "")))]
    call = f" (call {first['call'] + 1})" if first.get("call") else ""
    out = [Text.assemble(("    first diverging kernel: ", "bold red"),
                         inert_text(f"{first.get('kernel')}{call}", "bold"),
                         inert_text(f"  in {first.get('graph')} ({first.get('kind')}), "
                                    f"{first.get('judged')} kernel calls judged"))]
    for b in first.get("buffers") or []:
        out.append(inert_text(
            f"      {b.get('buffer')} = node {b.get('node')}: compiled↔fp64 "
            f"{_num(b.get('err_compiled'))}, eager↔fp64 {_num(b.get('err_eager'))} "
            f"({b.get('rule')}); values {_range(b.get('value_range'))}, eager "
            f"{_range(b.get('eager_range'))}"))
        if b.get("source"):
            out.append(inert_text(f"        {_line(b.get('source'))}", "dim"))
    if first.get("fx_nodes"):
        out.append(inert_text(f"      its FX nodes: {', '.join(map(str, first['fx_nodes']))}",
                              "dim"))
    return out

