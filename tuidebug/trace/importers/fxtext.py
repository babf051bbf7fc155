"""Printed FX graphs (``GraphModule.print_readable`` text) -> the graph snapshot JSON shape.

TORCH_TRACE logs and TORCH_COMPILE_DEBUG folders hold graphs only as printed code::

    def forward(self, L_x_: "f32[4, 16][16, 1]cpu"):
        l_x_ = L_x_
        # File: /src/model.py:12 in forward, code: x = self.fc(x)
        linear: "f32[4, 8][8, 1]cpu" = torch._C._nn.linear(l_x_, w, b);  l_x_ = None
        return (linear,)

That text is Python, so it is parsed with :mod:`ast` (never executed) and each statement becomes
one node of :mod:`tuidebug.trace.format.graph`'s shape: name, op, target, args with ``{"node": NAME}``
references, the dtype/shape/stride/device of its annotation and the source line of the
``# File:`` comment above it. What print_readable does not print (module paths of call nodes,
``requires_grad``) stays empty. A truncated text is parsed up to the last complete statement and
``ParsedGraph.problems`` says so.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from tuidebug.trace.format.graph import GRAPH_FORMAT
from tuidebug.trace.importers.fx_annotations import parse_annotation
from tuidebug.trace.importers.fx_builder import Builder, ann_text, slow_statement
from tuidebug.trace.importers.fx_fastpath import STMT_RE, fast_statement
from tuidebug.trace.format import safefile

__all__ = ["ParsedGraph", "parse_annotation", "parse_graph"]

_FILE_RE = re.compile(
    r"#\s*File:\s*(?P<file>.+?):(?P<line>\d+) in (?P<fn>[^,]+), code: (?P<code>.*)$")
_NO_STACK = "No stacktrace found for following nodes"
_DEF_RE = re.compile(r"^(?P<indent>\s*)def forward\(")

@dataclass
class ParsedGraph:
    nodes: list[dict[str, Any]]
    problems: list[str] = field(default_factory=list)
    bad_lines: list[int] = field(default_factory=list)  # 1-based lines of the text not read

    def to_json(self, graph_id: str = "", stage: str = "") -> dict[str, Any]:
        return {"format": GRAPH_FORMAT, "graph": graph_id, "stage": stage, "nodes": self.nodes}


def _forward_source(text: str) -> tuple[str, int, list[str]]:
    """The ``def forward`` of the outermost module, dedented: (source, first line no, problems)."""
    lines = text.split("\n")
    start = None
    indent = 0
    for i, line in enumerate(lines):
        m = _DEF_RE.match(line)
        if m:
            start, indent = i, len(m["indent"])
            break
    if start is None:
        return "", 0, ["no 'def forward' in the graph text"]
    sig_end = _signature_end(lines, start)
    end = len(lines)
    for j in range(sig_end + 1, len(lines)):
        line = lines[j]
        stripped = line.strip()
        if not stripped:
            continue
        lead = len(line) - len(line.lstrip())
        if lead <= indent:
            end = j  # a nested module class, or the end of the body
            break
    body = [ln[indent:] if ln[:indent].strip() == "" else ln.lstrip() for ln in lines[start:end]]
    return "\n".join(body), start, []


def _signature_end(lines: list[str], start: int) -> int:
    """Index of the line that closes the ``def forward(`` parenthesis."""
    depth = 0
    for j in range(start, len(lines)):
        quote = ""
        for ch in lines[j]:
            if quote:
                if ch == quote:
                    quote = ""
            elif ch in "\"'":
                quote = ch
            elif ch == "#":
                break
            elif ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    return j
    return len(lines) - 1


def _strip_comment(line: str) -> str:
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == "\\":
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            return line[:i].rstrip()
    return line


def _balance(text: str) -> int:
    depth = 0
    quote = ""
    for ch in text:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
    return depth


def _signature(lines: list[str], sig_end: int, problems: list[str]) -> list[tuple[str, str | None]]:
    text = "\n".join(lines[: sig_end + 1]) + "\n    pass\n"
    try:
        mod = ast.parse(text)
    except SyntaxError as e:
        problems.append(f"the graph's signature does not parse ({e.msg})")
        return []
    fn = next((s for s in mod.body if isinstance(s, ast.FunctionDef)), None)
    if fn is None:
        return []
    return [(a.arg, ann_text(a.annotation)) for a in fn.args.args if a.arg != "self"]


def parse_graph(text: str) -> ParsedGraph:
    """Parse one printed FX graph. Never raises: problems are returned with what was parsed."""
    problems: list[str] = []
    src, first, problems0 = _forward_source(text)
    problems += problems0
    if not src:
        return ParsedGraph([], problems)
    lines = src.split("\n")
    sig_end = _signature_end(lines, 0)
    params = _signature(lines, sig_end, problems)
    b = Builder()
    param_names = {p for p, _ in params}

    # (lineno, code, source) of each statement; multi-line statements joined
    stmts: list[tuple[int, str, dict[str, Any] | None]] = []
    source: dict[str, Any] | None = None
    acc: list[str] = []
    acc_depth = 0
    acc_line = 0
    acc_src: dict[str, Any] | None = None
    bad: list[int] = []
    for idx in range(sig_end + 1, len(lines)):
        s = lines[idx].strip()
        if not s:
            continue
        if acc:
            part = _strip_comment(s) if "#" in s else s
            acc.append(part)
            acc_depth += _balance(part)
            if acc_depth <= 0:
                stmts.append((acc_line, " ".join(acc), acc_src))
                acc = []
            continue
        if s[0] == "#":
            if "File:" in s:
                m = _FILE_RE.search(s)
                if m:
                    source = {"file": m["file"], "line": safefile.to_int(m["line"], 0),
                              "fn": m["fn"].strip(),
                              "code": m["code"].strip()}
            elif _NO_STACK in s:
                source = None
            continue
        code = _strip_comment(s) if "#" in s else s
        if code.endswith(("(", "[", "{", ",")):
            depth = _balance(code)
            if depth > 0:
                acc, acc_depth, acc_line, acc_src = [code], depth, idx + 1, source
                continue
        stmts.append((idx + 1, code, source))
    if acc:
        bad.append(acc_line)

    bare = [(st[0], st[1]) for st in stmts if " = " not in st[1] and not st[1].startswith("return")
            and STMT_RE.match(st[1]) and ": " in st[1]]
    if bare:
        # joint graphs take pytree containers (primals, tangents); the real placeholders are
        # the annotated names flattened out of them
        for _, code in bare:
            m = STMT_RE.match(code)
            assert m is not None
            b.placeholder(m["name"], m["ann"])
    else:
        for name, ann in params:
            b.placeholder(name, ann)

    for lineno, code, src_loc in stmts:
        try:
            if not fast_statement(b, code, lineno, src_loc, param_names):
                slow_statement(b, code, lineno, src_loc, param_names, bad)
        except Exception:
            bad.append(lineno)
    bad_lines = sorted({x + first for x in bad})
    if bad:
        problems.append(
            f"graph text is truncated or corrupt: {len(bad_lines)} statement(s) could not be "
            f"read (at its line {', '.join(map(str, bad_lines[:5]))}); the rest was kept")
    return ParsedGraph(b.finish(), problems, bad_lines)

