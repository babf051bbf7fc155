"""The text of drawn nodes, boxes and tooltips (HTML-like Graphviz labels, escaped)."""

from __future__ import annotations

from collections import defaultdict

from tuidebug.trace.format.graph import Node, node_line
from tuidebug.viewers.dot.options import Item
from tuidebug.viewers.dotescape import html, html_label


def target_text(n: Node) -> str:
    """``aten.addmm.default`` -> ``addmm``; ``aten.add.Tensor`` -> ``add.Tensor``."""
    if n.op in ("placeholder", "output", "get_attr"):
        return n.op if n.op != "get_attr" else f"get_attr {n.target}"
    t = n.target
    for prefix in ("aten.", "torch.ops.aten.", "operator.", "prims.", "_operator."):
        if t.startswith(prefix):
            t = t[len(prefix):]
            break
    return t[: -len(".default")] if t.endswith(".default") else t


# -- labels -----------------------------------------------------------------------------------

def esc(s: str) -> str:
    """Data inside an HTML-like label (dotescape.html: markup escaped, controls visible)."""
    return html(s)


def clip(s: str, n: int = 48) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def clip_middle(s: str, n: int = 40) -> str:
    """Long names keep their start and end (``l_self_modules_…_attn_parameters_weight_``)."""
    return s if len(s) <= n else s[: n // 2 - 4] + "…" + s[-(n - n // 2 + 3):]


def flag_row(text: str) -> str:
    """A red line under a box's label: what the numerics check found there."""
    return f'<FONT POINT-SIZE="9" COLOR="#b00000"><B>{esc(clip(text, 64))}</B></FONT>'


def node_label(n: Node, flag: str = "") -> str:
    """The name, target and shape of an FX node; ``flag``: a red line under them."""
    rows = [f"<B>{esc(clip_middle(n.name))}</B>"]  # the tooltip has it whole
    tt = target_text(n)
    if tt != n.name and n.op != "placeholder":
        rows.append(esc(clip(tt)))
    meta = n.meta_label()
    if meta:
        rows.append(f'<FONT POINT-SIZE="8" COLOR="#555555">{esc(clip(meta, 56))}</FONT>')
    if flag:
        rows.append(flag_row(flag))
    return html_label("<BR/>".join(rows))


def node_tooltip(n: Node) -> str:
    lines = [node_line(n)]
    if n.module:
        lines.append(f"module: {n.module} ({n.module_type})" if n.module_type else f"module: {n.module}")
    if n.source:
        lines.append(f"{n.source.get('file', '?')}:{n.source.get('line', '?')}  {n.source.get('code', '')}")
    return "\n".join(lines)  # escaped where it is written (dotescape.dot_attrs)


def ops_summary(members: list[Node], k: int = 4) -> str:
    counts: dict[str, int] = defaultdict(int)
    for m in members:
        if m.op not in ("placeholder", "output"):
            counts[target_text(m).split(".")[0]] += 1
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:k]
    s = ", ".join(f"{op}×{c}" if c > 1 else op for op, c in top)
    return s + (", …" if len(counts) > k else "")


def diff_counts(members: list[Node], status: dict[str, str]) -> str:
    c: dict[str, int] = defaultdict(int)
    for m in members:
        c[status.get(m.name, "same")] += 1
    parts = [f"+{c['added']}" if c["added"] else "", f"−{c['removed']}" if c["removed"] else "",
             f"~{c['changed']}" if c["changed"] else ""]
    return " ".join(p for p in parts if p)


def group_label(item: Item, module_type: str, status: dict[str, str] | None,
                flag: str = "") -> str:
    n = len(item.members)
    head = esc(clip(item.key, 60))
    sub = f"{esc(module_type)} · " if module_type else ""
    rows = [f"<B>{head}</B>", f"{sub}{n} node{'s' if n != 1 else ''}"]
    ops = ops_summary(item.members)
    if ops:
        rows.append(f'<FONT POINT-SIZE="8" COLOR="#555555">{esc(ops)}</FONT>')
    if status:
        d = diff_counts(item.members, status)
        if d:
            rows.append(f"<B>{esc(d)}</B>")
    if flag:
        rows.append(flag_row(flag))
    return html_label("<BR/>".join(rows))


def group_status(members: list[Node], status: dict[str, str]) -> str:
    """A box's diff colour: its one status besides untouched context, else "changed"."""
    st = {status.get(m.name, "same") for m in members} - {"same"}
    return st.pop() if len(st) == 1 else ("same" if not st else "changed")


def safe_id(*parts: str) -> str:
    """A DOT node id for a drawn group: no ':' (python-graphviz reads it as a port in edges)."""
    return "/".join(p.replace(":", "#") for p in parts if p)
