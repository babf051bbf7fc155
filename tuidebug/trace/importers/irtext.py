"""Inductor's scheduler-node dumps (``ir_pre_fusion.txt`` / ``ir_post_fusion.txt``) -> JSON.

TORCH_COMPILE_DEBUG writes each scheduler node's ``debug_str()``; a live capture stores the
same text plus a structured ``ir_*.json`` (``{"graph": ID, "nodes": [{name, type, ir_type,
members, origins, reads, writes, users, device, is_reduction, is_extern, is_template}]}``).
This rebuilds that JSON from the text. The text does not name FX origins, so ``origins`` stays
empty.
"""

from __future__ import annotations

import re
from typing import Any

_HEADER_RE = re.compile(r"^(?P<name>[A-Za-z_]\w*): (?P<type>\w+)\((?P<inner>[^)]*)\)\s*$")
_SNODES_RE = re.compile(r"^(?P<name>[A-Za-z_]\w*)\.snodes\[\d+\] =\s*$")
_ATTR_RE = re.compile(r"^\s*(?P<obj>[A-Za-z_][\w]*)\.(?P<attr>[\w.]+) =(?P<rest>.*)$")
_DEP_RE = re.compile(r"(?:MemoryDep|StarDep|WeakDep)\((?:name=)?'(?P<name>[^']+)'")
_USER_RE = re.compile(r"NodeUser\(node=\w+\(name='(?P<name>[^']+)'\)")
_SIZES_RE = re.compile(r"^\(\[(?P<a>[^\]]*)\], \[(?P<b>[^\]]*)\]\)")
_LAYOUT_DEVICE_RE = re.compile(r"Layout\('(?P<device>[^']+)'")


class _Block:
    def __init__(self, name: str, typ: str, inner: str) -> None:
        self.name = name
        self.type = typ
        self.inner = inner
        self.members: list[_Block] = []
        self.writes: list[str] = []
        self.reads: list[str] = []
        self.users: list[str] = []
        self.buffers: list[str] = []
        self.device = ""
        self.reduction = False

    def all(self) -> list["_Block"]:
        return self.members or [self]


def parse_ir_text(text: str, graph_id: str = "") -> dict[str, Any]:
    tops: list[_Block] = []
    cur: _Block | None = None
    top: _Block | None = None
    expect_member = False
    attr = ""
    for line in text.split("\n"):
        h = _HEADER_RE.match(line)
        if h:
            b = _Block(h["name"], h["type"], h["inner"])
            if expect_member and top is not None:
                top.members.append(b)
            else:
                tops.append(b)
                top = b
            cur = b
            expect_member = False
            attr = ""
            continue
        if _SNODES_RE.match(line):
            expect_member = True
            continue
        if cur is None:
            continue
        a = _ATTR_RE.match(line)
        rest = line
        if a:
            attr = a["attr"]
            rest = a["rest"]
            if attr == "group.device":
                cur.device = rest.strip()
            elif attr == "sizes":
                s = _SIZES_RE.match(rest.strip())
                if s and s["b"].strip():
                    cur.reduction = True
            elif attr == "layout":
                if a["obj"] not in cur.buffers and a["obj"] != cur.name:
                    cur.buffers.append(a["obj"])
                d = _LAYOUT_DEVICE_RE.search(rest)
                if d and not cur.device:
                    cur.device = d["device"]
        if attr in ("writes", "unmet_dependencies", "met_dependencies"):
            target = cur.writes if attr == "writes" else cur.reads
            for d in _DEP_RE.finditer(rest):
                if d["name"] not in target:
                    target.append(d["name"])
        elif attr == "users":
            for u in _USER_RE.finditer(rest):
                if u["name"] not in cur.users:
                    cur.users.append(u["name"])
    nodes = []
    for t in tops:
        parts = t.all()
        names = [p.name for p in parts]
        writes = _union(p.writes for p in parts)
        reads = [r for r in _union(p.reads for p in parts) if r not in writes]
        users = sorted({u for p in parts for u in p.users} - set(names))
        fused = bool(t.members)
        nodes.append({
            "name": t.name, "type": t.type,
            "ir_type": None if fused else (t.inner or None),
            "members": names, "origins": [], "reads": sorted(reads), "writes": sorted(writes),
            "users": users,
            "device": t.device or next((p.device for p in parts if p.device), ""),
            "is_reduction": any(p.reduction for p in parts),
            "is_extern": t.type.startswith("ExternKernel"),
            "is_template": "Template" in t.type or "Template" in t.inner,
        })
    return {"graph": graph_id, "nodes": nodes}


def fused_count(ir: dict[str, Any]) -> int:
    """How many pairwise fusions produced these nodes (members - 1 per fused node)."""
    return sum(max(len(n.get("members") or []) - 1, 0) for n in ir.get("nodes") or [])


def _union(lists: Any) -> list[str]:
    out: list[str] = []
    for lst in lists:
        for x in lst:
            if x not in out:
                out.append(x)
    return out
